"""The process boundary (server/backends.py): one record of backends from one spec, the one place a deck's shared
state is configured — two decks over one record behave as two processes over one shared backend: a session, a
rate-limit bucket, a spent confirmation, a requestState key and a cursor key are the same for both."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from asgi_client import AsgiClient
from eras import modern
from helpers import client
from server.test_stateless import Driver
from stdio_client import ROOT, TOOLDECK
from tooldeck import Context, Deck
from tooldeck.protocol.errors import RegistrationError
from tooldeck.security.keys import MemoryKeyRing
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal
from tooldeck.server.backends import Backends, backends_from_spec
from tooldeck.server.bus import MemoryBus
from tooldeck.server.events import MemoryEventStore
from tooldeck.server.state import MemorySessionStore
from tooldeck.tasks import MemoryTaskStore
from tooldeck.transports.http import HttpApp

KEY = b"s" * 32


def test_a_spec_names_the_record(tmp_path: Path) -> None:
    memory = backends_from_spec("memory")
    assert (memory.spec, memory.tasks, memory.shared) == ("memory", "memory", False)
    assert isinstance(memory.sessions, MemorySessionStore) and isinstance(memory.events, MemoryEventStore)
    assert isinstance(memory.bus, MemoryBus)
    durable = backends_from_spec(f"sqlite:{tmp_path / 'tasks.sqlite3'}")
    assert durable.tasks == f"sqlite:{tmp_path / 'tasks.sqlite3'}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [("", "backends: expected a spec (memory, sqlite:PATH, redis://HOST:PORT/DB), got ''"),
     ("postgres://db", "backends 'postgres://db': use one of memory, sqlite:PATH, redis://HOST:PORT/DB"),
     ("sqlite:", "backends: task store 'sqlite:': use 'memory' or 'sqlite:PATH'")],
)  # fmt: skip
def test_a_bad_spec_says_what_is_accepted(spec: str, message: str) -> None:
    with pytest.raises(RegistrationError) as refused:
        backends_from_spec(spec)
    assert str(refused.value).startswith(message)


def test_a_deck_takes_a_record_a_spec_or_neither() -> None:
    record = Backends(tasks=MemoryTaskStore())
    assert Deck("a", backends=record).backends is record
    assert Deck("b", backends="memory").backends.tasks == "memory"
    plain = Deck("c")
    assert plain.backends.tasks is None and plain.bus is plain.backends.bus  # the transport chooses where tasks go
    store = MemoryTaskStore()
    assert Deck("d", backends="memory", task_store=store).backends.tasks is store  # task_store sets the tasks seam


def test_configured_keys_are_the_deck_s_and_random_ones_are_named() -> None:
    deck = Deck("keys", state_key=KEY)
    ring = deck.backends.keys
    assert isinstance(ring, MemoryKeyRing)
    assert ring.key("request-state") == KEY
    assert ring.key("cursor") == ring.key("cursor") and ring.random == {"cursor"}
    with pytest.raises(RegistrationError, match="state_key must be bytes, at least 32"):
        Deck("short", state_key=b"short")


def two_decks(shared: Backends, **options: Any) -> tuple[Deck, Deck]:
    """One deck's code served by two processes: two Deck objects over one record of backends."""

    def make() -> Deck:
        deck = Deck("fleet", page_size=1, backends=shared, **options)
        deck.add_tool(lambda: "a", name="first")
        deck.add_tool(lambda: "b", name="second")

        @deck.tool(security_level=8)
        def wipe(disk: str) -> str:
            return f"wiped {disk}"

        return deck

    return make(), make()


async def test_two_decks_over_one_record_share_sessions() -> None:
    here, there = two_decks(Backends())
    session = await AsgiClient(HttpApp(here)).initialize()
    other = AsgiClient(HttpApp(there))  # the load balancer sends the next request to the other process
    reply = await other.call(session, 2, "tools/call", {"name": "first", "arguments": {}})
    assert (await reply.json())["result"]["content"] == [{"type": "text", "text": "a"}]


