"""One client connection: lifecycle, version negotiation, dispatch, in-flight requests and cancellation.

The session is sans-IO: decoded messages go in through ``receive``; messages to send come out through the ``send``
callable the transport supplies. It never reads a pipe or a socket. Requests that run user code (tools/call) become
asyncio tasks it tracks by request id, so ``notifications/cancelled`` can stop them and no response follows.

Lifecycle: ``new`` until initialize is answered, then ``initialized``; notifications/initialized marks the client
``ready``. Before initialize only ``initialize`` and ``ping`` are served; anything else gets -32600 at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..protocol import jsonrpc, versions
from ..protocol.errors import (
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ProtocolError,
)
from ..protocol.jsonrpc import Invalid, Notification, Request, RequestId, Response
from .context import LOG_LEVELS, LOG_RANK

if TYPE_CHECKING:
    import asyncio

    from .deck import Deck

log = logging.getLogger("tooldeck.session")

# send(message, related): ``related`` is the id of the client request the message belongs to (its response, or a
# notification sent while it runs), None for messages of the session itself. HTTP routes on it; stdio ignores it.
Send = Callable[[Any, Any], None]
Handler = Callable[["Session", Request, "Reply"], Any]
_BEFORE_INIT = frozenset({"initialize", "ping"})


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


class InFlight:
    """A request whose handler is still running."""

    __slots__ = ("context", "reply", "task")

    def __init__(self, task: asyncio.Task[Any], reply: Reply, context: Any = None) -> None:
        self.task = task
        self.reply = reply
        self.context = context


class Session:
    def __init__(self, deck: Deck, send: Send, *, principal: Any = None) -> None:
        self.deck = deck
        self.send = send
        self.principal = principal
        self.protocol_version: str | None = None
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}  # what initialize declared: features are served by these
        self.subscriptions: set[str] = set()  # resource URIs the client subscribed to
        # Whether the transport can tell requestors apart (stdio: one local client). Without that, tasks are
        # bound to nothing but their unguessable ids, and tasks/list is not offered.
        self.identifies_requestor = True
        self.initialized = False
        self.ready = False
        self.closed = False
        self.log_rank = LOG_RANK[deck.log_level]
        self.in_flight: dict[RequestId, InFlight] = {}
        self._outgoing: dict[RequestId, asyncio.Future[Any]] = {}  # our requests to the client, by id
        # While ``receive_inline`` dispatches: work ``spawn`` leaves for the transport to await in its own task.
        self._inlining = False
        self._inline_work: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the session's work runs in, once it has some
        self._next_id = 0
        self._handlers = deck.handlers
        self._direct = Reply(send)
        # Hooks for transports that keep a connection per request (HTTP): Context.close_sse_stream() calls
        # close_stream; request_dropped is called when a request ends with no response (the client cancelled it).
        self.close_stream: Callable[[RequestId], None] | None = None
        self.request_dropped: Callable[[RequestId], None] | None = None
        deck.attach(self)

    # --- input --------------------------------------------------------------------------------------------------

    def receive(self, obj: Any) -> None:
        """Handle one decoded JSON value from the client."""
        if self.closed:
            return
        if type(obj) is list:
            self.receive_batch([jsonrpc.parse(item) for item in obj])
            return
        self._receive(jsonrpc.parse(obj), self._direct)

    def receive_parsed(self, message: jsonrpc.Message) -> None:
        """``receive`` for a transport that already classified the message with ``jsonrpc.parse``."""
        if not self.closed:
            self._receive(message, self._direct)

    def receive_inline(self, request: Request) -> Awaitable[None] | None:
        """``receive_parsed`` for a transport that runs each request in a task of its own (HTTP).

        Work that can only end in its response (no Context: nothing to stream meanwhile) is returned for the caller
        to await in that task, instead of getting a task of its own: one task and one loop turn fewer per call. It
        replies through ``send`` like any other work. None when nothing is left to await here.
        """
        if self.closed:
            return None
        self._inlining = True
        try:
            self._request(request, self._direct)
        finally:
            self._inlining = False
        work, self._inline_work = self._inline_work, None
        return work

    def answers_now(self, message: Any) -> bool:
        """True when handling ``message`` needs no event loop: everything but the methods that run user code."""
        if type(message) is dict:
            return message.get("method") not in self.deck.deferred_methods
        return type(message) is not list  # a batch may hold a tools/call

    def receive_error(self, error: ProtocolError) -> None:
        """The transport could not decode a message (bad JSON, too large): answer with no id."""
        self.send(jsonrpc.error(None, error), None)

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

    def _request(self, request: Request, reply: Reply) -> None:
        method = request.method
        if not self.initialized and method not in _BEFORE_INIT:
            error = InvalidRequestError(f"Invalid request: {method} before initialize; send initialize first")
            reply(jsonrpc.error(request.id, error))
            return
        if request.id in self.in_flight:
            error = InvalidRequestError(f"Invalid request: id {request.id!r} is already in use by a running request")
            reply(jsonrpc.error(request.id, error))
            return
        handler = self._handlers.get(method)
        if handler is None:
            reply(jsonrpc.error(request.id, MethodNotFoundError(f"Method not found: {method}")))
            return
        try:
            result = handler(self, request, reply)
        except ProtocolError as exc:
            reply(jsonrpc.error(request.id, exc))
        except Exception:
            log.exception("handler for %s failed", method)
            reply(jsonrpc.error(request.id, InternalError(f"Internal error while handling {method}")))
        else:
            if result is not None:  # handlers that answer later (tools/call) return None and reply themselves
                reply(jsonrpc.result(request.id, result))

    def _notification(self, note: Notification) -> None:
        method = note.method
        if method == "notifications/cancelled":
            self._cancelled(note.params)
        elif method == "notifications/initialized" and self.initialized:
            self.ready = True
        # Other notifications (progress for our requests, roots/list_changed, unknown ones) need no action yet.

    def _response(self, response: Response) -> None:
        waiter = self._outgoing.pop(response.id, None)
        if waiter is None:
            log.debug("ignoring a response to unknown request id %r", response.id)
        elif not waiter.done():
            waiter.set_result(response)

    # --- requests to the client ---------------------------------------------------------------------------------

    def request(
        self, method: str, params: dict[str, Any], related: RequestId | None = None
    ) -> tuple[RequestId, asyncio.Future[Any]]:
        """Send a request to the client: its id, and a future that gets its ``Response`` (``result`` or ``error``).

        ``related`` is the client request this one is made for (a tool call eliciting input), so a transport that
        routes by request (HTTP) sends it on that request's stream. Ids count up and never repeat.
        """
        import asyncio

        self._next_id += 1
        request_id = self._next_id
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.closed:
            waiter.set_exception(ConnectionError("the session is closed"))
            return request_id, waiter
        self._outgoing[request_id] = waiter
        self.send(jsonrpc.request(request_id, method, params), related)
        return request_id, waiter

    def abandon(self, request_id: RequestId, reason: str, related: RequestId | None = None) -> None:
        """Stop waiting for a request sent to the client, and tell it so (notifications/cancelled)."""
        if self._outgoing.pop(request_id, None) is not None:
            note = jsonrpc.notification("notifications/cancelled", {"requestId": request_id, "reason": reason})
            self.send(note, related)

    def _cancelled(self, params: dict[str, Any]) -> None:
        request_id = params.get("requestId")
        if not jsonrpc.is_request_id(request_id):
            return  # malformed: the spec says ignore
        entry_id: RequestId = request_id  # type: ignore[assignment]
        entry = self.in_flight.pop(entry_id, None)
        if entry is None:
            return  # unknown or finished already: the spec says ignore
        log.debug("request %r cancelled by the client: %s", request_id, params.get("reason"))
        if entry.context is not None:
            entry.context.cancelled = True
        entry.reply.drop()
        entry.task.cancel()
        if self.request_dropped is not None:
            self.request_dropped(entry_id)

    def receive_batch(self, messages: list[jsonrpc.Message]) -> None:
        """A 2025-03-26 JSON-RPC batch whose items the transport classified with ``jsonrpc.parse``."""
        if self.closed:
            return
        if not versions.accepts_batches(self.protocol_version):
            revision = self.protocol_version or "this session (not initialized)"
            error = InvalidRequestError(f"Invalid request: JSON-RPC batches are not supported in {revision}")
            self.send(jsonrpc.error(None, error), None)
            return
        if not messages:
            self.send(jsonrpc.error(None, InvalidRequestError("Invalid request: empty batch")), None)
            return
        expected = sum(1 for m in messages if type(m) is Request or (type(m) is Invalid and m.answer))
        key = next((m.id for m in messages if type(m) is Request), None)
        reply = Reply(self.send, _Batch(self.send, expected, key))
        for message in messages:
            if type(message) is Request and message.method == "initialize":
                reply(jsonrpc.error(message.id, InvalidRequestError("Invalid request: initialize may not be batched")))
                continue
            self._receive(message, reply)

    # --- output -------------------------------------------------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification not tied to a request (list_changed and the like), once initialized."""
        if self.initialized and not self.closed:
            self.send(jsonrpc.notification(method, params), None)

    # --- running requests ---------------------------------------------------------------------------------------

    def spawn(self, request: Request, reply: Reply, work: Any, context: Any = None) -> None:
        """Run ``work`` (a coroutine producing the result dict) as a tracked task that replies when it ends; during
        ``receive_inline``, work without a Context is left for the transport to await instead."""
        import asyncio  # not at module level: the handshake is answered before the event loop is loaded

        loop = self.loop()
        entry = InFlight(None, reply, context)  # type: ignore[arg-type]
        run = self._run(request.id, reply, work, entry)
        if self._inlining and context is None:
            self._inlining = False
            self._inline_work = run
            entry.task = asyncio.current_task(loop)  # type: ignore[assignment]
        else:
            entry.task = loop.create_task(run)
        self.in_flight[request.id] = entry

    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the session's work runs in (a session lives in one). Bound on first use and kept:
        ``asyncio.get_running_loop()`` costs a getpid() system call on every use in Python 3.11."""
        if self._loop is None:
            import asyncio

            self._loop = asyncio.get_running_loop()
        return self._loop

    def run_eagerly(self, request: Request, reply: Reply, work: Any) -> None:
        """Answer with ``work`` (one of tooldeck's own coroutines, never user code) if it finishes without waiting;
        otherwise continue it in a tracked task as ``spawn`` would."""
        try:
            yielded = work.send(None)
        except StopIteration as stop:
            reply(jsonrpc.result(request.id, stop.value))
        except Exception as exc:
            reply(_failure(request.id, exc))
        else:
            from .eager import Resume

            self.spawn(request, reply, Resume(work, yielded))

    async def _run(self, request_id: RequestId, reply: Reply, work: Any, entry: InFlight) -> None:
        import asyncio

        try:
            message = jsonrpc.result(request_id, await work)
        except asyncio.CancelledError:
            return  # cancelled by the client or by shutdown: no response, as the spec asks
        except Exception as exc:
            message = _failure(request_id, exc)
        finally:
            if entry.context is not None:
                entry.context.finished = True
        if self.in_flight.get(request_id) is not entry:
            return  # cancelled while finishing (the work swallowed the cancellation): still no response
        del self.in_flight[request_id]
        reply(message)

    def close(self) -> list[asyncio.Task[Any]]:
        """End the session: cancel running requests (their tasks are returned so the transport can await them)."""
        if self.closed:
            return []
        self.closed = True
        self.deck.sessions.discard(self)
        tasks = []
        for entry in self.in_flight.values():
            if entry.context is not None:
                entry.context.cancelled = True
            entry.task.cancel()
            tasks.append(entry.task)
        self.in_flight.clear()
        for waiter in self._outgoing.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the session closed before the client answered"))
        self._outgoing.clear()
        return tasks

    # --- lifecycle handlers -------------------------------------------------------------------------------------

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.initialized:
            raise InvalidRequestError("Invalid request: the session is already initialized")
        requested = params.get("protocolVersion")
        if type(requested) is not str:
            raise InvalidParamsError('Invalid params: initialize needs "protocolVersion" (a string)')
        capabilities = params.get("capabilities")
        if type(capabilities) is not dict:
            raise InvalidParamsError('Invalid params: initialize needs "capabilities" (an object)')
        client_info = params.get("clientInfo")
        if type(client_info) is not dict or type(client_info.get("name")) is not str:
            raise InvalidParamsError('Invalid params: initialize needs "clientInfo" with a string "name"')
        if type(client_info.get("version")) is not str:
            raise InvalidParamsError('Invalid params: "clientInfo.version" must be a string')
        self.protocol_version = versions.negotiate(requested)
        self.client_capabilities = capabilities
        self.client_info = client_info
        self.initialized = True
        result = self.deck.initialize_result(
            self.protocol_version, self.identifies_requestor or self.principal is not None
        )
        self.server_capabilities = result["capabilities"]
        return result

    def assume_initialized(self, protocol_version: str) -> None:
        """For transports without a handshake per connection (stateless HTTP): serve as if initialized."""
        self.protocol_version = protocol_version
        self.initialized = True
        self.ready = True
        result = self.deck.initialize_result(protocol_version, self.identifies_requestor or self.principal is not None)
        self.server_capabilities = result["capabilities"]  # the deck's cached answer: no registry walk per request

    def set_log_level(self, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if type(level) is not str or level not in LOG_RANK:
            raise InvalidParamsError(f"Invalid params: unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        self.log_rank = LOG_RANK[level]
        return {}


def _failure(request_id: RequestId, exc: Exception) -> dict[str, Any]:
    """The error response for work that raised: its own code for a ProtocolError, else a logged -32603."""
    if isinstance(exc, ProtocolError):
        return jsonrpc.error(request_id, exc)
    log.error("request %r failed", request_id, exc_info=exc)
    return jsonrpc.error(request_id, InternalError("Internal error"))
