"""Redis faults, in one process (the HTTP app over a real server that the test stops and starts): while Redis is
away, what needs it is refused with 503 and ``Retry-After`` (-32000 in the body), what does not is served, nothing
raises into the server; service resumes by itself once Redis is back; a request state is never spent twice, nor a
spend sent twice; with persistence on, a restart loses no session and no task.

``tests/fleet_faults`` does the same under load, against real ``tooldeck serve`` processes."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from asgi_client import AsgiClient, Response
from eras import MODERN, modern
from fleet_faults.outage_deck import make_deck
from fleet_faults.unreachable import Unreachable
from redis_server import RedisServer
from server.test_stateless import Driver
from tooldeck import Deck
from tooldeck.engine import BackendUnavailableError
from tooldeck.engine.connection import Engine
from tooldeck.engine.hub import Hub
from tooldeck.engine.spent import SpentMarks
from tooldeck.security.principal import Principal
from tooldeck.server.backends import backends_from_spec
from tooldeck.transports.http import HttpApp

RECOVERY = 5.0  # seconds within which a process serves again once Redis is back


def unreachable(server: RedisServer) -> Any:
    return Unreachable(server.url)


class Process:
    """One tooldeck process as the fleet has it: a deck over its own connection to the shared Redis, its HTTP app
    and a client of it."""

    def __init__(self, url: str, deck: Deck | None = None) -> None:
        self.deck = deck if deck is not None else make_deck(backends_from_spec(url))
        self.app = HttpApp(self.deck)
        self.client = AsgiClient(self.app)

    async def open(self) -> Process:
        await self.deck.open_backends()
        self.deck.bind_loop()
        return self

    async def aclose(self) -> None:
        await self.app.aclose()
        await self.deck.aclose()

    async def call(self, session: str, request_id: Any, name: str, arguments: dict[str, Any], **more: Any) -> Response:
        return await self.client.call(session, request_id, "tools/call", {"name": name, "arguments": arguments,
                                                                          **more})  # fmt: skip

    async def modern(self, request_id: Any, method: str, params: dict[str, Any]) -> Response:
        headers = {"mcp-method": method}
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
        return await self.client.post(modern(request_id, method, params), version=MODERN, headers=headers)


@pytest.fixture
def processes(at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Callable[[str], Awaitable[Process]]:
    async def make(url: str) -> Process:
        process = await Process(url).open()
        at_loop_end(process.aclose)
        return process

    return make


async def answer(response: Response) -> tuple[int, str | None, Any]:
    body = await response.body()
    return response.status, response.headers.get("retry-after"), orjson.loads(body) if body else None


def refused(request_id: Any, message: Any) -> tuple[int, str, Any]:
    """What a request that needs Redis gets while it is away (without an id: one not tied to a JSON-RPC request)."""
    error = {"code": -32000, "message": message, "data": {"tooldeck/retryAfter": 1.0}}
    if request_id is None:
        return 503, "1", {"jsonrpc": "2.0", "error": error}
    return 503, "1", {"jsonrpc": "2.0", "id": request_id, "error": error}


async def served_within(seconds: float, attempt: Callable[[], Awaitable[Response]]) -> Any:
    """Try ``attempt`` until it is answered 200 (polled: the condition is another process's), within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        status, _, body = await answer(await attempt())
        if status == 200:
            return body
        assert status == 503 and time.monotonic() < deadline, (status, body)
        await asyncio.sleep(0.05)


async def heard_across(listener: Process, publisher: Process, within: float = RECOVERY) -> None:
    """Publish on one process until the other hears it (pub/sub keeps nothing for a process not yet subscribed)."""
    heard = asyncio.Event()
    subscription = listener.deck.backends.bus.subscribe("probe", lambda payload: heard.set())
    try:
        async with asyncio.timeout(within):
            while not heard.is_set():
                publisher.deck.backends.bus.publish("probe", "hello")
                try:
                    await asyncio.wait_for(heard.wait(), 0.1)
                except TimeoutError:
                    pass
    finally:
        subscription.cancel()


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_while_redis_is_away_what_needs_it_is_503_with_retry_after_and_service_resumes_by_itself(
    private_redis: RedisServer, processes: Callable[[str], Awaitable[Process]], caplog: pytest.LogCaptureFixture
) -> None:
    here, there = await processes(private_redis.url), await processes(private_redis.url)
    held = await here.client.initialize()  # a session this process holds
    elsewhere = await there.client.initialize()  # one another process holds: here it is only in the store
    created = await answer(await here.call(held, 1, "job", {}, task={}))
    task_id = created[2]["result"]["task"]["taskId"]
    caplog.set_level(logging.INFO)
    private_redis.stop()
    message = unreachable(private_redis)
    stream_headers = {"accept": "text/event-stream", "mcp-session-id": elsewhere, "mcp-protocol-version": "2025-11-25"}
    needing = [  # (request id in the answer, the request)
        (2, lambda: here.call(held, 2, "add", {"a": 1, "b": 2})),  # its rate limit's bucket
        (3, lambda: here.call(elsewhere, 3, "add", {"a": 1, "b": 2})),  # the session's state
        (4, lambda: here.call(held, 4, "job", {}, task={})),  # a task to store
        (5, lambda: here.client.call(held, 5, "tasks/get", {"taskId": task_id})),
        (6, lambda: here.modern(6, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})),  # 2026: a bucket
        ("init", lambda: here.client.post({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}},
            version=None)),  # a new session to store
        (None, lambda: here.client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=elsewhere)),
        (None, lambda: here.client.request("GET", headers=stream_headers)),
        (None, lambda: here.client.request("DELETE", headers={"mcp-session-id": elsewhere})),
    ]  # fmt: skip
    for request_id, attempt in needing:
        started = time.monotonic()
        assert await answer(await attempt()) == refused(request_id, message), request_id
        assert time.monotonic() - started < 2.0 + 0.5  # within the engine's timeout (refused at once, here)
    listed = await answer(await here.client.call(held, 7, "tools/list"))  # needs nothing shared: served
    assert listed[0] == 200 and [tool["name"] for tool in listed[2]["result"]["tools"]] == ["add", "job"]
    assert (await answer(await here.modern(8, "tools/list", {})))[0] == 200
    own = await here.client.request("GET", headers={**stream_headers, "mcp-session-id": held})
    assert own.status == 200  # the stream of a session held here opens: its events are sent, not stored
    priming = await anext(aiter(own.events()))
    assert priming.id is not None and priming.id.rpartition(".")[2] == "unstored-1", priming
    await own.close()

    private_redis.start()  # empty: no persistence; the scripts are gone too (NOSCRIPT, then loaded again)
    done = await served_within(RECOVERY, lambda: here.call(held, 9, "add", {"a": 2, "b": 3}))
    assert done["result"]["structuredContent"] == {"result": 5}
    # Redis came back empty; the process holding the session stored it again as it served it, so the other finds it
    assert (await answer(await there.call(held, 14, "add", {"a": 1, "b": 2})))[0] == 200
    assert (await answer(await here.modern(10, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})))[0] == 200
    fresh = await there.client.initialize()  # stored again, and found by the other process
    assert (await answer(await here.call(fresh, 11, "add", {"a": 1, "b": 2})))[0] == 200
    again = await answer(await there.call(fresh, 12, "job", {}, task={}))
    got = await answer(await here.client.call(fresh, 13, "tasks/get", {"taskId": again[2]["result"]["task"]["taskId"]}))
    assert got[0] == 200 and got[2]["result"]["status"] in ("working", "completed")
    await heard_across(there, here)  # the bus resubscribed by itself
    assert no_tracebacks(caplog) == []