async def test_two_decks_over_one_record_take_from_one_rate_limit() -> None:
    shared = Backends()
    here, there = two_decks(shared)
    for deck in (here, there):
        deck.apply_policy(Policy({"limits": {"per_principal": "2/minute"}}))
    answers = []
    for deck in (here, there, here):
        async with client(deck) as c:
            c.session.principal = Principal("ada")
            answers.append((await c.call_tool("first"))["isError"])
    assert answers == [False, False, True]  # the third call, on either process, finds the bucket empty


async def test_two_decks_over_one_record_read_each_other_s_cursors() -> None:
    here, there = two_decks(Backends())
    async with client(here) as first:
        page = await first.request("tools/list", {})
    async with client(there) as second:
        following = await second.request("tools/list", {"cursor": page["nextCursor"]})
    assert [t["name"] for t in page["tools"]] == ["first"] and [t["name"] for t in following["tools"]] == ["second"]


async def test_a_confirmation_spent_on_one_deck_is_refused_on_the_other() -> None:
    here, there = two_decks(Backends(keys=MemoryKeyRing({"request-state": KEY})))
    erin = Principal("erin")
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities={"elicitation": {}})
    interim = (await Driver(here, principal=erin).exchange(first))[-1]["result"]
    code = interim["inputRequests"]["input-1"]["params"]["message"].rsplit("code ", 1)[1].rstrip(".")
    confirmed = {**first, "id": 2, "params": {**first["params"], "requestState": interim["requestState"],
                                              "inputResponses": {"input-1": {"action": "accept",
                                                                             "content": {"code": code}}}}}  # fmt: skip
    done = (await Driver(there, principal=erin).exchange(confirmed))[-1]  # taken by the other process
    assert done["result"]["structuredContent"] == {"result": "wiped sda"}
    replayed = (await Driver(here, principal=erin).exchange({**confirmed, "id": 3}))[-1]  # and replayed on the first
    assert replayed["error"] == {"code": -32602, "message": "Invalid params: requestState was used already: send the "
                                 "request again without it"}  # fmt: skip


async def test_use_backends_moves_a_deck_that_does_not_serve_yet(tmp_path: Path) -> None:
    deck = Deck("moved", state_key=KEY)

    @deck.tool(task="optional")
    async def job(ctx: Context) -> str:
        return "done"

    deck.use_backends(f"sqlite:{tmp_path / 'tasks.sqlite3'}")
    assert deck.backends.keys.key("request-state") == KEY  # the deck's configured key goes with it
    async with client(deck) as c:
        created = await c.request("tools/call", {"name": "job", "arguments": {}, "task": {}})
        await c.request("tasks/result", {"taskId": created["task"]["taskId"]})
    assert (tmp_path / "tasks.sqlite3").exists()
    with pytest.raises(RuntimeError, match="serving already"):
        deck.use_backends("memory")


def test_serve_takes_a_backend_spec_and_refuses_a_bad_one_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([*TOOLDECK, "serve", "--backend", "postgres://db"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "tooldeck: --backend: backends 'postgres://db': use one of memory, sqlite:PATH, redis://HOST:PORT/DB\n"
    )


async def test_shared_backends_refuse_a_key_only_this_process_knows() -> None:
    shared = Backends(shared=True)  # a record marked shared, but with keys in this process's memory
    with pytest.raises(RuntimeError, match="the cursor and request-state key is random to this one"):
        await shared.open()
    configured = Backends(shared=True, keys=MemoryKeyRing({"request-state": KEY, "cursor": b"c" * 32}))
    await configured.open()  # keys from configuration: the same in every process that is configured alike


async def test_two_decks_over_redis_share_keys_and_spent_confirmations(engines: Any) -> None:
    from tooldeck.security.keys_redis import RedisKeyRing
    from tooldeck.security.spent_redis import RedisSpentStore

    def process() -> Backends:
        engine = engines()
        return Backends(keys=RedisKeyRing(engine), spent=RedisSpentStore(engine), engine=engine, shared=True)

    here, there = two_decks(process())
    there.use_backends(process())  # the second process: its own connection to the same Redis
    for deck in (here, there):
        await deck.open_backends()
    async with client(here) as first:
        page = await first.request("tools/list", {})
    async with client(there) as second:  # a cursor signed by one process is read by the other
        assert (await second.request("tools/list", {"cursor": page["nextCursor"]}))["tools"][0]["name"] == "second"
    erin = Principal("erin")
    ask = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities={"elicitation": {}})
    interim = (await Driver(here, principal=erin).exchange(ask))[-1]["result"]
    code = interim["inputRequests"]["input-1"]["params"]["message"].rsplit("code ", 1)[1].rstrip(".")
    answer = {"input-1": {"action": "accept", "content": {"code": code}}}
    confirmed = {**ask, "id": 2, "params": {**ask["params"], "requestState": interim["requestState"],
                                            "inputResponses": answer}}  # fmt: skip
    assert "result" in (await Driver(there, principal=erin).exchange(confirmed))[-1]
    replayed = (await Driver(here, principal=erin).exchange({**confirmed, "id": 3}))[-1]
    assert (
        replayed["error"]["message"]
        == "Invalid params: requestState was used already: send the request again without it"
    )


