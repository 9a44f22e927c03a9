"""A resumed SSE stream across the processes of a fleet (two apps over shared backends: one in-memory record, or
Redis): resumed through another process than the one running its request, it replays what was stored and then
continues live, relayed from the process that feeds it; a client that leaves the relayed stream can resume again,
anywhere, and loses nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from asgi_client import AsgiClient, Event, Response
from tooldeck import Context, Deck
from tooldeck.server.backends import Backends
from transports.http.fleet_apps import KINDS, Fleet, fleet_for


def make_deck(backends: Backends) -> Deck:
    deck = Deck("fleet-streams", backends=backends)
    gates = [asyncio.Event(), asyncio.Event()]
    deck.state = {"gates": gates}  # type: ignore[attr-defined]

    @deck.tool
    async def paced(ctx: Context) -> str:
        await ctx.report_progress(1, 3)
        ctx.close_sse_stream()  # the client resumes, through whichever process
        await gates[0].wait()
        await ctx.report_progress(2, 3)
        await gates[1].wait()
        await ctx.report_progress(3, 3)
        return "all there"

    return deck


@pytest.fixture(params=KINDS)
def fleet(request: pytest.FixtureRequest, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Fleet:
    return fleet_for(request, at_loop_end, make_deck)


async def read_all(response: Response) -> list[Event]:
    return [event async for event in response.events(timeout=5)]


def resume(client: AsgiClient, session: str, last_event_id: str) -> Awaitable[Response]:
    headers = {"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": last_event_id,
               "mcp-protocol-version": "2025-11-25"}  # fmt: skip
    return client.request("GET", headers=headers)


def progress(events: list[Event]) -> list[Any]:
    return [e.message["params"]["progress"] if "method" in e.message else e.message["result"]["structuredContent"]
            for e in events if e.data]  # fmt: skip


async def started(fleet: Fleet) -> tuple[Any, Any, AsgiClient, AsgiClient, str, list[Event]]:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    b.checker = a.checker  # one client, whichever process it reaches
    session = await a.initialize()
    params = {"name": "paced", "arguments": {}, "_meta": {"progressToken": "p"}}
    call = await a.call(session, "call", "tools/call", params)
    assert call.status == 200
    opened = await read_all(call)  # priming, progress 1, then the server closed the connection
    assert progress(opened) == [1]
    return first, second, a, b, session, opened


async def relaying(fleet: Fleet) -> tuple[Any, Any, AsgiClient, str, Response, Any, Event]:
    """The call's stream resumed through the second process, relayed from the first; progress 2 read there. Returns
    the two apps, the first's client, the session, the resumed stream, its events and the event read."""
    first, second, a, b, session, opened = await started(fleet)
    resumed = await resume(b, session, opened[1].id or "")
    events = resumed.events(timeout=5)
    first.deck.state["gates"][0].set()
    got = await anext(events)
    assert progress([got]) == [2]
    return first, second, a, session, resumed, events, got


async def test_a_stream_resumed_through_another_process_replays_then_continues_live(fleet: Fleet) -> None:
    first, _second, _, b, session, opened = await started(fleet)
    resumed = await resume(b, session, opened[0].id or "")  # from the priming event: progress 1 is replayed
    assert resumed.status == 200
    events = resumed.events(timeout=5)
    replayed = await anext(events)
    assert replayed.id == opened[1].id and progress([replayed]) == [1]
    for gate in first.deck.state["gates"]:  # the request runs on the first process, which goes on
        gate.set()
    rest = [event async for event in events]
    assert progress(rest) == [2, 3, {"result": "all there"}]
    stream = opened[0].id.rpartition(".")[0]  # type: ignore[union-attr]
    assert stream.startswith(f"{first.deck.node_id}-")
    assert all(e.id.rpartition(".")[0] == stream for e in rest)  # type: ignore[union-attr]  # the same stream's ids


async def test_a_client_that_leaves_a_relayed_stream_resumes_again_and_loses_nothing(fleet: Fleet) -> None:
    first, _second, a, session, resumed, _events, got = await relaying(fleet)
    await resumed.close()  # the client leaves the second process ...
    first.deck.state["gates"][1].set()  # ... while the request goes on, on the first
    again = await resume(a, session, got.id or "")  # and resumes on the first, from the last event it read
    assert again.status == 200
    assert progress(await read_all(again)) == [3, {"result": "all there"}]


async def test_a_client_that_leaves_a_relayed_stream_resumes_again_through_another_process(fleet: Fleet) -> None:
    first, second, a, b, session, opened = await started(fleet)
    third = AsgiClient(second)
    third.checker = a.checker
    resumed = await resume(b, session, opened[1].id or "")
    first.deck.state["gates"][0].set()
    got = await anext(resumed.events(timeout=5))
    await resumed.close()
    first.deck.state["gates"][1].set()
    again = await resume(third, session, got.id or "")  # the relay to the reader that left is replaced
    assert again.status == 200
    assert progress(await read_all(again)) == [3, {"result": "all there"}]


async def test_a_relayed_stream_ends_when_its_process_hands_over_and_resumes_on_another(fleet: Fleet) -> None:
    first, second, a, session, _resumed, events, got = await relaying(fleet)
    second.hand_over()  # the relaying process stops (a rolling restart): its stream ends at once ...
    assert [event async for event in events] == []
    first.deck.state["gates"][1].set()
    again = await resume(a, session, got.id or "")  # ... and the client resumes on another, losing nothing
    assert progress(await read_all(again)) == [3, {"result": "all there"}]


async def test_a_stream_being_read_on_its_own_process_is_409_elsewhere(fleet: Fleet) -> None:
    _first, _second, a, b, session, opened = await started(fleet)
    reading = await resume(a, session, opened[1].id or "")  # read on the first process
    assert reading.status == 200
    other = await resume(b, session, opened[1].id or "")
    assert other.status == 409
    await reading.close()
