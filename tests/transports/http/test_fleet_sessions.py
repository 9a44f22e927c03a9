"""Sessions across the processes of a fleet (two apps over shared backends: one in-memory record, or Redis): a
DELETE on one process ends the session on every process — its work, its open streams, and the next request there
is a 404 — and a session is idle only when it is idle on every process, so no reaper closes a session another
process serves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from asgi_client import AsgiClient, Response
from helpers import adder_deck
from tooldeck import Context, Deck
from tooldeck.engine.errors import BackendUnavailableError
from tooldeck.server.backends import Backends
from tooldeck.transports.http import HttpApp
from tooldeck.transports.http.sessions import ENDED
from transports.http.fleet_apps import KINDS, Fleet, fleet_for, hearing

T0 = 1_000_000.0
IDLE = 100.0


def make_deck(backends: Backends) -> Deck:
    deck = adder_deck("fleet-sessions", backends=backends)
    deck.state = {"started": asyncio.Event()}  # type: ignore[attr-defined]

    @deck.tool
    async def record(n: int) -> int:
        deck.state.setdefault("runs", []).append(n)  # type: ignore[attr-defined]
        return n

    @deck.tool
    async def forever(ctx: Context) -> str:
        deck.state["started"].set()  # type: ignore[attr-defined]
        await asyncio.sleep(60)
        return "never"

    return deck


@pytest.fixture(params=KINDS)
def fleet(request: pytest.FixtureRequest, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Fleet:
    return fleet_for(request, at_loop_end, make_deck, session_idle_timeout=IDLE)


def ping(client: AsgiClient, session: str) -> Any:
    return client.post({"jsonrpc": "2.0", "id": "ping", "method": "ping"}, session=session)


async def ends(response: Response) -> None:
    """Read a stream to its end (a stream that never ends fails the test at the client's timeout)."""
    async for _ in response.events(timeout=5):
        pass


async def fleet_of(fleet: Fleet) -> tuple[Any, Any, AsgiClient, AsgiClient]:
    first, second = await fleet.start(2)
    return first, second, AsgiClient(first), AsgiClient(second)


async def test_a_session_deleted_on_one_process_ends_on_every_process(fleet: Fleet) -> None:
    _first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await ping(b, session)).status == 200  # the second process serves it too (rebuilt from the store)
    stream = await b.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session,
                                             "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert stream.status == 200
    call = asyncio.ensure_future(b.call(session, "work", "tools/call", {"name": "forever", "arguments": {}}))
    await asyncio.wait_for(second.deck.state["started"].wait(), 5)

    assert (await a.request("DELETE", headers={"mcp-session-id": session})).status == 200
    await asyncio.wait_for(ends(stream), 5)  # the GET stream open on the other process ends ...
    response = await asyncio.wait_for(call, 5)  # ... and so does the work running there
    assert response.status == 404
    assert session not in second.sessions
    again = await ping(b, session)
    assert again.status == 404  # as for a session it never knew
    assert "Session not found" in (await again.json())["error"]["message"]
    assert (await ping(a, session)).status == 404


async def test_a_session_deleted_on_one_process_is_404_on_one_that_never_served_it(fleet: Fleet) -> None:
    _first, _second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await a.request("DELETE", headers={"mcp-session-id": session})).status == 200
    assert (await ping(b, session)).status == 404


async def test_requests_that_reach_a_process_together_rebuild_one_copy_of_the_session(fleet: Fleet) -> None:
    """A process that never served a session gets several of its requests at once (a GET stream opened again after
    a restart, and a POST): each waits for the store, the first rebuilds the session, and the others are served by
    that copy — none is told the session is not found."""
    _first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    answers = await asyncio.gather(*(ping(b, session) for _ in range(4)))
    assert [answer.status for answer in answers] == [200] * 4
    assert list(second.sessions) == [session]


async def test_a_get_stream_opened_on_another_process_replaces_the_one_open_here(fleet: Fleet) -> None:
    first, _second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    old = await a.request("GET", headers=headers)
    assert old.status == 200
    assert (await anext(old.events(timeout=5))).data == ""  # the priming event
    new = await b.request("GET", headers=headers)
    assert new.status == 200
    await asyncio.wait_for(ends(old), 5)  # the older stream ends: the client reads one
    assert first.sessions[session].standalone is None
    events = new.events(timeout=5)
    assert (await anext(events)).data == ""
    first.deck.add_tool(lambda: "hi", name="hello")  # announced by both processes' copies, sent on one stream
    note = await anext(events)
    assert note.message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    await new.close()


def clocks(*apps: Any) -> list[float]:
    """One wall clock for the registries of ``apps`` (the marks in the store), moved by the test."""
    now = [T0]
    for app in apps:
        app.registry.clock = lambda: now[0]
    return now