async def test_a_task_that_ends_while_redis_is_away_is_recorded_when_it_returns(
    persistent_redis: RedisServer, processes: Callable[[str], Awaitable[Process]], caplog: pytest.LogCaptureFixture
) -> None:
    here = await processes(persistent_redis.url)
    session = await here.client.initialize()
    created = await answer(await here.call(session, 1, "job", {"seconds": 0.3}, task={}))
    task_id = created[2]["result"]["task"]["taskId"]
    caplog.set_level(logging.INFO, logger="tooldeck.tasks")
    persistent_redis.stop()
    async with asyncio.timeout(10):
        while "its outcome waits for the task store" not in caplog.text:  # the work ended, its record cannot be written
            await asyncio.sleep(0.02)
    persistent_redis.start()
    body = await served_within(RECOVERY, lambda: here.client.call(session, 2, "tasks/get", {"taskId": task_id}))
    deadline = time.monotonic() + RECOVERY
    while body["result"]["status"] == "working":  # the outcome is written once the store is back
        assert time.monotonic() < deadline, body
        await asyncio.sleep(0.05)
        body = (await answer(await here.client.call(session, 2, "tasks/get", {"taskId": task_id})))[2]
    assert body["result"]["status"] == "completed"
    result = await answer(await here.client.call(session, 3, "tasks/result", {"taskId": task_id}))
    assert result[2]["result"]["content"] == [{"type": "text", "text": "done"}]
    assert no_tracebacks(caplog) == []


