"""The SSE writer (transports/http/sse.py) at the edge where a client leaves: a message taken from a stream's queue is
stored before it is written, and a finished stream whose client left before all of it was written is kept for a
resume — never retired with its response still waiting."""

from __future__ import annotations

import asyncio
from typing import Any

from helpers import adder_deck
from tooldeck.server.events import MemoryEventStore
from tooldeck.transports.http.channels import Channel, HttpSession
from tooldeck.transports.http.sessions import SessionRegistry
from tooldeck.transports.http.sse import SseWriter


async def test_a_client_that_leaves_as_the_response_comes_finds_it_on_resume() -> None:
    deck = adder_deck("sse")
    events = MemoryEventStore()
    registry = SessionRegistry(deck, events)
    writer = SseWriter(events, registry, retry_ms=1000, keepalive=25)
    http_session = HttpSession(deck, "s1")
    channel: Channel = http_session.open_channel((1,))
    channel.put({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}})
    left = asyncio.Event()
    written: list[Any] = []

    async def receive() -> dict[str, Any]:
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        written.append(message)
        if len(written) == 2:  # the notification is being written: the client leaves, and the response comes
            left.set()
            channel.put({"jsonrpc": "2.0", "id": 1, "result": {}})
            await asyncio.sleep(0)  # (the writer hears the disconnect here)

    await writer.stream(http_session, channel, receive, send, prime=True)
    assert channel.stream_id in http_session.channels  # kept, with the response waiting in it
    found = await events.replay("s1", f"{channel.stream_id}.1")
    assert found is not None and [m.get("id") for _, m in found[1]] == [None]  # the notification was stored
    assert list(channel.queue) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]  # the resume writes the rest