def idle_here(app: Any, session: str) -> None:
    """The app's own copy of the session has seen no request for longer than the idle timeout."""
    app.sessions[session].last_active -= 2 * IDLE


async def test_a_session_served_by_another_process_is_not_reaped(fleet: Fleet) -> None:
    first, second, a, b = await fleet_of(fleet)
    now = clocks(first, second)
    touch_every = first.registry.touch_every
    session = await a.initialize()
    now[0] += IDLE / 2
    assert (await ping(b, session)).status == 200  # served by the second process, half a timeout later
    now[0] += IDLE
    idle_here(first, session)
    assert await first.reap() == 0  # idle on the first process, not on the second: kept, in the store too
    assert session in first.sessions
    assert (await ping(b, session)).status == 200

    now[0] += IDLE + touch_every + 1  # no process served it for the timeout: it is idle everywhere
    idle_here(first, session)
    ended = hearing(second, ENDED)
    assert await first.reap() == 1
    assert session not in first.sessions
    await asyncio.wait_for(ended.wait(), 5)  # over Redis the end reaches the second process a moment later
    assert session not in second.sessions
    assert (await ping(b, session)).status == 404


async def test_a_stream_held_open_on_another_process_keeps_the_session(fleet: Fleet) -> None:
    first, second, a, b = await fleet_of(fleet)
    now = clocks(first, second)
    session = await a.initialize()
    assert (await ping(b, session)).status == 200
    stream = await b.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session,
                                             "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert stream.status == 200
    for _ in range(3):  # three timeouts pass with no request anywhere, but the stream stays open on the second
        now[0] += IDLE
        idle_here(first, session)
        idle_here(second, session)
        assert await second.reap() == 0  # its reaper marks the session it holds open ...
        assert await first.reap() == 0  # ... so the first's sees it busy
    assert session in first.sessions and session in second.sessions
    await stream.close()


async def test_each_request_marks_the_session_once(fleet: Fleet) -> None:
    first, second, a, b = await fleet_of(fleet)
    now = clocks(first, second)
    session = await a.initialize()
    store = first.deck.backends.sessions
    touched: list[str] = []
    for found in {id(app.deck.backends.sessions): app.deck.backends.sessions for app in (first, second)}.values():
        real = found.touch

        async def touch(session_id: str, at: float, real: Any = real) -> bool:
            touched.append(session_id)
            return await real(session_id, at)

        found.touch = touch  # type: ignore[method-assign]
        soon = getattr(found, "touch_soon", None)
        if soon is not None:  # Redis: sent with the request's next command, heard before its work goes on

            def touch_soon(session_id: str, at: float, soon: Any = soon) -> Any:
                touched.append(session_id)
                return soon(session_id, at)

            found.touch_soon = touch_soon  # type: ignore[attr-defined]
    for client in (a, b, a):
        now[0] += 1
        assert (await ping(client, session)).status == 200
    assert touched == [session] * 3  # one write per request, on whichever process serves it
    assert await store.last_seen([session]) == [now[0]]


async def test_a_session_the_store_no_longer_has_is_404_before_the_bus_says_so(fleet: Fleet) -> None:
    first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await ping(b, session)).status == 200
    await first.deck.backends.sessions.delete(session)  # ended, and the news not on the bus (yet, or lost)
    response = await ping(b, session)
    assert response.status == 404
    assert "Session not found" in (await response.json())["error"]["message"]
    assert session not in second.sessions  # its copy is dropped there and then


@pytest.fixture(params=KINDS)
def limited_fleet(request: pytest.FixtureRequest, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None],
                  tmp_path: Path) -> Fleet:  # fmt: skip
    """The fleet with a rate limit on every call: over Redis, the session's mark rides with the limit's script."""
    policy = tmp_path / "policy.toml"
    policy.write_text('[limits]\nper_principal = "1000/s"\n')

    def make_limited_deck(backends: Backends) -> Deck:
        deck = make_deck(backends)
        deck.apply_policy(policy)
        return deck

    return fleet_for(request, at_loop_end, make_limited_deck, session_idle_timeout=IDLE)


async def ended_elsewhere_call(fleet: Fleet) -> None:
    """A call on a session ended on another process, the news not on the bus: 404, and its tool never runs."""
    first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await b.call(session, 1, "tools/call", {"name": "record", "arguments": {"n": 1}})).status == 200
    await first.deck.backends.sessions.delete(session)  # ended, and the news not on the bus (yet, or lost)
    response = await b.call(session, 2, "tools/call", {"name": "record", "arguments": {"n": 2}})
    assert response.status == 404
    assert "Session not found" in (await response.json())["error"]["message"]
    assert second.deck.state["runs"] == [1]  # type: ignore[attr-defined]  # the second call never ran
    assert session not in second.sessions


async def test_a_call_on_a_session_ended_elsewhere_never_runs_its_tool_and_is_404(fleet: Fleet) -> None:
    await ended_elsewhere_call(fleet)


