"""What the server announces fans out across the processes of a fleet (two apps over shared backends: one in-memory
record, or Redis): a list change and a resource update made on one process reach the client streams open on the
other — a 2025 session's GET stream (and only a session subscribed to the resource gets its update) and a
2026-07-28 listen stream. Every bus payload is JSON (over Redis a payload that is not is refused at publish)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from asgi_client import AsgiClient, Response
from eras import era_deck
from tooldeck import Deck
from tooldeck.server.backends import Backends
from transports.http.fleet_apps import KINDS, Fleet, fleet_for
from transports.http.test_listen import ACK, SUB, next_message, open_listen

URI = "test://static-text"


def make_deck(backends: Backends) -> Deck:
    return era_deck(backends=backends)


@pytest.fixture(params=KINDS)
def fleet(request: pytest.FixtureRequest, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Fleet:
    return fleet_for(request, at_loop_end, make_deck)


async def get_stream(client: AsgiClient, session: str) -> Response:
    stream = await client.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session,
                                                  "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert stream.status == 200
    assert (await anext(stream.events(timeout=5))).data == ""  # the priming event
    return stream


async def messages(stream: Response, count: int) -> list[Any]:
    return [await next_message(stream) for _ in range(count)]


async def test_list_changes_and_resource_updates_made_on_one_process_reach_streams_on_another(fleet: Fleet) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    subscribed, other = await a.initialize(), await a.initialize()
    answer = await (await b.call(subscribed, 1, "resources/subscribe", {"uri": URI})).json()  # on the second
    assert answer["result"] == {}
    streams = [await get_stream(b, subscribed), await get_stream(b, other)]
    listening = await open_listen(b, "L", {"toolsListChanged": True, "resourceSubscriptions": [URI]})
    assert (await next_message(listening))["method"] == ACK

    first.deck.add_tool(lambda: "hi", name="hello")  # made on the first process
    first.deck.notify_resource_updated(URI)
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": URI}}
    meta = {"_meta": {SUB: "L"}}
    listened = await messages(listening, 2)  # (a list change is announced a loop turn later: either may be first)
    assert sorted(listened, key=str) == sorted([{**changed, "params": meta}, {**updated, "params": {"uri": URI, **meta}}],
                                               key=str)  # fmt: skip
    assert sorted(await messages(streams[0], 2), key=str) == sorted([changed, updated], key=str)
    first.deck.add_tool(lambda: "bye", name="goodbye")  # the session that did not subscribe got no update between
    assert await messages(streams[1], 2) == [changed, changed]
    for stream in (*streams, listening):
        await stream.close()


async def test_a_bus_payload_that_is_not_json_is_refused(fleet: Fleet) -> None:
    (app,) = await fleet.start(1)
    with pytest.raises(TypeError, match="a bus payload must be JSON"):
        app.deck.bus.publish("list_changed", {1, 2})


async def test_a_subscription_made_on_one_process_is_served_by_the_process_holding_the_get_stream(
    fleet: Fleet,
) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    session = await a.initialize()
    stream = await get_stream(b, session)  # the second process holds the GET stream (and a copy of the state)
    assert (await (await a.call(session, 1, "resources/subscribe", {"uri": URI})).json())["result"] == {}
    assert (await (await a.call(session, 2, "logging/setLevel", {"level": "error"})).json())["result"] == {}
    first.deck.notify_resource_updated(URI)  # on the first, which has no stream to send it on
    assert await next_message(stream) == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                          "params": {"uri": URI}}  # fmt: skip
    assert second.sessions[session].session.state.log_level == "error"
    await stream.close()
