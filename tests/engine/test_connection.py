"""The engine's connection: URLs, the one-line error when Redis cannot be reached, scripts that survive a server
forgetting them, and recovery without help once a stopped server is back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from redis_server import RedisServer, free_port
from tooldeck.engine import BackendUnavailableError
from tooldeck.engine.connection import Engine
from tooldeck.engine.values import JsonValues
from tooldeck.engine.wire import pack


@pytest.mark.parametrize(
    ("url", "prefix", "name"),
    [("redis://127.0.0.1:6379/0", "tooldeck:", "redis://127.0.0.1:6379/0"),
     ("redis://:hunter2@10.0.0.5:6380/3?prefix=deck-a:", "deck-a:", "redis://10.0.0.5:6380/3"),
     ("valkey://user:pw@cache/1", "tooldeck:", "redis://cache/1"),
     ("rediss://cache:6380", "tooldeck:", "rediss://cache:6380")],
)  # fmt: skip
def test_a_url_gives_the_server_its_prefix_and_a_name_without_credentials(url: str, prefix: str, name: str) -> None:
    engine = Engine.from_url(url)  # nothing connects before the first command
    assert (engine.prefix, engine.name) == (prefix, name)
    assert engine.key("session", "s1") == f"{prefix}session:s1"
    assert Engine.from_url(url, prefix="other:").prefix == "other:"


def test_a_url_that_is_not_redis_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"^not a Redis URL: 'http://h:1/x' \(write redis://host:port/db\)$"):
        Engine.from_url("http://user:secret@h:1/x")


async def test_an_unreachable_server_is_one_line_naming_it_and_never_its_password() -> None:
    port = free_port()  # nothing listens there
    engine = Engine.from_url(f"redis://:hunter2@127.0.0.1:{port}/0", timeout=1.0)
    try:
        with pytest.raises(BackendUnavailableError) as caught:
            await engine.check()
        message = str(caught.value)
        assert (
            message == f"the shared backend redis://127.0.0.1:{port}/0 is unreachable: Connection refused"
        )  # no password
        refusal = caught.value
        assert (refusal.http_status, refusal.headers) == (503, [(b"retry-after", b"1")])
        assert refusal.to_error() == {"code": -32000, "message": message, "data": {"tooldeck/retryAfter": 1.0}}
        with pytest.raises(BackendUnavailableError):
            await JsonValues(engine, "session").get("s1")  # every primitive says the same
    finally:
        await engine.aclose()


async def test_check_passes_on_a_served_server_and_loads_the_scripts(engine: Engine) -> None:
    JsonValues(engine, "session")  # makes its scripts
    await engine.client.script_flush()
    await engine.check()
    shas = [script.sha for script in engine._scripts.values()]
    assert shas and await engine.client.script_exists(*shas) == [True] * len(shas)


class OldServer:
    """A client whose server says it is Redis 6.2 (no real server of that age is at hand)."""

    async def info(self, section: str) -> dict[str, Any]:
        return {"redis_version": "6.2.14"}


async def test_a_server_older_than_7_2_is_refused_saying_so() -> None:
    engine = Engine(OldServer(), name="redis://old:6379/0")  # type: ignore[arg-type]
    with pytest.raises(BackendUnavailableError, match=r"^the shared backend redis://old:6379/0 is Redis 6\.2\.14: "
                       r"tooldeck needs Redis 7\.2 or newer, or Valkey$"):  # fmt: skip
        await engine.check()


async def test_a_server_that_forgot_the_scripts_is_given_them_again(engine: Engine) -> None:
    values = JsonValues(engine, "session")
    await values.put("s1", {"n": 1})
    await engine.client.script_flush()  # as a restart does
    await values.put("s1", {"n": 2})
    assert await values.get("s1") == {"n": 2}


async def test_a_prepared_call_is_sent_packed_and_given_again_to_a_server_that_forgot_it(engine: Engine) -> None:
    script = engine.script("return {KEYS[1], ARGV[1], ARGV[2]}")
    prepared = script.prepare([engine.key("k")], ["a", 2])
    assert prepared.packed == pack(prepared.args)
    assert await script.run(prepared) == [b"tooldeck:k", b"a", b"2"]
    await engine.client.script_flush()  # as a restart does
    assert await script.run(prepared) == [b"tooldeck:k", b"a", b"2"]


async def test_a_call_packed_but_for_its_last_arguments_sends_them_each_time(engine: Engine) -> None:
    script = engine.script("return {KEYS[1], ARGV[1], ARGV[2]}")
    await script.load()
    await engine.command("PING")  # the line is up: soon_with can send
    head = script.head([engine.key("k")], ["first"], 1)
    answers = [script.soon_with(head, (last,)) for last in (1.5, "two")]
    assert [await answer for answer in answers if answer is not None] == [
        [b"tooldeck:k", b"first", b"1.5"], [b"tooldeck:k", b"first", b"two"]]  # fmt: skip


async def test_an_engine_with_no_line_sends_a_prepared_call_through_its_pool(redis_url: str) -> None:
    engine = Engine.from_url(redis_url)
    engine.wire = None  # as over TLS
    try:
        script = engine.script("return ARGV[1]")
        assert await script.run(script.prepare([], ["x"])) == b"x"
        assert script.soon_with(script.head([], [], 1), ("x",)) is None
    finally:
        await engine.aclose()


async def test_prefixes_keep_decks_apart_on_one_server(engines: Callable[..., Engine]) -> None:
    one, two = JsonValues(engines(prefix="one:"), "session"), JsonValues(engines(prefix="two:"), "session")
    await one.put("s1", "mine")
    assert await two.get("s1") is None
    assert (await one.count(), await two.count()) == (1, 0)


async def test_the_engine_recovers_by_itself_when_the_server_returns(private_redis: RedisServer) -> None:
    engine = Engine.from_url(private_redis.url, timeout=1.0)
    values = JsonValues(engine, "session")
    try:
        await values.put("s1", {"n": 1})
        private_redis.stop()
        with pytest.raises(BackendUnavailableError, match="is unreachable"):
            await values.get("s1")
        with pytest.raises(BackendUnavailableError, match="is unreachable"):
            await values.put("s1", {"n": 2})
        private_redis.start()  # the same port; nothing was saved, so the server comes back empty
        assert await values.get("s1") is None  # the same engine, no call to reconnect
        await values.put("s1", {"n": 3})
        assert await values.get("s1") == {"n": 3}
    finally:
        await engine.aclose()


async def test_more_commands_at_once_than_the_pool_has_connections_wait_their_turn(
    engines: Callable[..., Engine],
) -> None:
    # A busy process issues more commands at once than its pool holds connections: each waits for a connection to
    # come free (within the engine's timeout), none is refused as if the server were unreachable.
    engine = engines(max_connections=4)
    values = JsonValues(engine, "session")
    await asyncio.gather(*(values.put(f"s{n}", {"n": n}) for n in range(200)))
    assert await asyncio.gather(*(values.get(f"s{n}") for n in range(200))) == [{"n": n} for n in range(200)]
    assert len(engine.client.connection_pool._available_connections) <= 4
