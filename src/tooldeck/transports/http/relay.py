"""A resumed SSE stream read through another process than the one that feeds it (shared backends only).

A stream belongs to the process that opened it (its id is ``<node>-<n>``): the request it carries runs there, and
its messages queue there while no connection reads them. A client that resumes it (GET with ``Last-Event-ID``)
through another process gets what was stored from the event store, and then the rest live, relayed:

1. the reading process subscribes to a topic of its own (``relay/<node>/<n>``) and asks the stream's process to
   attach the stream to it (``stream/attach``, a call of ``server/nodes.py``), which answers ``live`` (and starts
   relaying), ``gone`` (the stream ended: the stored events were all of it) or ``busy`` (a connection there reads it:
   409, as a second reader gets on one process);
2. the stream's process writes the stream as it would to a connection of its own — each message stored in the event
   store, then sent — except that each piece of body goes on the topic (``{"data": text}``, then ``{"end": true}``);
3. the reading process writes what arrives to its client; when the client leaves, it tells the stream's process
   (``stream/detach``), whose channel keeps what comes next for the next resume.

A newer attach of the same stream, or a resume of it on its own process, replaces the relay (the client reads one
connection at a time). If the
stream's process dies, nothing more arrives: the reading process ends the stream after twice the keep-alive
interval, and the client resumes again, from the store.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from ...protocol.errors import INVALID_REQUEST
from ...server.nodes import Nodes, NodeUnreachableError
from .channels import HttpSession
from .responses import SSE, Message, Receive, Send, chunk, end, error, event, start
from .sessions import SessionRegistry

ATTACH, DETACH = "stream/attach", "stream/detach"


class StreamRelay:
    """Both sides of relayed streams for one app: ``read`` (the process the client resumed through) and the
    attach/detach operations (the process that feeds the stream). ``writer``: the app's ``SseWriter``."""

    def __init__(self, registry: SessionRegistry, writer: Any, nodes: Nodes) -> None:
        self.registry = registry
        self.writer = writer
        self.nodes = nodes
        self._topics = itertools.count(1)
        self._relays: dict[tuple[str, str], _Relay] = {}  # (session, stream) -> the relay feeding another process
        self._ending = asyncio.Event()  # this process hands its clients over: relayed streams end (resumed elsewhere)
        registry.on_streams_ending.append(self._ending.set)
        nodes.serve(ATTACH, self._attach)
        nodes.serve(DETACH, self._detach)

    # --- the process the client resumed through -----------------------------------------------------------------

    async def read(self, http_session: HttpSession, stream_id: str, last_event_id: str, receive: Receive,
                   send: Send) -> None:  # fmt: skip
        """Answer a resume of another process's stream: what the store has after ``last_event_id``, then what that
        process relays (read from the store once the relay is set up, so nothing falls between; what the relay
        repeats of it is skipped)."""
        node = stream_id.rpartition("-")[0]
        topic = f"relay/{self.nodes.node}/{next(self._topics)}"
        arriving: asyncio.Queue[Any] = asyncio.Queue()
        subscription = self.nodes.bus.subscribe(topic, arriving.put_nowait)
        ask = {"session": http_session.id, "stream": stream_id, "to": topic}
        try:
            try:
                state = await self.nodes.ask(node, ATTACH, ask)
            except NodeUnreachableError:
                state = "gone"  # the process that fed it is gone: what was stored is all there is
            if state == "busy":
                await error(send, 409, INVALID_REQUEST, "Conflict: that stream is already being read")
                return
            found = await self.writer.events.replay(http_session.id or "", last_event_id)
            missed = [] if found is None else found[1]
            await start(send, 200, SSE)
            for event_id, message in missed:
                await chunk(send, event(event_id, message))
            if state == "live":
                seen = _number(missed[-1][0] if missed else last_event_id)
                await self._pump(arriving, receive, send, node, ask, seen)
            else:
                await end(send)
        finally:
            subscription.cancel()

    async def _pump(self, arriving: asyncio.Queue[Any], receive: Receive, send: Send, node: str,
                    ask: dict[str, Any], seen: int) -> None:  # fmt: skip
        loop = asyncio.get_running_loop()
        gone = loop.create_task(_disconnected(receive))
        ending = loop.create_task(self._ending.wait())  # the client resumes through another process then
        silence = 2 * self.writer.keepalive + 1  # the feeding process writes at least a keep-alive meanwhile
        try:
            while True:
                piece = asyncio.ensure_future(arriving.get())
                done, _ = await asyncio.wait((piece, gone, ending), timeout=silence,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if piece not in done:
                    piece.cancel()
                    if gone not in done:  # nothing for too long (the feeding process is gone), or this one stops
                        await end(send)
                    self.nodes.tell(node, DETACH, ask)
                    return
                message = piece.result()
                data = message.get("data") if type(message) is dict else None
                if type(data) is str and not _written(data, seen):
                    await chunk(send, data.encode())
                if type(message) is not dict or message.get("end"):
                    await end(send)
                    return
        finally:
            gone.cancel()
            ending.cancel()

    # --- the process that feeds the stream ----------------------------------------------------------------------

    async def release(self, http_session: HttpSession, stream_id: str) -> bool:
        """The client resumes a stream of this process here: a relay of it to another process ends first (True)."""
        relay = self._relays.get((http_session.id or "", stream_id))
        if relay is None:
            return False
        await relay.stop()
        return True

    async def _attach(self, args: Any) -> str:
        found = self._find(args)
        if found is None:
            return "gone"
        http_session, stream_id, topic = found
        channel = http_session.channels.get(stream_id)
        if channel is None:
            return "gone"
        key = (http_session.id or "", stream_id)
        previous = self._relays.get(key)
        if previous is not None:  # the client resumed again: the older reader is gone
            await previous.stop()
        elif channel.attached:
            return "busy"
        relay = _Relay(self, http_session, channel, topic)
        self._relays[key] = relay
        return "live"

    def _detach(self, args: Any) -> None:
        found = self._find(args)
        if found is not None:
            http_session, stream_id, topic = found
            relay = self._relays.get((http_session.id or "", stream_id))
            if relay is not None and relay.topic == topic:
                relay.left.set()

    def _find(self, args: Any) -> tuple[HttpSession, str, str] | None:
        if type(args) is not dict:
            return None
        session_id, stream_id, topic = args.get("session"), args.get("stream"), args.get("to")
        if type(session_id) is not str or type(stream_id) is not str or type(topic) is not str:
            return None
        http_session = self.registry.live.get(session_id)
        if http_session is None or http_session.closed:
            return None
        return http_session, stream_id, topic


class _Relay:
    """One stream of this process written to the topic of the process a client reads it through."""

    def __init__(self, relays: StreamRelay, http_session: HttpSession, channel: Any, topic: str) -> None:
        self.relays = relays
        self.topic = topic
        self.left = asyncio.Event()  # the reader's client left (or a newer reader replaced it)
        self.key = (http_session.id or "", channel.stream_id)
        self.task = asyncio.get_running_loop().create_task(self._run(http_session, channel))

    async def _run(self, http_session: HttpSession, channel: Any) -> None:
        http_session.connections += 1  # read, through another process: not idle
        try:
            await self.relays.writer.stream(http_session, channel, self._receive, self._send, prime=False)
        finally:
            http_session.connections -= 1
            if self.relays._relays.get(self.key) is self:
                del self.relays._relays[self.key]

    async def stop(self) -> None:
        self.left.set()
        await asyncio.wait((self.task,), timeout=5)

    async def _receive(self) -> Message:
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        body = bytes(message.get("body", b""))
        bus = self.relays.nodes.bus
        if body:
            bus.publish(self.topic, {"data": body.decode()})
        if not message.get("more_body", False):
            bus.publish(self.topic, {"end": True})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _number(event_id: str) -> int:
    """The place of an event in its stream (``<stream>.<n>``)."""
    number = event_id.rpartition(".")[2]
    return int(number) if number.isdigit() else 0


def _written(data: str, seen: int) -> bool:
    """Whether a relayed piece is an event the reader has written already (it came from the store)."""
    if not data.startswith("id: "):
        return False  # a keep-alive comment
    return _number(data[4 : data.index("\n")]) <= seen
