"""The request peer: the other end of one 2026-07-28 request, which has no session.

A 2025 request's peer is its session (``session.py``): the connection's state, its bus subscriptions, its requests to
the client, the runner of all its requests. A 2026-07-28 request carries what it needs in its envelope
(``stateless.py``), so a transport that takes each request on its own (HTTP) gives it a ``RequestPeer``: where the
messages tied to the request go (``send``: its SSE stream or its JSON answer), the runner of its work, the client's
address (anonymous callers' rate limits) and the refusal that ended it (its HTTP status). Nothing of a session: no
state beyond the request's own (``SessionState.of_request``), no key on the bus, no pool it goes back to. It is made
for the request and dropped with it, unless the call continues as a task: the task keeps its request context, and
so the peer, for as long as it runs (``close`` stops what the request was still doing and what it sends, not the
task).

A request peer sends the client no request of its own: a 2026-07-28 question travels in an input-required result or
in a task's ``inputRequests`` (``asking.py``).

``MockPeer`` is its twin for tests, as httpx's ``MockTransport`` is a transport's: it keeps what is sent, and answers
the requests a 2025 request would send the client from a function.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol import jsonrpc
from ..protocol.errors import ProtocolError, RefusedError
from ..protocol.jsonrpc import RequestId, Response
from . import rounds, stateless
from .runner import Runner, entered, failure

if TYPE_CHECKING:
    import asyncio

    from ..protocol.envelope import Envelope
    from ..protocol.jsonrpc import Request
    from .request import RequestContext

Send = Callable[[Any, Any], None]


class RequestPeer:
    """The peer of one 2026-07-28 request (``request.Peer``). ``send(message, related)``: where what the request
    sends goes; ``close_stream``: what ``ctx.close_sse_stream()`` does (nothing when None); ``loop``: the event loop
    its work runs on (the running one, when the work starts, if None)."""

    __slots__ = ("_close_stream", "_loop", "_where", "address", "refusals", "runner", "send", "server")

    key = None  # no session: nothing is addressed to it on the bus, and its audit records name none
    transport = "tcp"  # network.transport, as metrics name it: a request peer serves an HTTP request
    standing = None  # no session whose standing is to be heard (transports/http/sessions.py confirm_soon)

    def __init__(self, server: Any, send: Send, *, address: str | None = None,
                 close_stream: Callable[[], None] | None = None, loop: asyncio.AbstractEventLoop | None = None,
                 where: tuple[str, bytes | None] | None = None) -> None:  # fmt: skip
        self.server = server
        self.send = send
        self.address = address
        self._where = where  # (scheme, Host header) of an HTTP request: its ``origin``, worked out if asked for
        # The refusal that ended the request (its HTTP status and headers), by request id: a dict and not this
        # object's member, so the runner's hook holds no reference back to the peer (no cycle for the collector).
        self.refusals: dict[RequestId, RefusedError] = {}
        self.runner: Runner | None = None
        self._close_stream = close_stream
        self._loop = loop

    @property
    def origin(self) -> str | None:
        """The address the request reached the server at (HTTP: scheme and Host): where approval pages are."""
        where = self._where
        if where is None or where[1] is None:
            return None
        return f"{where[0]}://{where[1].decode('latin-1')}"

    def serve(self, request: Request, env: Envelope, principal: Any, *, inline: bool = False) -> Awaitable[None] | None:
        """Serve ``request`` (its envelope read and its version served) for ``principal``: its answer, and what it
        sends while it runs, go to ``send``. With ``inline``, work that does not stream is returned for the caller to
        await in its own task (as ``Session.receive_inline``); None when nothing is left to await."""
        reply = self._reply
        found = stateless.answer(self.server, self, request, env, principal, False, reply, self.refusals.__setitem__)
        if found is None:
            return None
        rctx, work, observed = found
        if inline and not work.streams and not work.own:
            return self._inline(rctx, observed, work.coro)
        work.coro = stateless.finishing(rctx, work.coro)
        return self._runner().start(rctx, observed, work, inline=inline)

    async def _inline(self, rctx: RequestContext, reply: Callable[[dict[str, Any]], None],
                      work: Coroutine[Any, Any, dict[str, Any]]) -> None:  # fmt: skip
        """Work that cannot stream, run in the caller's own task: what a runner's inline run of ``finishing`` does,
        as one coroutine and without a runner (nothing else can cancel it: a 2026-07-28 client cancels a request by
        leaving, which ends the task the work runs in)."""
        request_id = rctx.request_id
        token = entered(rctx, reply)
        try:
            try:
                message = jsonrpc.result(request_id, stateless.finished(rctx, await work))
            except rounds.InputRequired:
                message = jsonrpc.result(request_id, rctx.rounds.interim())  # type: ignore[attr-defined]
            except ProtocolError as exc:
                message = failure(request_id, stateless.translate(exc), self.refusals.__setitem__)
            except Exception as exc:
                message = failure(request_id, exc, None)
            reply(message)
        finally:
            if token is not None:
                self.server.tracing.detach(token)

    def _reply(self, message: dict[str, Any]) -> None:
        self.send(message, message.get("id"))

    def _runner(self) -> Runner:
        runner = self.runner
        if runner is None:
            runner = self.runner = Runner(self._loop, node=self.server.node_id)
            runner.refused = self.refusals.__setitem__
        return runner

    # --- request.Peer -------------------------------------------------------------------------------------------

    def close_stream(self, request_id: RequestId) -> None:
        if self._close_stream is not None:
            self._close_stream()

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._runner().loop

    # --- the end ------------------------------------------------------------------------------------------------

    def close(self) -> list[asyncio.Task[Any]]:
        """The request's exchange is over: work of the request still running is cancelled (its client left before
        the answer; its tasks are returned) and nothing more is sent. A task the call became runs on: it is no work
        of this runner's. A runner with nothing running is left as it is (it never sends the client a request)."""
        self.send = _nowhere
        self._close_stream = None
        runner = self.runner
        return runner.close() if runner is not None and runner.in_flight else []