async def test_the_same_when_the_sessions_mark_rides_with_a_rate_limit(limited_fleet: Fleet) -> None:
    await ended_elsewhere_call(limited_fleet)


async def test_a_rate_limited_call_of_a_session_costs_one_write_to_redis(
    limited_fleet: Fleet,
) -> None:
    if limited_fleet.kind == "memory":
        pytest.skip("no Redis: nothing is written")
    first, _second, a, _b = await fleet_of(limited_fleet)
    session = await a.initialize()
    assert (await a.call(session, 1, "tools/call", {"name": "record", "arguments": {"n": 1}})).status == 200
    engine = first.deck.backends.engine
    assert engine is not None and engine.wire is not None and engine.wire._line is not None
    transport = engine.wire._line.transport
    assert transport is not None
    writes: list[bytes] = []
    write = transport.write
    transport.write = lambda data: (writes.append(bytes(data)), write(data))[1]  # type: ignore[method-assign]
    try:
        response = await a.call(session, 2, "tools/call", {"name": "record", "arguments": {"n": 2}})
        assert response.status == 200
        await response.body()
    finally:
        transport.write = write  # type: ignore[method-assign]
    assert len(writes) == 1  # the session's mark and the rate limit's script, in one write
    assert writes[0].count(b"EVALSHA") == 2


async def test_without_shared_backends_nothing_is_marked() -> None:
    deck = make_deck(Backends())
    app = HttpApp(deck)
    client = AsgiClient(app)
    session = await client.initialize()
    assert (await ping(client, session)).status == 200
    assert await deck.backends.sessions.last_seen([session]) == [None]  # one process: no mark, no extra await
    await app.aclose()


async def test_while_the_store_is_out_of_reach_a_session_held_here_is_served_from_memory(fleet: Fleet) -> None:
    _first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await ping(b, session)).status == 200
    store = second.deck.backends.sessions

    async def unreachable(session_id: str, at: float) -> bool:
        raise BackendUnavailableError("the shared backend redis://test is unreachable: Connection refused")

    store.touch = unreachable  # type: ignore[method-assign]
    assert (await ping(b, session)).status == 200  # its existence cannot be checked: the copy held here serves it
    assert session in second.sessions


async def test_a_session_the_store_lost_is_stored_again_by_the_process_holding_it(fleet: Fleet) -> None:
    _first, second, a, b = await fleet_of(fleet)
    session = await a.initialize()
    assert (await ping(b, session)).status == 200
    store = second.deck.backends.sessions
    if fleet.kind == "memory":  # as a Redis restarted without persistence: no state, and no sign it ended
        store._states.clear()  # type: ignore[attr-defined]
    else:
        await store._engine.client.flushdb()  # type: ignore[attr-defined]
    assert (await ping(b, session)).status == 200  # held here: served, and stored again
    assert (await store.get(session) or {}).get("revision") == "2025-11-25"
    assert (await ping(a, session)).status == 200  # so every process finds it again


async def test_a_process_that_stops_leaves_its_sessions_to_the_others(fleet: Fleet) -> None:
    first, second, a, b = await fleet_of(fleet)
    held, elsewhere = await a.initialize(), await b.initialize()
    assert (await ping(b, held)).status == 200
    first.registry.begin_shutdown()  # SIGTERM: the first process drains
    refused = await ping(a, elsewhere)  # a session it does not hold: another process serves it
    assert refused.status == 503 and "shutting down" in (await refused.json())["error"]["message"]
    await first.aclose()
    assert first.sessions == {}
    assert await first.deck.backends.sessions.get(held) is not None  # still in the store ...
    assert (await ping(b, held)).status == 200  # ... and served by the process that goes on
    assert session_alive(second, held)


def session_alive(app: Any, session: str) -> bool:
    http_session = app.sessions.get(session)
    return http_session is not None and not http_session.closed


async def test_a_reap_round_while_the_store_is_out_of_reach_is_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = HttpApp(make_deck(Backends(shared=True)), session_idle_timeout=0.2)
    registry = app.registry

    async def unreachable() -> int:
        raise BackendUnavailableError("the shared backend redis://10.0.0.5:6379/0 is unreachable: Connection refused")

    registry.reap = unreachable  # type: ignore[method-assign]
    reaper = asyncio.get_running_loop().create_task(registry._reap_forever())
    try:
        with caplog.at_level("WARNING", logger="tooldeck"):
            for _ in range(200):  # a few reap rounds (every 0.05 s)
                if caplog.records:
                    break
                await asyncio.sleep(0.01)
    finally:
        reaper.cancel()
    (record,) = caplog.records[:1]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert record.getMessage() == ("reaping idle sessions waits for the shared backend: the shared backend "
                                   "redis://10.0.0.5:6379/0 is unreachable: Connection refused")  # fmt: skip
