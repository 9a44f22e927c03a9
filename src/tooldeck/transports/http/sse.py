"""The SSE side of Streamable HTTP: writing a channel's messages as events, and resuming a stream after a drop.

Every stream opens with a priming event (an id and empty data) and the ``retry`` hint; each message is stored in the
``EventStore`` before it is written, so a client that lost the connection (or was asked to drop it) resumes with
``Last-Event-ID`` and gets what it missed, from the store and then the live channel (that of another process,
through ``relay.py``, when the backends are shared).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...protocol.errors import INVALID_REQUEST
from ...server.events import PRIMING, EventStore
from .channels import Channel, HttpSession
from .responses import SSE, Receive, Send, chunk, end, error, event, start
from .sessions import SessionRegistry

log = logging.getLogger("tooldeck.http")


class SseWriter:
    def __init__(self, events: EventStore, registry: SessionRegistry, *, retry_ms: int, keepalive: float) -> None:
        self.events = events
        self.registry = registry  # when it is shutting down, the standalone streams end (the server is draining)
        self.retry_ms = retry_ms
        self.keepalive = keepalive
        self.relay: Any = None  # with shared backends: streams of other processes, resumed here (relay.py)

    async def stream(
        self, http_session: HttpSession | None, channel: Channel, receive: Receive, send: Send, *, prime: bool
    ) -> None:
        """Write ``channel``'s events to this connection until it is done, dropped, or the session ends
        (``http_session`` None: the channel of a 2026-07-28 request, which has no session)."""
        gone = asyncio.Event()
        watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, gone, channel))
        channel.attached = True
        metrics = self.registry.server.metrics
        if metrics is not None:
            metrics.sse_streams.inc()
        if channel.dropped:  # before this connection: the first burst, or while the client was away
            _report_dropped(channel)
        try:
            if prime:
                event_id = await self._store(http_session, channel, PRIMING)
                await chunk(send, f"id: {event_id}\nretry: {self.retry_ms}\ndata: \n\n".encode())
            while not gone.is_set():
                while channel.queue and not gone.is_set():
                    message = channel.queue.popleft()
                    await chunk(send, event(await self._store(http_session, channel, message), message))
                if gone.is_set():
                    break  # what is still queued waits for a resume (a finished channel is retired only once written)
                if channel.finished:
                    if http_session is not None:
                        http_session.retire(channel)
                    break
                if channel.drop_connection:
                    channel.drop_connection = False  # the client resumes with Last-Event-ID
                    break
                if http_session is not None and (
                    http_session.closed or (self.registry.streams_ending and channel is http_session.standalone)
                ):
                    break
                channel.wakeup.clear()
                try:
                    await asyncio.wait_for(channel.wakeup.wait(), self.keepalive)
                except TimeoutError:
                    await chunk(send, b": keepalive\n\n")
            if not gone.is_set():
                await end(send)
        finally:
            channel.attached = False
            watcher.cancel()
            if metrics is not None:
                metrics.sse_streams.dec()
            if channel.dropped:
                _report_dropped(channel)

    async def resume(self, http_session: HttpSession, last_event_id: str, receive: Receive, send: Send) -> None:
        """A GET with ``Last-Event-ID``: what that stream missed, then the rest of it live (if it is still live)."""
        if self.relay is not None:  # relayed to a reader that is gone (the client is here): that ends first
            await self.relay.release(http_session, last_event_id.rpartition(".")[0])
        found = await self.events.replay(http_session.id or "", last_event_id)
        if found is None:
            await error(send, 404, INVALID_REQUEST, f"Last-Event-ID {last_event_id!r} is unknown or too old to resume")
            return
        stream_id, missed = found
        live = http_session.channels.get(stream_id)
        if live is None and self.relay is not None and stream_id.rpartition("-")[0] != self.relay.nodes.node:
            await self.relay.read(http_session, stream_id, last_event_id, receive, send)  # another process feeds it
            return
        if live is not None and live.attached:
            await error(send, 409, INVALID_REQUEST, "Conflict: that stream is already being read")
            return
        await start(send, 200, SSE)
        for event_id, message in missed:
            await chunk(send, event(event_id, message))
        if live is None:
            await end(send)
        else:
            await self.stream(http_session, live, receive, send, prime=False)

    async def _store(self, http_session: HttpSession | None, channel: Channel, message: Any) -> str:
        if http_session is None or http_session.id is None:
            return channel.local_event_id()  # stateless: nothing can be resumed, ids only need to be unique
        return await self.events.append(http_session.id, channel.stream_id, message)


def _report_dropped(channel: Channel) -> None:
    """Said once per connection (at its start and at its end), not once per message."""
    log.warning("SSE stream %s: dropped %d notification(s) the client did not read in time", channel.stream_id,
                channel.dropped)  # fmt: skip
    channel.dropped = 0


async def _watch_disconnect(receive: Receive, gone: asyncio.Event, channel: Channel) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            channel.wake()
            return