async def test_with_persistence_a_redis_restart_loses_no_session_and_no_task(
    persistent_redis: RedisServer, processes: Callable[[str], Awaitable[Process]]
) -> None:
    here = await processes(persistent_redis.url)
    sessions = [await here.client.initialize() for _ in range(5)]
    tasks = {}
    for n, session in enumerate(sessions):
        created = await answer(await here.call(session, n, "job", {}, task={}))
        tasks[created[2]["result"]["task"]["taskId"]] = session
    for task_id, session in tasks.items():  # every one has ended before the restart
        await here.client.call(session, "r", "tasks/result", {"taskId": task_id})
    page = (await answer(await here.client.call(sessions[0], "l", "tools/list")))[2]
    persistent_redis.stop()
    persistent_redis.start()
    there = await processes(persistent_redis.url)  # a process that knows none of them from memory
    for n, session in enumerate(sessions):
        status, _, body = await answer(await there.call(session, 100 + n, "add", {"a": n, "b": 1}))
        assert status == 200 and body["result"]["structuredContent"] == {"result": n + 1}
    for task_id, session in tasks.items():
        got = await answer(await there.client.call(session, "g", "tasks/get", {"taskId": task_id}))
        assert got[0] == 200 and got[2]["result"]["status"] == "completed", got
    assert there.deck.backends.keys.key("cursor") == here.deck.backends.keys.key("cursor")  # the ring: the same keys
    assert page["result"]["tools"]  # (one page: the deck has two tools)


async def test_a_request_state_is_never_spent_twice_across_an_outage_and_a_restart(
    persistent_redis: RedisServer, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]
) -> None:
    runs: list[str] = []

    def process() -> Deck:
        deck = Deck("fleet", backends=backends_from_spec(persistent_redis.url))
        at_loop_end(deck.aclose)

        @deck.tool(security_level=8)
        def wipe(disk: str) -> str:
            runs.append(disk)
            return f"wiped {disk}"

        return deck

    here, there = process(), process()
    for deck in (here, there):
        await deck.open_backends()
    erin = Principal("erin")
    ask = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities={"elicitation": {}})
    interim = (await Driver(here, principal=erin).exchange(ask))[-1]["result"]
    code = interim["inputRequests"]["input-1"]["params"]["message"].rsplit("code ", 1)[1].rstrip(".")
    answered = {"input-1": {"action": "accept", "content": {"code": code}}}
    confirmed = {**ask, "id": 2, "params": {**ask["params"], "requestState": interim["requestState"],
                                            "inputResponses": answered}}  # fmt: skip
    persistent_redis.stop()
    during = (await Driver(there, principal=erin).exchange(confirmed))[-1]
    assert during["error"] == {"code": -32000, "message": unreachable(persistent_redis),
                               "data": {"tooldeck/retryAfter": 1.0}}  # fmt: skip
    assert runs == []  # refused, not admitted: the spent store fails closed
    persistent_redis.start()
    done = (await Driver(there, principal=erin).exchange({**confirmed, "id": 3}))[-1]
    assert done["result"]["structuredContent"] == {"result": "wiped sda"} and runs == ["sda"]
    persistent_redis.stop()
    persistent_redis.start()  # the mark was written through to the append-only file
    for deck in (here, there):
        replayed = (await Driver(deck, principal=erin).exchange({**confirmed, "id": 4}))[-1]
        assert replayed["error"] == {"code": -32602, "message": "Invalid params: requestState was used already: "
                                     "send the request again without it"}  # fmt: skip
    assert runs == ["sda"]