async def test_an_unreachable_shared_server_is_one_line_at_start(tmp_path: Path) -> None:
    from tooldeck.engine.connection import Engine
    from tooldeck.engine.errors import BackendUnavailableError

    engine = Engine.from_url(f"unix://{tmp_path / 'nothing.sock'}", timeout=0.5)
    with pytest.raises(BackendUnavailableError) as refused:
        await Backends(engine=engine, shared=True).open()
    assert "\n" not in str(refused.value) and "unreachable" in str(refused.value)
    await engine.aclose()


async def test_a_redis_spec_puts_every_seam_in_redis_and_shares_them(redis_url: str) -> None:
    from tooldeck.security.keys_redis import RedisKeyRing
    from tooldeck.security.limits_redis import RedisRateLimiter
    from tooldeck.security.spent_redis import RedisSpentStore
    from tooldeck.server.bus_redis import RedisBus
    from tooldeck.server.events_redis import RedisEventStore
    from tooldeck.server.state_redis import RedisSessionStore
    from tooldeck.tasks.redis import RedisTaskStore

    first, second = backends_from_spec(redis_url), backends_from_spec(redis_url)  # two processes' records
    try:
        assert first.shared and first.spec == redis_url and first.engine is not None
        expected = {"sessions": RedisSessionStore, "bus": RedisBus, "events": RedisEventStore,
                    "limiter": RedisRateLimiter, "spent": RedisSpentStore, "keys": RedisKeyRing,
                    "tasks": RedisTaskStore}  # fmt: skip
        assert {name: type(getattr(first, name)) for name in expected} == expected
        for record in (first, second):
            await record.open()
        assert first.keys.key("cursor") == second.keys.key("cursor")  # made by one, read by the other
        assert first.keys.key("request-state") == second.keys.key("request-state")
    finally:
        for record in (first, second):
            await record.aclose()


async def test_a_redis_spec_takes_the_keys_configuration_gives(redis_url: str) -> None:
    record = backends_from_spec(redis_url, keys={"request-state": KEY, "cursor": None})
    try:
        await record.open()
        assert record.keys.key("request-state") == KEY and len(record.keys.key("cursor")) == 32
    finally:
        await record.aclose()


@pytest.mark.parametrize(
    ("spec", "message"),
    [("redis://me:secret@h:port/0", "backends 'redis://h:port/0': the port is not a number (write redis://host:port/db)"),
     ("redis://h:6379/x", "backends 'redis://h:6379/x': the database is not a number (write redis://host:port/db)")],
)  # fmt: skip
def test_a_redis_spec_that_cannot_be_a_server_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(RegistrationError) as refused:
        backends_from_spec(spec)
    assert str(refused.value) == message


@pytest.mark.parametrize("transport", [[], ["--http", "--port", "0"]])
def test_serve_with_an_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path, transport: list[str]) -> None:
    spec = f"unix://{tmp_path / 'nothing.sock'}"
    done = subprocess.run([*TOOLDECK, "serve", "tests/transports/decks/eras_deck.py", "--backend", spec, *transport],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert (
        line
        == f"tooldeck: the shared backend unix:{tmp_path / 'nothing.sock'} is unreachable: No such file or directory"
    )