def _nowhere(message: Any, related: Any) -> None:
    """Where a closed request peer sends: its request has been answered, and no one is listening."""


class MockPeer(RequestPeer):
    """A request peer for tests. ``sent`` holds every message sent, encoded and decoded as the wire would carry it
    (a value JSON cannot carry fails here, not later on a wire); ``streams_closed`` counts ``close_stream`` calls.

    It also stands in for a 2025 session as the peer of a request that asks the client (``asking.Requester``):
    ``handler(method, params)`` answers each request sent to the client with a result, a ``ProtocolError`` it raises
    (the client's error response), or None (no answer: the request waits until it is abandoned, and then the
    notifications/cancelled is in ``sent``)."""

    def __init__(self, server: Any, handler: Callable[[str, dict[str, Any]], Any] | None = None, *,
                 address: str | None = None, loop: asyncio.AbstractEventLoop | None = None) -> None:  # fmt: skip
        super().__init__(server, self._record, address=address, close_stream=self._closed_stream, loop=loop)
        self.sent: list[Any] = []
        self.streams_closed = 0
        self.handler = handler
        self.pending: dict[RequestId, asyncio.Future[Response]] = {}
        self._next_id = 0

    def _record(self, message: Any, related: Any) -> None:
        self.sent.append(orjson.loads(orjson.dumps(message)))  # strict: a TypeError for what JSON cannot carry

    def _closed_stream(self) -> None:
        self.streams_closed += 1

    def ask(self, method: str, params: dict[str, Any], related: RequestId | None) -> tuple[RequestId, Awaitable[Any]]:
        self._next_id += 1
        request_id = self._next_id
        self.send(jsonrpc.request(request_id, method, params), related)
        waiter: asyncio.Future[Response] = self.loop().create_future()
        try:
            result = None if self.handler is None else self.handler(method, params)
        except ProtocolError as exc:
            waiter.set_result(Response(request_id, error=exc.to_error()))
        else:
            if result is None:
                self.pending[request_id] = waiter
            else:
                waiter.set_result(Response(request_id, result=result))
        return request_id, waiter

    def abandon(self, request_id: RequestId, reason: str, related: RequestId | None) -> None:
        if self.pending.pop(request_id, None) is not None:
            note = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            self.send(note, related)