async def test_a_spend_whose_answer_timed_out_is_refused_and_never_sent_again(
    private_redis: RedisServer, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]
) -> None:
    engine = Engine.from_url(private_redis.url, timeout=0.5)
    at_loop_end(engine.aclose)
    marks = SpentMarks(engine)
    await engine.check()  # a pooled connection, made while the server answers
    assert private_redis.process is not None
    os.kill(private_redis.process.pid, signal.SIGSTOP)  # it takes the command, and answers nothing for now
    try:
        with pytest.raises(BackendUnavailableError, match=r"is unreachable: no answer within 0\.5 s$"):
            await marks.spend("request-state:n1", 60)
    finally:
        os.kill(private_redis.process.pid, signal.SIGCONT)
    assert await marks.spend("request-state:n1", 60) is False  # the command ran once: spent, and refused
    stats = await engine.client.info("commandstats")
    assert stats["cmdstat_set"]["calls"] == 2  # the timed-out spend once (never sent again), and this one


async def test_keys_a_restart_lost_are_written_back_by_the_processes_that_sign_with_them(
    private_redis: RedisServer, processes: Callable[[str], Awaitable[Process]], caplog: pytest.LogCaptureFixture
) -> None:
    here = await processes(private_redis.url)
    hub = Hub.of(here.deck.backends.engine)
    await hub.ready()  # listening from the start (Backends.open), though nothing here subscribed
    made = hub.subscriptions
    private_redis.stop()
    private_redis.start()  # empty: the keys are gone from Redis
    await hub.ready(RECOVERY, after=made)  # heard again, and the keys were written back before that
    there = await processes(private_redis.url)  # a process started after the restart reads them
    for purpose in ("request-state", "cursor"):
        assert there.deck.backends.keys.key(purpose) == here.deck.backends.keys.key(purpose)
    engine = here.deck.backends.engine
    await engine.client.set(engine.key("key", "cursor"), b"n" * 32)  # another process was first with a new one
    with caplog.at_level(logging.WARNING, logger="tooldeck.engine"):
        await here.deck.backends.keys.restore()
    assert caplog.messages == [f"the shared cursor key at {private_redis.url} is not the one this process signs with "
                               "(Redis lost it and another process made a new one): restart this process to sign "
                               "with it"]  # fmt: skip


class UnreachableStore:
    """A task store whose server is away: every operation is ``BackendUnavailableError``."""

    def __getattr__(self, name: str) -> Any:
        async def refuse(*args: Any, **kwargs: Any) -> Any:
            raise BackendUnavailableError("the shared backend redis://cache:6379/0 is unreachable: Connection refused")

        return refuse


async def test_a_lease_round_while_redis_is_away_is_one_line_and_the_next_round_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tooldeck.server.takeover import Leases

    manager = SimpleNamespace(store=UnreachableStore(), running={"t1": None}, clock=time.time)
    leases = Leases(manager, "node-a", lease=1.0, renewal=0.01)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="tooldeck.tasks")
    keeper = asyncio.get_running_loop().create_task(leases.forever())
    try:
        async with asyncio.timeout(5):
            while len(caplog.records) < 3:  # round after round, each said in one line
                await asyncio.sleep(0.01)
    finally:
        keeper.cancel()
    assert {record.getMessage() for record in caplog.records} == {
        "task leases were not renewed this round: the shared backend redis://cache:6379/0 is unreachable: "
        "Connection refused"
    }
    assert not any(record.exc_info for record in caplog.records)


