"""Channels: the logical SSE streams of an HTTP session, and the session that routes messages to them. (A 2026-07-28
request has no session: its one channel is fed by its request peer, see ``modern.py``.)

A POSTed request gets a channel; its response and the notifications sent while it runs go there. The standalone
channel (the GET stream) carries what belongs to no request, such as list_changed. A channel outlives any one HTTP
connection: messages queue while no connection is attached, and a client that lost (or was asked to drop) its
connection resumes with ``Last-Event-ID`` and receives what it missed, from the event store and then the queue.

What waits in a channel's queue is bounded: past ``backlog`` messages not yet written (a client that does not read,
or a tool that sends faster than its client reads), the oldest notification waiting gives way to the new message,
on every kind of stream. Responses and requests to the client are never dropped: a response is what a request's
stream is for, and a request has someone waiting for its answer; each stream holds at most a few of them. Ending the
stream instead would not help the client: it would resume and miss the same messages, having reconnected for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ...server.session import Session
from ...server.state import SessionState

if TYPE_CHECKING:
    from ...protocol.errors import RefusedError
    from ...server.core import Server

log = logging.getLogger("tooldeck.http")
STANDALONE = "0"  # the number of a session's standalone (GET) stream; request streams count from 1
MAX_BACKLOG = 1000  # messages waiting to be written, per stream, by default


class Channel:
    """One logical SSE stream. ``pending`` holds the request ids whose responses have not been queued yet."""

    __slots__ = ("_events", "_wakeup", "attached", "backlog", "drop_connection", "dropped", "finished", "pending",
                 "queue", "request_ids", "sse", "stream_id")  # fmt: skip

    def __init__(self, stream_id: str, request_ids: tuple[Any, ...] = (), backlog: int = MAX_BACKLOG) -> None:
        self.stream_id = stream_id
        self.request_ids = request_ids
        self.pending = set(request_ids)
        self.queue: deque[Any] = deque()  # bounded by put, not by maxlen: responses and requests are never dropped
        self.backlog = backlog
        self.dropped = 0  # notifications dropped since the last connection reported them (``SseWriter.stream``)
        self._wakeup: asyncio.Event | None = None  # made when someone first waits: most answers never do
        self.attached = False  # an HTTP response is writing this channel's events
        self.sse = False  # the POST answer became (or must become) an SSE stream
        self.drop_connection = False  # the server asked to end the current connection (the client will resume)
        # Every response this channel exists for has been queued (never true for the standalone channel).
        self.finished = False

    @property
    def wakeup(self) -> asyncio.Event:
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    def wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def put(self, message: Any, related: Any = None) -> None:
        """Queue ``message`` to be written (``related``: the request it belongs to, which picked this channel)."""
        queue = self.queue
        if self.pending:
            if type(message) is list:  # a 2025-03-26 batch reply answers all of its requests at once
                self.pending.clear()
                self.finished = True
            elif "method" not in message:
                self.settle(message.get("id"))
            elif len(queue) >= self.backlog:  # a notification or a request, and the backlog is full
                self._make_room()
        elif len(queue) >= self.backlog:  # the GET stream (or anything after a request's response)
            self._make_room()
        queue.append(message)
        if self._wakeup is not None:
            self._wakeup.set()

    def _make_room(self) -> None:
        """The backlog is full: the oldest notification waiting is dropped (if only responses and requests wait,
        nothing is: they are few, and each is needed)."""
        queue = self.queue
        for index, waiting in enumerate(queue):
            if type(waiting) is dict and "id" not in waiting:
                del queue[index]
                break
        else:
            return
        if not self.dropped and self.attached:  # (before a connection, the stream says it when one comes)
            log.warning("SSE stream %s: the client is not keeping up; %d messages wait to be written, so the oldest "
                        "notifications are dropped", self.stream_id, len(queue) + 1)  # fmt: skip
        self.dropped += 1

    def settle(self, request_id: Any) -> None:
        """The request with this id has its response queued, or will have none (it was cancelled)."""
        pending = self.pending
        pending.discard(request_id)
        if not pending:
            self.finished = True

    def close_connection(self) -> None:
        """End the attached connection after what is queued; the channel lives on for a resume."""
        self.sse = True
        self.drop_connection = True
        self.wake()

    async def decided(self, json_only: bool, sse_ok: bool, session: HttpSession | None = None) -> None:
        """Wait until the form of a POST's answer is known: the responses came (JSON, or a stream if more came), or
        something came first and the client takes a stream (SSE), or ``session`` ended."""
        while not self.finished and (session is None or not session.closed):
            if self.queue and not json_only:
                return  # something came before the response: this answer is a stream
            if self.sse and sse_ok:
                return
            self.wakeup.clear()
            await self.wakeup.wait()

    def take_response(self) -> Any:
        """The response waiting here (a 2025-03-26 batch's array, or one response), None if there is none; what else
        waits is dropped with it (notifications cannot reach a client that is answered with JSON)."""
        queue = self.queue
        if len(queue) == 1:  # the usual case: the response alone
            message = queue.pop()
            return message if type(message) is list or "method" not in message else None
        response = None
        for message in queue:
            if type(message) is list or "method" not in message:
                response = message
        queue.clear()
        return response

    def local_event_id(self) -> str:
        """An event id for a stream without an event store (stateless): unique in the stream, not resumable."""
        self._events = getattr(self, "_events", 0) + 1  # counted from the first (most streams have a store)
        return f"{self.stream_id}.{self._events}"


class HttpSession:
    """An MCP session over HTTP: the sans-IO Session plus the channels its messages are routed to."""

    def __init__(self, server: Server, session_id: str | None, *, principal: Any = None,
                 state: SessionState | None = None, backlog: int = MAX_BACKLOG) -> None:  # fmt: skip
        self.id = session_id
        self.backlog = backlog  # each of its streams keeps at most this many messages waiting to be written
        # Anyone holding a session id is not an identity: tasks are bound to a principal, or to nothing.
        self.session = Session(server, self.route, state=state, identifies_requestor=False, principal=principal,
                               listen=session_id is not None, key=session_id)  # fmt: skip
        self.session.close_stream_hook = self._close_stream
        self.session.transport = "tcp"
        self.session.request_dropped = self._dropped
        self.session.request_refused = self._refused
        self.status: dict[Any, RefusedError] = {}  # requests refused by the pipeline: their HTTP status and headers
        self.saved = -1  # the state's change count when it was last stored
        self.channels: dict[str, Channel] = {}
        self.by_request: dict[Any, Channel] = {}
        self.standalone: Channel | None = None
        self.last_active = self.created = time.monotonic()
        self.connections = 0  # HTTP exchanges in progress: a session is never reaped while one is open
        self.closed = False
        self.ended_elsewhere = False  # another process ended it while a request of it ran here (sessions.py)
        # Stream ids are "<node>-<n>": the processes serving one session through a shared event store never issue the
        # same one, so neither the same event id ("<stream>.<n>"), and a Last-Event-ID names the stream it belongs to.
        self._stream_prefix = server.node_id + "-"
        self._next_stream = 0
        self._shared = session_id is not None and server.backends.shared  # other processes serve it too

    def open_channel(self, request_ids: tuple[Any, ...]) -> Channel:
        self._next_stream += 1
        channel = Channel(f"{self._stream_prefix}{self._next_stream}", request_ids, self.backlog)
        self.channels[channel.stream_id] = channel
        for request_id in request_ids:
            self.by_request[request_id] = channel
        return channel

    def open_standalone(self) -> Channel:
        if self.standalone is None:
            self.standalone = Channel(self._stream_prefix + STANDALONE, (), self.backlog)
            self.channels[self.standalone.stream_id] = self.standalone
        return self.standalone

    def retire(self, channel: Channel) -> None:
        """A request channel whose every message has been delivered."""
        self.channels.pop(channel.stream_id, None)
        for request_id in channel.request_ids:
            if self.by_request.get(request_id) is channel:
                del self.by_request[request_id]

    def route(self, message: Any, related: Any) -> None:
        """The Session's output: to the channel of the request it belongs to, else to the standalone stream."""
        if related is not None:
            channel = self.by_request.get(related)
            if channel is not None:
                channel.put(message)
                return
        if self.standalone is not None:
            self.standalone.put(message)
        elif related is not None and self._shared:
            # Its request's stream has ended (a task's progress, say), and the GET stream is not open here: perhaps on
            # another process serving the session, whose copy sends it there (Session.deliver, as a task's status).
            self.session.server.bus.publish(f"session/{self.id}", message)
        # No GET stream was ever opened: a message that belongs to no request has nowhere to go, and is dropped.

    def _dropped(self, request_id: Any) -> None:
        channel = self.by_request.get(request_id)
        if channel is not None:
            channel.settle(request_id)  # cancelled: no response will come
            channel.wake()

    def _refused(self, request_id: Any, refusal: RefusedError) -> None:
        self.status[request_id] = refusal

    def _close_stream(self, request_id: Any) -> None:
        channel = self.by_request.get(request_id)
        if channel is not None:
            channel.close_connection()

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def close(self) -> list[asyncio.Task[Any]]:
        """End the session: cancel its work and wake every connection so it can finish."""
        self.closed = True
        tasks = self.session.close()
        for channel in self.channels.values():
            channel.wake()
        return tasks
