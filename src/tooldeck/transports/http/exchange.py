"""The MCP endpoint: POST (one message or a 2025-03-26 batch, answered as JSON or SSE), GET (the session's own
stream, or a resumed one) and DELETE (end the session).

A POSTed request gets JSON when its response is the first thing it produces, and an SSE stream when something else
comes first (progress, a log line, a request to the client); ``json_response=True`` always answers JSON.
Notifications and responses get 202. Work that cannot stream (no Context) runs in the POST's own task, and its
response is written from there. A POST of the 2026-07-28 era (its ``params._meta`` claims it; ``eras.py`` checks the
rest) is served on its own, by a request peer of its own (``modern.py``; ``listen.py`` for ``subscriptions/listen``):
no session id is issued, read or echoed; GET and DELETE are the 2025 era's, and a GET or DELETE that names a
2026-07-28 ``MCP-Protocol-Version`` and no session is 405 (that revision has neither). While the server shuts down a
modern request is refused with 503, as a 2025 initialize is.

When the deck's shared backend (Redis) cannot be reached, a request that needs it is refused with 503 and
``Retry-After`` (``BackendUnavailableError``): a session this process does not hold cannot be found, a new one cannot
be stored, and a call that takes from a rate limit or a task store is refused by the pipeline. What can wait is
logged in one line and left for later: the state of a session this process holds is stored with its next request.
"""

from __future__ import annotations

import asyncio
import logging
import types
from collections.abc import Awaitable
from time import monotonic
from typing import Any

from ...engine.errors import BackendUnavailableError
from ...protocol import codec, envelope, jsonrpc, versions
from ...protocol.errors import (
    INVALID_REQUEST,
    SERVER_ERROR,
    SESSION_NOT_FOUND,
    HttpError,
    ProtocolError,
)
from ...protocol.jsonrpc import Invalid, Notification, Request
from ...server.pipeline import until_heard
from ...server.runner import Resume
from ...server.session import batch_problem
from . import eras, listen, modern
from .auth import PRINCIPAL, settled
from .channels import Channel, HttpSession
from .forwarded import TrustedProxies
from .guard import HEADERS
from .responses import JSON, NO_HEADERS, SSE, Headers, Receive, Scope, Send, error, respond, respond_json, start
from .sessions import SessionRegistry
from .sse import SseWriter

_VERSIONS = {version.encode(): version for version in versions.SUPPORTED}
_ACCEPTS: dict[bytes | None, tuple[bool, bool]] = {None: (True, True)}
_MEDIA: dict[bytes | None, bool] = {}
_ONLY_POST = [(b"allow", b"POST")]

log = logging.getLogger("tooldeck.http")