async def test_a_delete_refused_while_redis_is_away_ends_the_session_when_it_is_sent_again(
    persistent_redis: RedisServer, processes: Callable[[str], Awaitable[Process]]
) -> None:
    here, there = await processes(persistent_redis.url), await processes(persistent_redis.url)
    session = await here.client.initialize()
    persistent_redis.stop()
    delete = {"mcp-session-id": session}
    assert await answer(await here.client.request("DELETE", headers=delete)) == refused(None, unreachable(
        persistent_redis))  # fmt: skip
    persistent_redis.start()
    deleted = await served_within(RECOVERY, lambda: here.client.request("DELETE", headers=delete))
    assert deleted is None  # 200, no body
    for process in (here, there):  # gone everywhere
        status, _, body = await answer(await process.call(session, 1, "add", {"a": 1, "b": 2}))
        assert status == 404 and body["error"]["message"].startswith("Session not found"), body


async def test_a_server_still_loading_its_data_is_unavailable_not_an_error() -> None:
    # A restarted server with persistence answers LOADING until its data is read back: for a call, that is Redis not
    # there yet (503, Retry-After), never an internal error. A server of a few lines answers it to every command.
    ended = asyncio.Event()

    async def loading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(65536):
                writer.write(b"-LOADING Valkey is loading the dataset in memory\r\n")
        finally:
            writer.close()
            ended.set()

    server = await asyncio.start_server(loading, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    engine = Engine.from_url(f"redis://127.0.0.1:{port}/0", timeout=1.0)
    try:
        with pytest.raises(BackendUnavailableError) as caught:
            await SpentMarks(engine).spend("request-state:n1", 60)
        assert str(caught.value) == (
            f"the shared backend redis://127.0.0.1:{port}/0 is unreachable: Valkey is loading the dataset in memory"
        )
    finally:
        await engine.aclose()
        async with asyncio.timeout(5):
            await ended.wait()  # the connection's end reached the server
        server.close()
        await server.wait_closed()


async def test_the_hub_stops_listening_at_once_while_it_reconnects(private_redis: RedisServer) -> None:
    # Its listener reconnects inside the client, which can swallow a cancellation and read on: closing must end it
    # all the same, at once (not at the test's time limit), whenever it comes.
    for pause in (0.0, 0.01, 0.03, 0.06, 0.1):
        engines = [Engine.from_url(private_redis.url, timeout=1.0) for _ in range(4)]
        for engine in engines:
            Hub.of(engine).subscribe("t", lambda payload: None)
            await Hub.of(engine).ready()
        private_redis.stop()
        private_redis.start()
        await asyncio.sleep(pause)  # the listeners are finding the server again as the engines close
        started = time.monotonic()
        for engine in engines:
            await engine.aclose()
        assert time.monotonic() - started < 2.0, pause


async def test_an_app_whose_sessions_are_in_redis_shuts_down_in_one_line_while_it_is_away(
    private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Sessions in Redis for one process (not shared): closing them at shutdown removes their stored state, which
    # cannot be done while Redis is away. The shutdown completes all the same, saying so in one line.
    from tooldeck.server.backends import Backends
    from tooldeck.server.events_redis import RedisEventStore
    from tooldeck.server.state_redis import RedisSessionStore

    engine = Engine.from_url(private_redis.url, timeout=1.0)
    deck = make_deck(Backends(sessions=RedisSessionStore(engine), events=RedisEventStore(engine), engine=engine))
    app = HttpApp(deck)
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[Any] = []
    started = asyncio.Event()

    async def receive() -> Any:
        if len(inbox) == 1:
            await started.wait()  # shutdown once the test says so
        return inbox.pop(0)

    async def send(message: Any) -> None:
        sent.append(message["type"])

    lifespan = asyncio.get_running_loop().create_task(app({"type": "lifespan"}, receive, send))
    async with asyncio.timeout(10):
        while not sent:
            await asyncio.sleep(0.01)
    assert sent == ["lifespan.startup.complete"]
    await AsgiClient(app).initialize()
    private_redis.stop()
    caplog.set_level(logging.WARNING, logger="tooldeck.http")
    started.set()
    await asyncio.wait_for(lifespan, 10)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    said = [r.getMessage().partition(": ") for r in caplog.records if r.name == "tooldeck.http"]
    assert said == [("shutting down without the shared backend", ": ", unreachable(private_redis))]
