"""The protocol session: one client connection's lifecycle, dispatch, request/response correlation and batches.

Sans-IO: decoded messages go in through ``receive``; messages to send come out through the ``send`` callable the
transport supplies; there is no asyncio here, and its tests drive it synchronously. What it decides:

- whether a request is served now (``lifecycle.py``'s table), whether its id is free, which handler answers it
  (``methods/``'s table);
- a ``NOW`` method's answer, sent before ``receive`` returns (so stdio can serve the handshake before the event loop
  loads); a ``LATER`` method's ``Work`` goes to the session's ``Runner`` (``runner.py``), made on first use;
- notifications from the client (cancellation, initialized) and responses to the server's own requests;
- 2025-03-26 batches: one array of replies, at most ``max_batch`` messages;
- requests of the stateless era (2026-07-28) on a stdio connection: ``receive_modern`` serves one request from its
  envelope, with no lifecycle (``stateless.py``); ``receive_stateless`` is the input of a stdio connection whose
  first request was modern (the era of a stdio connection is fixed by its first request). Over HTTP such a request
  has a peer of its own instead (``peer.RequestPeer``).

Session state (revision, client capabilities, log level, subscriptions, principal) is a ``SessionState`` that a
``SessionStore`` can keep; fan-out from the server (list_changed, resource updates, task status) arrives through the
server's bus.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..protocol import envelope, jsonrpc, versions
from ..protocol.envelope import Envelope
from ..protocol.errors import (
    InternalError,
    InvalidRequestError,
    MethodNotFoundError,
    ProtocolError,
    RefusedError,
    UnsupportedVersionError,
)
from ..protocol.jsonrpc import Invalid, Notification, Request, RequestId, Response
from . import lifecycle, stateless
from .request import RequestContext, Work
from .state import SessionState

if TYPE_CHECKING:
    import asyncio

    from .runner import Runner

log = logging.getLogger("tooldeck.session")

# send(message, related): ``related`` is the id of the client request the message belongs to (its response, or a
# notification sent while it runs), None for messages of the session itself. HTTP routes on it; stdio ignores it.
Send = Callable[[Any, Any], None]
_keys = itertools.count(1)


class Reply:
    """Where the answer to one request goes: straight to the transport, or into a 2025-03-26 batch."""

    __slots__ = ("_batch", "_send")

    def __init__(self, send: Send, batch: _Batch | None = None) -> None:
        self._send = send
        self._batch = batch

    def __call__(self, message: dict[str, Any]) -> None:
        if self._batch is None:
            self._send(message, message.get("id"))
        else:
            self._batch.add(message)

    def drop(self) -> None:
        """The request was cancelled: no response will come."""
        if self._batch is not None:
            self._batch.drop()


class _Batch:
    """Collects the responses of one JSON-RPC batch and sends them as one array when the last arrives."""

    __slots__ = ("_expected", "_key", "_responses", "_send")

    def __init__(self, send: Send, expected: int, key: Any) -> None:
        self._send = send
        self._expected = expected
        self._key = key  # the id the whole batch is routed by: its first request's
        self._responses: list[dict[str, Any]] = []

    def add(self, message: dict[str, Any]) -> None:
        self._responses.append(message)
        self._check()

    def drop(self) -> None:
        self._expected -= 1
        self._check()

    def _check(self) -> None:
        if self._expected > 0 and len(self._responses) >= self._expected:
            self._send(self._responses, self._key)
            self._expected = 0


def batch_problem(revision: str | None, size: int, limit: int) -> str | None:
    """Why a JSON-RPC batch of ``size`` messages cannot be served in a session at ``revision``; None if it can."""
    if not versions.accepts_batches(revision):
        return f"Invalid request: JSON-RPC batches are not supported in {revision or 'this session (not initialized)'}"
    if not size:
        return "Invalid request: empty batch"
    if size > limit:
        return f"Invalid request: a batch of {size} messages exceeds the limit of {limit}; send it in smaller batches"
    return None


_Runner: Any = None  # runner.Runner, once the first session has work to run


def new_key() -> str:
    """A session key of this process, for a session with no id of its own."""
    return f"local-{next(_keys)}"


class Session:
    """One client connection. ``server`` is the core server (registries, method table, pipeline, bus)."""

    def __init__(
        self,
        server: Any,
        send: Send,
        *,
        state: SessionState | None = None,
        identifies_requestor: bool = True,
        principal: Any = None,
        listen: bool = True,
        key: str | None = None,
    ) -> None:
        self.server = server
        self.send = send
        if state is None:
            state = SessionState(server.options.log_level, identifies_requestor=identifies_requestor)
            state.principal = principal
            self.phase = lifecycle.NEW
        else:  # rebuilt from a store: the handshake happened (perhaps in another process)
            self.phase = lifecycle.READY if state.revision is not None else lifecycle.NEW
        self.state = state
        # This session's address on the bus: its HTTP session id where it has one, so that every process serving the
        # session hears what is addressed to it (a cancellation, an answer to one of its requests to the client).
        self.key = key if key is not None else new_key()
        # The client's network address, where the transport knows it and nobody authenticated: anonymous callers are
        # told apart by it (rate limits), not by their session, which a caller can open anew at will.
        self.address: str | None = None
        self.runner: Runner | None = None
        self._methods = server.methods
        self._direct = Reply(send)
        # Hooks for transports that keep a connection per request (HTTP): Context.close_sse_stream() calls
        # close_stream; request_dropped is called when a request ends with no response (the client cancelled it);
        # request_refused with the refusal (its HTTP status and headers) of a request refused by the pipeline's
        # authorize or limit step.
        self.close_stream_hook: Callable[[RequestId], None] | None = None
        self.request_dropped: Callable[[RequestId], None] | None = None
        self.request_refused: Callable[[RequestId, RefusedError], None] | None = None
        # A transport that learns only after a request began whether the session still stands (HTTP with shared
        # backends: sessions.py ``confirm_soon``) leaves the answer's future here; user code waits for it first.
        self.standing: asyncio.Future[Any] | None = None
        # A stdio connection of the 2025 era refuses requests that carry the 2026-07-28 envelope (-32600).
        self.refuse_envelope = False
        self.transport = "pipe"  # network.transport, as metrics name it: "tcp" for HTTP
        self.origin: str | None = None  # HTTP: the scheme and host the client reaches the server at (approval pages)
        self.opened = time.monotonic()
        # What the server announces (list changes, resource updates, task status) reaches the session through the
        # bus; a session for one stateless request has nothing to hear.
        self._subscriptions = server.attach(self) if listen else ()

    # --- what handlers and tests may read ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.phase == lifecycle.CLOSED

    @property
    def initialized(self) -> bool:
        return self.phase in (lifecycle.INITIALIZED, lifecycle.READY)

    @property
    def ready(self) -> bool:
        return self.phase == lifecycle.READY

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.state.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.state.client_capabilities

    @property
    def principal(self) -> Any:
        return self.state.principal

    @principal.setter
    def principal(self, value: Any) -> None:
        self.state.principal = value
        self.state.changed()

    @property
    def in_flight(self) -> dict[RequestId, Any]:
        return {} if self.runner is None else self.runner.in_flight

    # --- input --------------------------------------------------------------------------------------------------

    def receive(self, obj: Any) -> None:
        """Handle one decoded JSON value from the client."""
        if self.phase == lifecycle.CLOSED:
            return
        if type(obj) is list:
            self.receive_batch([jsonrpc.parse(item) for item in obj])
            return
        self._receive(jsonrpc.parse(obj), self._direct)

    def receive_parsed(self, message: jsonrpc.Message) -> None:
        """``receive`` for a transport that already classified the message with ``jsonrpc.parse``."""
        if self.phase != lifecycle.CLOSED:
            self._receive(message, self._direct)

    def receive_inline(self, request: Request) -> Awaitable[None] | None:
        """``receive_parsed`` for a transport that runs each request in a task of its own (HTTP): work that does not
        stream is returned for the caller to await in that task (it replies through ``send`` like any other work).
        None when nothing is left to await."""
        if self.phase == lifecycle.CLOSED:
            return None
        return self._request(request, self._direct, True)  # inline

    def answers_now(self, message: Any) -> bool:
        """True when handling ``message`` needs no event loop: everything but the ``LATER`` methods (and listen)."""
        if type(message) is dict:
            name = message.get("method")
            method = self._methods.get(name) if type(name) is str else None
            if method is None:  # unknown to 2025 sessions: answered at once, but a 2026-07-28 listen stays open
                return name != "subscriptions/listen"
            return not method.later
        return type(message) is not list  # a batch may hold a tools/call

    def receive_error(self, error: ProtocolError, request_id: Any = None) -> None:
        """The transport could not decode a message (bad JSON, too large): answer with the id if it could be read."""
        self.send(jsonrpc.error(request_id, error), request_id)

    def _receive(self, message: jsonrpc.Message, reply: Reply) -> None:
        if type(message) is Request:
            self._request(message, reply)
        elif type(message) is Notification:
            self._notification(message)
        elif type(message) is Response:
            self._response(message)
        else:
            assert type(message) is Invalid
            if message.answer:
                reply(jsonrpc.error(message.id, message.error))
            else:
                log.debug("ignoring malformed notification: %s", message.error.message)

    def _request(self, request: Request, reply: Reply, inline: bool = False) -> Awaitable[None] | None:
        name = request.method
        phase = self.phase
        if (phase != lifecycle.READY or name == "initialize") and not lifecycle.serves(phase, name):
            reply(jsonrpc.error(request.id, InvalidRequestError(lifecycle.refusal(phase, name))))
            return None
        runner = self.runner
        if runner is not None and request.id in runner.in_flight:
            error = InvalidRequestError(f"Invalid request: id {request.id!r} is already in use by a running request")
            reply(jsonrpc.error(request.id, error))
            return None
        method = self._methods.get(name)
        if method is None:
            reply(jsonrpc.error(request.id, MethodNotFoundError(f"Method not found: {name}")))
            return None
        if self.refuse_envelope and "_meta" in request.params and envelope.claims_modern(request.params):
            message = (
                f"Invalid request: this connection speaks {self.state.revision or 'the 2025 protocol'} "
                "(it opened with initialize); a request with the 2026-07-28 _meta envelope needs a new one"
            )
            reply(jsonrpc.error(request.id, InvalidRequestError(message)))
            return None
        rctx = RequestContext(self.server, self, request.id, name, request.params, self.state)
        server = self.server
        if server.metrics is not None or server.tracing is not None:
            key = None if self.key.startswith("local-") else self.key  # a session id the client knows
            reply = stateless.observed(server, reply, request, self.state.revision, key, self.transport)
        try:
            outcome = (method.handler or method.resolve())(rctx)
        except ProtocolError as exc:
            if isinstance(exc, RefusedError) and self.request_refused is not None:
                self.request_refused(request.id, exc)  # its HTTP status (401, 403, 429)
            reply(jsonrpc.error(request.id, exc))
            return None
        except Exception:
            log.exception("handler for %s failed", name)
            reply(jsonrpc.error(request.id, InternalError(f"Internal error while handling {name}")))
            return None
        if type(outcome) is not Work:
            self.phase = lifecycle.move(phase, name)  # an answered initialize opens the session (the table says)
            reply(jsonrpc.result(request.id, outcome))
            return None
        return (runner or self._runner()).start(rctx, reply, outcome, inline)

    # --- the stateless era ---------------------------------------------------------------------------------------

    def receive_modern(self, request: Request, env: Envelope, inline: bool = False) -> Awaitable[None] | None:
        """Serve one 2026-07-28 request whose envelope was read and whose version is served: no lifecycle, the
        request's own capabilities, the connection's principal. Returns work to await as ``receive_inline`` does."""
        reply = self._direct
        runner = self.runner
        if runner is not None and request.id in runner.in_flight:
            error = InvalidRequestError(f"Invalid request: id {request.id!r} is already in use by a running request")
            reply(jsonrpc.error(request.id, error))
            return None
        state = self.state
        found = stateless.answer(self.server, self, request, env, state.principal, state.identifies_requestor, reply,
                                 self.request_refused)  # fmt: skip
        if found is None:
            return None
        rctx, work, observed = found
        work.coro = stateless.finishing(rctx, work.coro)
        return (runner or self._runner()).start(rctx, observed, work, inline=inline)

    def receive_stateless(self, obj: Any) -> None:
        """One decoded message on a stdio connection of the 2026-07-28 era: each request stands alone; initialize
        is -32022 naming the modern revisions, a request without the envelope -32602."""
        if self.phase == lifecycle.CLOSED:
            return
        if type(obj) is list:
            self.send(jsonrpc.error(None, InvalidRequestError("Invalid request: batches are not part of "
                                                              f"{versions.MODERN[0]}")), None)  # fmt: skip
            return
        message = jsonrpc.parse(obj)
        if type(message) is not Request:
            if type(message) is Notification and message.method == "notifications/cancelled":
                self._cancelled(message.params)
            elif type(message) is Invalid and message.answer:
                self._direct(jsonrpc.error(message.id, message.error))
            return  # other notifications and responses mean nothing here (the server sends no requests)
        try:
            if message.method == "initialize":
                requested = message.params.get("protocolVersion")
                raise UnsupportedVersionError(requested if type(requested) is str else "", versions.MODERN)
            env = envelope.read(message.params)
            envelope.check_version(env.version)
        except ProtocolError as exc:
            self._direct(jsonrpc.error(message.id, exc))
            return
        self.receive_modern(message, env)

    def _notification(self, note: Notification) -> None:
        method = note.method
        if method == "notifications/cancelled":
            self._cancelled(note.params)
        else:  # notifications/initialized moves the lifecycle (the table ignores it before initialize)
            self.phase = lifecycle.move(self.phase, method)
        # Other notifications (progress for our requests, roots/list_changed, unknown ones) need no action yet.

    def _response(self, response: Response) -> None:
        if self.runner is not None and self.runner.resolve(response):
            return
        if self._subscriptions:  # perhaps another process of this session asked: it hears it on the bus
            answer = {"id": response.id, "result": response.result, "error": response.error}
            self.server.bus.publish(f"session/{self.key}", {"answer": answer})

    def _cancelled(self, params: dict[str, Any]) -> None:
        request_id: Any = params.get("requestId")
        if not jsonrpc.is_request_id(request_id):
            return  # malformed: the spec says ignore
        if not self._cancel_here(request_id, params.get("reason")) and self._subscriptions:
            # Not running here: perhaps in another process serving this session (unknown anywhere: ignored).
            self.server.bus.publish(f"session/{self.key}", {"cancel": request_id, "reason": params.get("reason")})

    def _cancel_here(self, request_id: RequestId, reason: Any) -> bool:
        flight = None if self.runner is None else self.runner.cancel(request_id)
        if flight is None:
            return False  # unknown or finished already: the spec says ignore
        log.debug("request %r cancelled by the client: %s", request_id, reason)
        if self.request_dropped is not None:
            self.request_dropped(request_id)
        return True

    def receive_batch(self, messages: list[jsonrpc.Message]) -> None:
        """A 2025-03-26 JSON-RPC batch whose items the transport classified with ``jsonrpc.parse``."""
        if self.phase == lifecycle.CLOSED:
            return
        problem = batch_problem(self.state.revision, len(messages), self.server.options.max_batch)
        if problem is not None:
            self.send(jsonrpc.error(None, InvalidRequestError(problem)), None)
            return
        expected = sum(1 for m in messages if type(m) is Request or (type(m) is Invalid and m.answer))
        key = next((m.id for m in messages if type(m) is Request), None)
        reply = Reply(self.send, _Batch(self.send, expected, key))
        for message in messages:
            if type(message) is Request and message.method == "initialize":
                reply(jsonrpc.error(message.id, InvalidRequestError("Invalid request: initialize may not be batched")))
                continue
            self._receive(message, reply)

    # --- the peer of its requests (request.Peer), which also asks the client (asking.Requester) ------------------

    def ask(self, method: str, params: dict[str, Any], related: RequestId | None) -> tuple[RequestId, Any]:
        """Send a request to the client: its id, and a future that gets its ``Response``."""
        return self._runner().ask(self.send, method, params, related)

    def abandon(self, request_id: RequestId, reason: str, related: RequestId | None) -> None:
        """Stop waiting for a request sent to the client, and tell it so (notifications/cancelled)."""
        if self.runner is not None and self.runner.abandon(request_id):
            note = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            self.send(note, related)

    def close_stream(self, request_id: RequestId) -> None:
        if self.close_stream_hook is not None:
            self.close_stream_hook(request_id)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the session's work runs in (bound once, when the first work starts)."""
        return self._runner().loop

    def _runner(self) -> Runner:
        """The session's runner, made when the first work needs it: the event loop is loaded only then."""
        if self.runner is None:
            global _Runner
            if _Runner is None:  # imported once, when the first work needs it: it loads the event loop
                from .runner import Runner as _Runner
            self.runner = _Runner(node=self.server.node_id)
            self.runner.refused = self.request_refused
            self.runner.closed = self.phase == lifecycle.CLOSED  # a request to the client after the end fails
        return self.runner

    # --- output -------------------------------------------------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification not tied to a request (list_changed and the like), once initialized."""
        if self.initialized:
            self.send(jsonrpc.notification(method, params), None)

    def deliver(self, message: dict[str, Any]) -> None:
        """What the bus addressed to this session: a notification to send (a task's status), a cancellation of a
        request running here, or the client's answer to a request made here (each arrived at another process)."""
        if "cancel" in message:
            self._cancel_here(message["cancel"], message.get("reason"))
        elif "answer" in message:
            answer = message["answer"]
            if self.runner is not None:
                self.runner.resolve(Response(answer["id"], result=answer.get("result"), error=answer.get("error")))
        elif self.initialized:
            self.send(message, None)

    def list_changed(self, kind: str) -> None:
        """The server's ``kind`` list changed: tell the client if it negotiated that capability and can see the
        change (a policy's ``hide_unusable`` leaves out of its lists what its principal can never use)."""
        if kind in self.state.capabilities and self.server.sees_change(kind, self.state.principal):
            self.notify(f"notifications/{kind}/list_changed")

    def resource_updated(self, uri: str) -> None:
        """``uri`` changed: tell the client if it subscribed to it (or to a resource it is under) and may read it."""
        for subscribed in self.state.subscriptions:
            if uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/"):
                if self.server.may_read(self.state.principal, uri, subscribed):
                    self.notify("notifications/resources/updated", {"uri": uri})
                return

    # --- the end ------------------------------------------------------------------------------------------------

    def close(self) -> list[asyncio.Task[Any]]:
        """End the session: cancel running requests (their tasks are returned so the transport can await them)."""
        if self.phase == lifecycle.CLOSED:
            return []
        self.phase = lifecycle.CLOSED
        metrics = self.server.metrics
        if metrics is not None and self.state.revision is not None:  # a session that was opened: how long it lived
            metrics.session.labels(self.state.revision, self.transport).observe(time.monotonic() - self.opened)
        for subscription in self._subscriptions:
            subscription.cancel()
        self._subscriptions = ()
        return [] if self.runner is None else self.runner.close()

    def drain(self) -> list[asyncio.Task[Any]]:
        """The tasks of requests still running, for a transport that lets them finish before it closes."""
        return [] if self.runner is None else self.runner.running()
