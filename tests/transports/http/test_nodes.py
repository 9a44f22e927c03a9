"""Identities that cross processes are unique across them: two apps (two processes, each with its own node id)
serving one session through a shared session store, bus and event store never issue the same request id to the
client, the same SSE stream id or the same event id, and an answer or a resume reaches the stream it belongs to."""

from __future__ import annotations

import asyncio
from typing import Any

from asgi_client import INIT, AsgiClient, Event
from tooldeck import Context, Deck
from tooldeck.server.backends import Backends
from tooldeck.transports.http import HttpApp

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def make_deck(backends: Backends) -> Deck:
    deck = Deck("nodes", backends=backends)

    @deck.tool
    async def ask(who: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Who is {who}?", FORM)
        return f"{who} is {answer.content['name']}"  # type: ignore[index]

    @deck.tool
    async def count(n: int, ctx: Context) -> int:
        for i in range(1, n + 1):
            await ctx.report_progress(i, n)
        return n

    return deck


def two_apps() -> tuple[HttpApp, HttpApp]:
    """Two apps as two processes would be: their own decks (node ids), one session store, bus and event store."""
    shared = Backends()  # one session store, bus and event store
    return HttpApp(make_deck(shared)), HttpApp(make_deck(shared))


async def open_session(app: HttpApp) -> str:
    client = AsgiClient(app)
    params = {**INIT, "capabilities": {"elicitation": {"form": {}}}}
    response = await client.post({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params},
                                  version=None)  # fmt: skip
    assert response.status == 200
    await response.json()
    session = response.headers["mcp-session-id"]
    assert (await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)).status == 202
    return session


async def first_request(events: Any) -> dict[str, Any]:
    async for event in events:
        if event.data and "method" in event.message:
            return event.message  # type: ignore[no-any-return]
    raise AssertionError("the stream ended without a request to the client")


async def test_requests_to_the_client_from_two_processes_never_share_an_id_and_answers_find_their_waiter() -> None:
    first, second = two_apps()
    session = await open_session(first)
    a_client, b_client = AsgiClient(first), AsgiClient(second)
    a = await a_client.call(session, "a", "tools/call", {"name": "ask", "arguments": {"who": "a"}})
    b = await b_client.call(session, "b", "tools/call", {"name": "ask", "arguments": {"who": "b"}})
    a_events, b_events = a.events(), b.events()
    asked_a, asked_b = await first_request(a_events), await first_request(b_events)
    assert asked_a["method"] == asked_b["method"] == "elicitation/create"
    assert asked_a["id"] != asked_b["id"]
    for asked in (asked_a, asked_b):
        assert isinstance(asked["id"], str) and asked["id"].rpartition("-")[2].isdigit()
    assert asked_a["id"].startswith(f"{first.deck.node_id}-") and asked_b["id"].startswith(f"{second.deck.node_id}-")

    # Each answer goes to the other process: the bus carries it to the one that asked, and only its waiter wakes.
    for app, asked, name in ((second, asked_a, "alice"), (first, asked_b, "bob")):
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": name}}}
        assert (await AsgiClient(app).post(answer, session=session)).status == 202
    results = {}
    for request_id, events in (("a", a_events), ("b", b_events)):
        async for event in events:
            if event.data and event.message.get("id") == request_id:
                results[request_id] = event.message["result"]["structuredContent"]["result"]
                break
    assert results == {"a": "a is alice", "b": "b is bob"}
    await first.aclose()
    await second.aclose()


async def read_all(response: Any) -> list[Event]:
    return [event async for event in response.events()]


async def test_stream_and_event_ids_from_two_processes_never_collide_and_a_resume_replays_its_own_stream() -> None:
    first, second = two_apps()
    session = await open_session(first)
    clients = {first: AsgiClient(first), second: AsgiClient(second)}
    clients[second].checker = clients[first].checker  # one client: it sees the replays of what it asked either app
    calls: list[tuple[HttpApp, list[Event]]] = []
    for _ in range(3):  # the session's requests alternate between the processes
        for app in (first, second):
            params = {"name": "count", "arguments": {"n": 2}, "_meta": {"progressToken": f"p{len(calls)}"}}
            response = await clients[app].call(session, f"call-{len(calls)}", "tools/call", params)
            calls.append((app, await read_all(response)))
    ids = [e.id for _, events in calls for e in events]
    assert len(ids) == 6 * 4 and len(set(ids)) == len(ids)  # priming, two progress, the response: none repeats
    streams = [{e.id.rpartition(".")[0] for e in events} for _, events in calls]  # type: ignore[union-attr]
    assert all(len(s) == 1 for s in streams) and len(set.union(*streams)) == 6
    for (app, _), stream in zip(calls, streams, strict=True):
        assert stream.pop().startswith(f"{app.deck.node_id}-")

    # Resuming a stream from its priming event replays that stream's events only, on either process.
    for _, events in calls[:2]:
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": events[0].id}
        for app in (first, second):
            resumed = await clients[app].request("GET", headers=headers)  # type: ignore[arg-type]
            assert resumed.status == 200
            replayed = await read_all(resumed)
            assert [(e.id, e.message) for e in replayed] == [(e.id, e.message) for e in events[1:]]
    await first.aclose()
    await second.aclose()


async def test_the_standalone_streams_of_two_processes_have_their_own_ids() -> None:
    first, second = two_apps()
    session = await open_session(first)
    ids = []
    for app in (first, second):
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        stream = await AsgiClient(app).request("GET", headers=headers)
        assert stream.status == 200
        priming = await anext(stream.events())
        ids.append(priming.id)
        await stream.close()
    assert ids[0] != ids[1]
    assert ids[0].rpartition(".")[0] == f"{first.deck.node_id}-0"  # type: ignore[union-attr]
    assert ids[1].rpartition(".")[0] == f"{second.deck.node_id}-0"  # type: ignore[union-attr]
    await asyncio.gather(first.aclose(), second.aclose())