class Endpoint:
    """The ASGI app behind the MCP path."""

    def __init__(
        self,
        registry: SessionRegistry,
        sse: SseWriter,
        *,
        json_response: bool = False,
        stateless: bool = False,
        max_body_bytes: int,
        body_timeout: float = 30.0,
        trusted_proxies: TrustedProxies | None = None,
    ) -> None:
        self.registry = registry
        self.proxies = trusted_proxies  # None: X-Forwarded-For is never read
        self.sse = sse
        self.json_response = json_response
        self.stateless = stateless
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            method = scope["method"]
            headers: Headers = scope.get(HEADERS) or dict(scope["headers"])  # the guard made it, usually
            if method == "POST":
                await self.post(scope, headers, receive, send)
            elif method == "GET":
                await self.get(scope, headers, receive, send)
            elif method == "DELETE":
                await self.delete(scope, headers, send)
            else:
                raise HttpError(
                    405, INVALID_REQUEST, f"Method not allowed: {method}", [(b"allow", b"GET, POST, DELETE")]
                )
        except HttpError as refusal:  # raised only before anything was sent
            if refusal.status == 403:  # a session named by another principal than its opener's: audited
                await self._audit_refusal(scope, refusal)
            await error(send, refusal.status, refusal.code, refusal.message, refusal.headers)
        except BackendUnavailableError as refusal:  # raised only before anything was sent: 503, Retry-After
            await respond_json(send, refusal.http_status, {"jsonrpc": "2.0", "error": refusal.to_error()},
                               refusal.headers)  # fmt: skip

    async def _audit_refusal(self, scope: Scope, refusal: HttpError) -> None:
        metrics = self.registry.server.metrics
        if metrics is not None:
            metrics.refused(refusal, None)
        auditor = self.registry.server.http_refusal_auditor
        if auditor is not None:
            await settled(auditor(scope, refusal, scope.get(PRINCIPAL), refusal.session))

    # --- POST ---------------------------------------------------------------------------------------------------

    async def post(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        content_type = headers.get(b"content-type")
        is_json = _MEDIA.get(content_type)  # (the cache of _is_json and of _accepts read inline: every POST asks)
        if not (is_json or (is_json is None and _is_json(content_type))):
            raise HttpError(415, INVALID_REQUEST, "Unsupported Media Type: POST bodies must be application/json")
        accept = headers.get(b"accept")
        json_ok, sse_ok = _ACCEPTS.get(accept) or _accepts(accept)
        if not (json_ok or sse_ok):
            raise HttpError(406, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream")
        body = _read_body(receive, self.max_body_bytes, self.body_timeout)
        if type(body) is not bytes:  # still on its way (or in pieces): waited for under its timer
            body = await body
            if body is None:
                return  # the client left before its body ended: there is no one to answer
        try:
            obj = codec.decode(body)
        except ProtocolError as exc:
            if exc.request_id is None:
                raise HttpError(400, exc.code, exc.message) from None
            await respond_json(send, 400, jsonrpc.error(exc.request_id, exc))
            return
        principal = scope.get(PRINCIPAL)
        # Who an anonymous caller is, for its rate limits: the client's address (a new session is no new caller).
        address = None
        if principal is None:
            client = scope.get("client")
            address = client[0] if client else None
        if address is not None and self.proxies is not None:  # behind a trusted proxy: the client it names
            address = self.proxies.client(address, headers)
        if type(obj) is list:
            await self._post_batch(headers, principal, address, obj, json_ok, sse_ok, receive, send)
            return
        message = jsonrpc.parse(obj)
        if type(message) is Invalid:
            await respond_json(send, 400, jsonrpc.error(message.id, message.error))
            return
        if type(message) is not Request:  # a notification or a response
            if type(message) is Notification and envelope.claims_modern(message.params):
                await respond(send, 202, b"", NO_HEADERS)  # 2026-07-28 defines none a server acts on over HTTP
                return
            http_session = await self._session_of(headers, principal)
            http_session.session.receive_parsed(message)
            http_session.touch()
            await respond(send, 202, b"", NO_HEADERS)
            return
        if "_meta" in message.params and envelope.claims_modern(message.params):
            await self._post_modern(message, headers, principal, address, json_ok, sse_ok, receive, send,
                                    (scope.get("scheme", "http"), headers.get(b"host")))  # fmt: skip
            return
        initialize = message.method == "initialize"
        try:
            if initialize:
                mismatch = eras.initialize_problem(message, headers)
                if mismatch is not None:
                    await respond_json(send, 400, jsonrpc.error(message.id, mismatch))
                    return
                http_session = self.registry.create(principal, stateless=self.stateless)
            else:
                # A session this process holds, with no shared store to hear from, needs no await (``_session_of``
                # finds it too, or says why not): its revision served, the session live and opened by this principal.
                registry, held = self.registry, None
                if not (self.stateless or registry.shared) and headers.get(b"mcp-protocol-version") in _VERSIONS:
                    held = registry.live_session(headers.get(b"mcp-session-id"), principal)
                http_session = held or await self._session_of(headers, principal)
        except eras.UnclaimedModernError as refusal:
            await respond_json(send, 400, jsonrpc.error(message.id, {"code": refusal.code, "message": refusal.message}))
            return
        except BackendUnavailableError as refusal:  # the session is not held here, and the store is out of reach
            await respond_json(send, refusal.http_status, jsonrpc.error(message.id, refusal), refusal.headers)
            return
        session = http_session.session
        session.address = address
        if session.origin is None and http_session.id is not None:  # where its approval pages are (approvals.py)
            session.origin = _origin(scope, headers)
        await self._exchange(http_session, message, (message.id,), json_ok, sse_ok, initialize, receive, send)

    def _post_modern(self, request: Request, headers: Headers, principal: Any, address: str | None,
                     json_ok: bool, sse_ok: bool, receive: Receive, send: Send,
                     where: tuple[str, bytes | None] | None = None) -> Awaitable[None]:  # fmt: skip
        """A 2026-07-28 request: the ladder of checks, then the request served by a peer of its own (no session). What
        to await for it (the answer, or its service): a plain function, so the exchange's chain of coroutines is one
        shorter, which every resumption of a call waiting on a shared backend walks through."""
        registry = self.registry
        if registry.shutting_down:  # what a 2025 initialize gets, with the id: nothing new starts now
            closing = {"code": SERVER_ERROR, "message": "Service Unavailable: the server is shutting down"}
            return respond_json(send, 503, jsonrpc.error(request.id, closing))
        try:
            env = eras.admit(request, headers, registry.server.tools)
        except ProtocolError as refusal:
            return respond_json(send, eras.STATUS.get(refusal.code, 400), jsonrpc.error(request.id, refusal))
        if request.method == "subscriptions/listen":  # a long-lived stream of its own
            return listen.serve(self, request, env, principal, address, sse_ok, receive, send)
        return modern.serve(self, request, env, principal, address, json_ok, sse_ok, receive, send, where)

    async def _post_batch(self, headers: Headers, principal: Any, address: str | None, batch: list[Any],
                          json_ok: bool, sse_ok: bool, receive: Receive, send: Send) -> None:  # fmt: skip
        """A 2025-03-26 JSON-RPC batch: one POST, its responses as one array (or one SSE stream)."""
        if not batch:
            raise HttpError(400, INVALID_REQUEST, "Invalid request: empty batch")
        if eras.claims_modern_batch(batch):
            raise HttpError(400, INVALID_REQUEST, f"Invalid request: batches are not part of {versions.MODERN[0]}")
        http_session = await self._session_of(headers, principal)
        session = http_session.session
        session.address = address
        problem = batch_problem(session.state.revision, len(batch), session.server.options.max_batch)
        if problem is not None:
            raise HttpError(400, INVALID_REQUEST, problem)
        messages = [jsonrpc.parse(item) for item in batch]
        request_ids = tuple(m.id for m in messages if type(m) is Request)
        if not request_ids:
            http_session.session.receive_batch(messages)
            http_session.touch()
            await respond(send, 202, b"", NO_HEADERS)
            return
        await self._exchange(http_session, messages, request_ids, json_ok, sse_ok, False, receive, send)

    async def _session_of(self, headers: Headers, principal: Any) -> HttpSession:
        """The session a non-initialize POST belongs to (a transient one when stateless)."""
        revision = _version(headers)
        if self.stateless:
            return self.registry.transient(revision, principal)  # each request stands alone: no handshake
        session_id = headers.get(b"mcp-session-id")
        registry = self.registry
        found = registry.live_session(session_id, principal) or await registry.lookup(session_id, principal)
        if registry.shared and not registry.confirm_soon(found):  # still there, and busy: one write to the store,
            await registry.confirm(found)  # sent with the request's rate limit where it can be (confirm_soon)
        return found

    async def _exchange(
        self,
        http_session: HttpSession,
        message: Request | list[jsonrpc.Message],
        request_ids: tuple[Any, ...],
        json_ok: bool,
        sse_ok: bool,
        initialize: bool,
        receive: Receive,
        send: Send,
    ) -> None:
        channel = http_session.open_channel(request_ids)
        http_session.connections += 1
        session = http_session.session
        try:
            if type(message) is list:
                session.receive_batch(message)
            else:  # work that can only end in its response runs here, in this request's own task
                work = session.receive_inline(message)  # type: ignore[arg-type]  # (a Request: not a list)
                if work is not None:
                    await work
            pending = session.standing  # ``unheard``, inline on the hot path
            if pending is not None and not pending.done():  # the store's word on the session, sent with the request
                await until_heard(pending)
            json_only = not sse_ok or (self.json_response and json_ok)
            if not channel.finished:
                await channel.decided(json_only, sse_ok, http_session)
            extra = NO_HEADERS
            if initialize and http_session.id is not None and _initialized(http_session, channel):
                try:
                    await self.registry.register(http_session)
                except BackendUnavailableError as refusal:  # a session no other process could find: none at all
                    self.registry.live.pop(http_session.id, None)
                    http_session.close()
                    await respond_json(send, refusal.http_status, jsonrpc.error(request_ids[0], refusal),
                                       refusal.headers)  # fmt: skip
                    return
                extra = [(b"mcp-session-id", http_session.id.encode())]
            if http_session.closed and (not channel.queue or http_session.ended_elsewhere):
                gone = "Session not found: it was deleted or expired while this request ran"
                await error(send, 404, SESSION_NOT_FOUND, gone)
            elif json_only or (channel.finished and not channel.sse and len(channel.queue) <= 1):
                await self._answer_json(http_session, channel, send, extra)
            else:
                await start(send, 200, [*SSE, *extra])
                await self.sse.stream(http_session, channel, receive, send, prime=True)
        finally:
            http_session.connections -= 1
            if http_session.status:  # a refusal answered on a stream needs no status kept
                for request_id in request_ids:
                    http_session.status.pop(request_id, None)
            http_session.last_active = monotonic()  # (``touch``, inline)
            if http_session.id is None:
                http_session.close()  # stateless: nothing outlives the request
            elif not initialize and http_session.saved != session.state.changes:
                await self._save(http_session)  # logging/setLevel, resources/subscribe changed the state

    async def _save(self, http_session: HttpSession) -> None:
        """Store a session's changed state after its response was sent; with the store out of reach, the state
        stays this process's until a later request of the session stores it."""
        try:
            await self.registry.save(http_session)
        except BackendUnavailableError as exc:
            http_session.saved = -1  # not stored: the next request of the session tries again
            log.warning("session %s: its changed state waits for its next request to be stored: %s",
                        http_session.id, exc)  # fmt: skip

    def _answer_json(self, http_session: HttpSession, channel: Channel, send: Send,
                     extra: list[Any]) -> Awaitable[None]:  # fmt: skip
        """The exchange's one response as a JSON body: what to await to send it (a plain function, so the chain of
        coroutines that sends it is one shorter)."""
        response = channel.take_response()
        http_session.retire(channel)
        if response is None:  # cancelled by the client, or the session ended: there is no response to give
            return respond(send, 202, b"", extra)
        status = 200
        if http_session.status and type(response) is dict:
            refusal = http_session.status.pop(response.get("id"), None)  # refused by the pipeline: 401/403/429
            if refusal is not None:
                status, extra = refusal.http_status, [*extra, *refusal.headers]
        return respond(send, status, codec.encode(response), JSON + extra)

    # --- GET ----------------------------------------------------------------------------------------------------

    async def get(self, scope: Scope, headers: Headers, receive: Receive, send: Send) -> None:
        _refuse_modern("GET", headers)
        if self.stateless:
            raise HttpError(405, INVALID_REQUEST, "Method not allowed: a stateless server has no GET stream",
                            _ONLY_POST)  # fmt: skip
        if not _accepts(headers.get(b"accept"))[1]:
            raise HttpError(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        _version(headers)
        http_session = await self.registry.lookup(headers.get(b"mcp-session-id"), scope.get(PRINCIPAL))
        if self.registry.shared:
            await self.registry.confirm(http_session)
        last_event_id = headers.get(b"last-event-id")
        http_session.connections += 1
        try:
            if last_event_id is not None:
                await self.sse.resume(http_session, last_event_id.decode("latin-1"), receive, send)
                return
            channel = http_session.open_standalone()
            if channel.attached:
                await error(send, 409, INVALID_REQUEST, "Conflict: this session's GET stream is already open")
                return
            if self.registry.shared:
                self.registry.standalone_opened(http_session)
            await start(send, 200, SSE)
            await self.sse.stream(http_session, channel, receive, send, prime=True)
        finally:
            http_session.connections -= 1
            http_session.touch()

    # --- DELETE -------------------------------------------------------------------------------------------------

    async def delete(self, scope: Scope, headers: Headers, send: Send) -> None:
        _refuse_modern("DELETE", headers)
        if self.stateless:
            raise HttpError(405, INVALID_REQUEST, "Method not allowed: a stateless server has no sessions",
                            _ONLY_POST)  # fmt: skip
        http_session = await self.registry.lookup(headers.get(b"mcp-session-id"), scope.get(PRINCIPAL))
        await self.registry.close(http_session)
        await respond(send, 200, b"", NO_HEADERS)


def _refuse_modern(method: str, headers: Headers) -> None:
    """405 for a GET or DELETE of the 2026-07-28 era (its header, no session): that revision has no stream and no
    session to end. One that names a session is the session's, as before."""
    if b"mcp-session-id" not in headers:
        version = eras.modern_header(headers.get(b"mcp-protocol-version"))
        if version is not None:
            raise HttpError(405, INVALID_REQUEST, f"Method not allowed: {method} is not part of protocol revision "
                                                  f"{version}; send each request as a POST", _ONLY_POST)  # fmt: skip


def _initialized(http_session: HttpSession, channel: Channel) -> bool:
    return bool(channel.queue) and "result" in channel.queue[-1] and http_session.session.initialized


def _version(headers: Headers) -> str:
    """The revision the request speaks by its MCP-Protocol-Version header."""
    raw = headers.get(b"mcp-protocol-version")
    if raw is None:
        return "2025-03-26"  # what the spec says to assume when the header is absent
    version = _VERSIONS.get(raw)
    if version is None:
        modern = eras.modern_header(raw)
        if modern is not None:
            raise eras.UnclaimedModernError(modern)
        supported = ", ".join(versions.SUPPORTED)
        message = f"Bad Request: unsupported MCP-Protocol-Version {raw.decode('latin-1')!r} (supported: {supported})"
        raise HttpError(400, INVALID_REQUEST, message)
    return version


def _is_json(content_type: bytes | None) -> bool:
    found = _MEDIA.get(content_type)
    if found is None:
        found = (content_type or b"").partition(b";")[0].strip().lower() == b"application/json"
        if len(_MEDIA) < 256:
            _MEDIA[content_type] = found
    return found


def _accepts(accept: bytes | None) -> tuple[bool, bool]:
    """(JSON acceptable, SSE acceptable) from an Accept header; none at all accepts both."""
    found = _ACCEPTS.get(accept)
    if found is None:
        types = {part.partition(";")[0].strip().lower() for part in accept.decode("latin-1").split(",")}  # type: ignore[union-attr]
        anything = "*/*" in types
        found = (anything or "application/json" in types or "application/*" in types,
                 anything or "text/event-stream" in types or "text/*" in types)  # fmt: skip
        if len(_ACCEPTS) < 256:
            _ACCEPTS[accept] = found
    return found


def _read_body(receive: Receive, limit: int, timeout: float) -> Any:
    """The whole body, or an awaitable of it read within ``timeout`` seconds (None if the client disconnected first).

    The body is read before the request is bound to a session, so a body that stalls holds no session, channel or
    connection count: a DELETE of its session is not held up by it, and the timeout ends it. The 408 closes the
    connection, as the rest of the body might still come (RFC 9110 §15.5.9).

    The common case costs no timer and no coroutine: a body that came with its headers is there at the first
    ``receive()``, which is run one step at once, and is returned as bytes; only a body still on its
    way, or in pieces, is waited for under a timer (``_read_rest``).
    """
    first = receive()
    if type(first) is types.CoroutineType:  # run one step at once: most bodies are there
        try:
            waiting = first.send(None)
        except StopIteration as done:
            first = done.value  # the usual case: the body came with the headers
        else:
            first = Resume(first, waiting)  # an awaitable that goes on from where it stopped
    if type(first) is dict and first.get("type") == "http.request" and not first.get("more_body"):
        body: bytes = first.get("body", b"")
        if len(body) > limit:
            raise HttpError(413, INVALID_REQUEST, f"Payload Too Large: the limit is {limit} bytes")
        return body
    return _read_rest(first, receive, limit, timeout)


async def _read_rest(message: Any, receive: Receive, limit: int, timeout: float) -> bytes | None:
    """``_read_body``'s wait, once the first ``receive()`` was run one step (``message``: what it gave, or an awaitable
    of it) and did not give the whole body."""
    try:
        if type(message) is not dict:  # on its way: the wait, under the timer
            async with asyncio.timeout(timeout):
                message = await message
                body: bytes = message.get("body", b"")
                if message.get("more_body"):
                    body, message = await _rest(receive, message, body, limit)
        else:
            body = message.get("body", b"")
            if message.get("more_body"):  # the body came in pieces (the usual case is one message)
                async with asyncio.timeout(timeout):
                    body, message = await _rest(receive, message, body, limit)
    except TimeoutError:
        late = f"Request Timeout: the request body did not arrive within {timeout:g} s"
        raise HttpError(408, INVALID_REQUEST, late, [(b"connection", b"close")]) from None
    if message.get("type") == "http.disconnect":
        return None
    if len(body) > limit:
        raise HttpError(413, INVALID_REQUEST, f"Payload Too Large: the limit is {limit} bytes")
    return body


async def _rest(receive: Receive, message: Any, body: bytes, limit: int) -> tuple[bytes, Any]:
    """The rest of a body that came in pieces, and the last message read (a disconnect, if the client left)."""
    chunks = [body]
    size = len(body)
    while message.get("more_body") and size <= limit:
        message = await receive()
        piece = message.get("body", b"")
        size += len(piece)
        chunks.append(piece)
    return b"".join(chunks), message


def _origin(scope: Scope, headers: Headers) -> str | None:
    """The address this request reached the server at (scheme and Host, which the guard has checked): where the
    session's approval pages are served."""
    host = headers.get(b"host")
    if host is None:
        return None
    return f"{scope.get('scheme', 'http')}://{host.decode('latin-1')}"
