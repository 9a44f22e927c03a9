"""The Streamable HTTP transport as a plain ASGI application: one endpoint, POST / GET / DELETE.

POST carries one JSON-RPC message (or a 2025-03-26 batch). Notifications and responses get 202. A request gets
JSON when its response is the first thing it produces, and an SSE stream when something else comes first
(progress, a log line, a request to the client); ``json_response=True`` always answers JSON. GET opens the session's
standalone SSE stream, or resumes any stream with ``Last-Event-ID``. DELETE ends the session.

Safe by default: a present but foreign ``Origin`` gets 403, a ``Host`` that is not a loopback name gets 403 (the
DNS-rebinding defence), bodies over the limit get 413, and every 4xx carries a JSON-RPC error body that says why.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import orjson

from ...protocol import jsonrpc, versions
from ...protocol.errors import INVALID_REQUEST, PARSE_ERROR
from ...protocol.jsonrpc import Invalid, Request
from ...server.deck import Deck
from .channels import Channel, HttpSession
from .events import PRIMING, EventStore, MemoryEventStore

log = logging.getLogger("tooldeck.http")

Scope = MutableMapping[str, Any]
Headers = dict[bytes, bytes]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SESSION_NOT_FOUND = -32001  # no code is specified; the TypeScript SDK's, so clients that look at it understand
SERVER_BUSY = -32000
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_JSON = [(b"content-type", b"application/json")]
_NO_HEADERS: list[Any] = []
_VERSIONS = {version.encode(): version for version in versions.SUPPORTED}
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


class HttpApp:
    """``deck.http_app()``: mount it anywhere ASGI apps go, or let ``tooldeck serve --http`` run it under uvicorn.

    ``allowed_hosts`` / ``allowed_origins``: host names (or full origins) accepted besides the loopback names;
    ``"*"`` accepts any. ``stateless``: no sessions; every POST is answered on its own. ``session_idle_timeout``:
    seconds without traffic after which a session is closed. ``max_sessions``: live sessions at most (503 past it).
    """

    def __init__(
        self,
        deck: Deck,
        *,
        path: str = "/mcp",
        json_response: bool = False,
        stateless: bool = False,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        max_body_bytes: int | None = None,
        event_store: EventStore | None = None,
        retry_ms: int = 1000,
        keepalive: float = 25.0,
    ) -> None:
        self.deck = deck
        self.path = path
        self.json_response = json_response
        self.stateless = stateless
        self.allowed_hosts = _names(allowed_hosts)
        self.allowed_origins = _names(allowed_origins)
        self.session_idle_timeout = session_idle_timeout
        self.max_sessions = max_sessions
        self.max_body_bytes = max_body_bytes if max_body_bytes is not None else deck.max_message_bytes
        self.events: EventStore = event_store if event_store is not None else MemoryEventStore()
        self.retry_ms = retry_ms
        self.keepalive = keepalive
        self.sessions: dict[str, HttpSession] = {}
        self.shutting_down = False
        self._reaper: asyncio.Task[None] | None = None
        self._verdicts: dict[tuple[bytes | None, bytes | None], str | None] = {}
        self._endpoint = path.rstrip("/")

    # --- ASGI entry point ---------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            try:
                await self._http(scope, receive, send)
            except Refusal as refusal:  # raised only before anything was sent
                await _error(send, refusal.status, refusal.code, refusal.message, refusal.headers)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: Headers = dict(scope["headers"])  # ASGI names are lower-case; values are decoded only when read
        self._check_host_and_origin(headers)
        path = scope["path"]
        if path != self.path and path.rstrip("/") != self._endpoint:
            raise Refusal(404, INVALID_REQUEST, f"Not found: the MCP endpoint is {self.path}")
        if self._reaper is None and not self.stateless:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())
        method = scope["method"]
        if method == "POST":
            await self._post(headers, receive, send)
        elif method == "GET":
            await self._get(headers, receive, send)
        elif method == "DELETE":
            await self._delete(headers, send)
        else:
            raise Refusal(405, INVALID_REQUEST, f"Method not allowed: {method}", [(b"allow", b"GET, POST, DELETE")])

    # --- security -----------------------------------------------------------------------------------------------

    def _check_host_and_origin(self, headers: Headers) -> None:
        key = (headers.get(b"host"), headers.get(b"origin"))
        verdict = self._verdicts.get(key, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = self._judge_host_and_origin(*(_text(value) for value in key))
            if len(self._verdicts) < 256:  # a client sends the same few values every time; a flood is not cached
                self._verdicts[key] = verdict
        if verdict is not None:
            raise Refusal(403, INVALID_REQUEST, verdict)  # type: ignore[arg-type]

    def _judge_host_and_origin(self, host: str | None, origin: str | None) -> str | None:
        if host is not None and "*" not in self.allowed_hosts:
            name = _hostname(host)
            if name not in LOOPBACK and name not in self.allowed_hosts:
                return (
                    f"Forbidden: Host {host!r} is not allowed (DNS rebinding protection; allow it with allowed_hosts)"
                )
        if origin is not None and not self._origin_allowed(origin):
            return f"Forbidden: Origin {origin!r} is not allowed (allow it with allowed_origins)"
        return None

    def _origin_allowed(self, origin: str) -> bool:
        if "*" in self.allowed_origins:
            return True
        origin = origin.lower().rstrip("/")
        if origin in self.allowed_origins:  # a full origin was listed
            return True
        _, sep, rest = origin.partition("://")
        if not sep:
            return False  # "null" and other opaque origins
        name = _hostname(rest)
        return name in LOOPBACK or name in self.allowed_origins  # or its host name was

    # --- POST ---------------------------------------------------------------------------------------------------

    async def _post(self, headers: Headers, receive: Receive, send: Send) -> None:
        if not _is_json(headers.get(b"content-type")):
            raise Refusal(415, INVALID_REQUEST, "Unsupported Media Type: POST bodies must be application/json")
        json_ok, sse_ok = _accepts(headers.get(b"accept"))
        if not (json_ok or sse_ok):
            raise Refusal(406, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream")
        body = await _read_body(receive, self.max_body_bytes)
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise Refusal(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if type(obj) is list:
            await self._post_batch(headers, obj, json_ok, sse_ok, receive, send)
            return
        message = jsonrpc.parse(obj)
        if type(message) is Invalid:
            await _respond(send, 400, orjson.dumps(jsonrpc.error(message.id, message.error)), _JSON)
            return
        if type(message) is not Request:  # a notification or a response
            http_session = self._session_of(headers)
            http_session.session.receive_parsed(message)
            http_session.touch()
            await _respond(send, 202, b"", [])
            return
        initialize = message.method == "initialize"
        http_session = self._new_session() if initialize else self._session_of(headers)
        await self._exchange(http_session, message, (message.id,), json_ok, sse_ok, initialize, receive, send)

    async def _post_batch(
        self, headers: Headers, batch: list[Any], json_ok: bool, sse_ok: bool, receive: Receive, send: Send
    ) -> None:
        """A 2025-03-26 JSON-RPC batch: one POST, its responses as one array (or one SSE stream)."""
        if not batch:
            raise Refusal(400, INVALID_REQUEST, "Invalid request: empty batch")
        messages = [jsonrpc.parse(item) for item in batch]
        request_ids = tuple(m.id for m in messages if type(m) is Request)
        http_session = self._session_of(headers)
        version = http_session.session.protocol_version
        if not versions.accepts_batches(version):
            raise Refusal(400, INVALID_REQUEST, f"Invalid request: JSON-RPC batches are not supported in {version}")
        if not request_ids:
            http_session.session.receive_batch(messages)
            http_session.touch()
            await _respond(send, 202, b"", [])
            return
        await self._exchange(http_session, messages, request_ids, json_ok, sse_ok, False, receive, send)

    def _new_session(self) -> HttpSession:
        if self.shutting_down:
            raise Refusal(503, SERVER_BUSY, "Service Unavailable: the server is shutting down")
        if self.stateless:
            return HttpSession(self.deck, None)
        if len(self.sessions) >= self.max_sessions:
            raise Refusal(503, SERVER_BUSY, f"Service Unavailable: {self.max_sessions} sessions are open")
        return HttpSession(self.deck, secrets.token_urlsafe(24))

    def _session_of(self, headers: Headers) -> HttpSession:
        """The session a non-initialize POST belongs to (a transient one when stateless)."""
        version = self._version(headers)
        if self.stateless:
            transient = HttpSession(self.deck, None)
            transient.session.assume_initialized(version)  # each request stands alone: there is no handshake
            return transient
        return self._lookup(headers)

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
            if isinstance(message, list):
                session.receive_batch(message)
            else:  # work that can only end in its response runs here, in this request's own task
                work = session.receive_inline(message)
                if work is not None:
                    await work
            json_only = not sse_ok or (self.json_response and json_ok)
            while not channel.finished and not http_session.closed:
                if channel.queue and not json_only:
                    break  # something came before the response: this answer is a stream
                if channel.sse and sse_ok:
                    break
                channel.wakeup.clear()
                await channel.wakeup.wait()
            extra = _NO_HEADERS
            if initialize and http_session.id is not None and self._initialized(http_session, channel):
                self.sessions[http_session.id] = http_session
                extra = [(b"mcp-session-id", http_session.id.encode())]
            if http_session.closed and not channel.queue:
                gone = "Session not found: it was deleted or expired while this request ran"
                await _error(send, 404, SESSION_NOT_FOUND, gone)
            elif json_only or (channel.finished and not channel.sse and len(channel.queue) <= 1):
                await self._answer_json(http_session, channel, send, extra)
            else:
                await _respond_start(send, 200, [*_SSE, *extra])
                await self._stream(http_session, channel, receive, send, prime=True)
        finally:
            http_session.connections -= 1
            http_session.touch()
            if http_session.id is None:
                http_session.close()  # stateless: nothing outlives the request

    @staticmethod
    def _initialized(http_session: HttpSession, channel: Channel) -> bool:
        return bool(channel.queue) and "result" in channel.queue[-1] and http_session.session.initialized

    async def _answer_json(self, http_session: HttpSession, channel: Channel, send: Send, extra: list[Any]) -> None:
        response = None
        for message in channel.queue:  # notifications cannot reach a JSON-only client: only the response is kept
            if type(message) is list or "method" not in message:
                response = message
        channel.queue.clear()
        http_session.retire(channel)
        if response is None:  # cancelled by the client, or the session ended: there is no response to give
            await _respond(send, 202, b"", extra)
            return
        await _respond(send, 200, orjson.dumps(response), _JSON + extra)

    # --- SSE ----------------------------------------------------------------------------------------------------

    async def _stream(
        self, http_session: HttpSession, channel: Channel, receive: Receive, send: Send, *, prime: bool
    ) -> None:
        """Write ``channel``'s events to this connection until it is done, dropped, or the session ends."""
        gone = asyncio.Event()
        watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, gone, channel))
        channel.attached = True
        try:
            if prime:
                event_id = await self._store(http_session, channel, PRIMING)
                await _body(send, f"id: {event_id}\nretry: {self.retry_ms}\ndata: \n\n".encode())
            while not gone.is_set():
                while channel.queue and not gone.is_set():
                    message = channel.queue.popleft()
                    event_id = await self._store(http_session, channel, message)
                    await _body(
                        send, b"id: %s\nevent: message\ndata: %s\n\n" % (event_id.encode(), orjson.dumps(message))
                    )
                if channel.finished:
                    http_session.retire(channel)
                    break
                if channel.drop_connection:
                    channel.drop_connection = False  # the client resumes with Last-Event-ID
                    break
                if http_session.closed or (self.shutting_down and channel is http_session.standalone):
                    break
                channel.wakeup.clear()
                try:
                    await asyncio.wait_for(channel.wakeup.wait(), self.keepalive)
                except TimeoutError:
                    await _body(send, b": keepalive\n\n")
            if not gone.is_set():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            channel.attached = False
            watcher.cancel()

    async def _store(self, http_session: HttpSession, channel: Channel, message: Any) -> str:
        if http_session.id is None:  # stateless: nothing can be resumed, ids only need to be unique
            return http_session.local_event_id(channel)
        return await self.events.append(http_session.id, channel.stream_id, message)

    # --- GET ----------------------------------------------------------------------------------------------------

    async def _get(self, headers: Headers, receive: Receive, send: Send) -> None:
        if self.stateless:
            raise Refusal(405, INVALID_REQUEST, "Method not allowed: a stateless server has no GET stream",
                          [(b"allow", b"POST")])  # fmt: skip
        if not _accepts(headers.get(b"accept"))[1]:
            raise Refusal(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        self._version(headers)
        http_session = self._lookup(headers)
        last_event_id = _text(headers.get(b"last-event-id"))
        http_session.connections += 1
        try:
            if last_event_id is None:
                channel = http_session.open_standalone()
                if channel.attached:
                    await _error(send, 409, INVALID_REQUEST, "Conflict: this session's GET stream is already open")
                    return
                await _respond_start(send, 200, _SSE)
                await self._stream(http_session, channel, receive, send, prime=True)
                return
            found = await self.events.replay(http_session.id or "", last_event_id)
            if found is None:
                message = f"Last-Event-ID {last_event_id!r} is unknown or too old to resume"
                await _error(send, 404, INVALID_REQUEST, message)
                return
            stream_id, missed = found
            live = http_session.channels.get(stream_id)
            if live is not None and live.attached:
                await _error(send, 409, INVALID_REQUEST, "Conflict: that stream is already being read")
                return
            await _respond_start(send, 200, _SSE)
            for event_id, message in missed:
                await _body(send, b"id: %s\nevent: message\ndata: %s\n\n" % (event_id.encode(), orjson.dumps(message)))
            if live is None:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await self._stream(http_session, live, receive, send, prime=False)
        finally:
            http_session.connections -= 1
            http_session.touch()

    # --- DELETE -------------------------------------------------------------------------------------------------

    async def _delete(self, headers: Headers, send: Send) -> None:
        if self.stateless:
            raise Refusal(405, INVALID_REQUEST, "Method not allowed: a stateless server has no sessions",
                          [(b"allow", b"POST")])  # fmt: skip
        await self.close_session(self._lookup(headers))
        await _respond(send, 200, b"", [])

    # --- sessions -----------------------------------------------------------------------------------------------

    def _lookup(self, headers: Headers) -> HttpSession:
        session_id = headers.get(b"mcp-session-id")
        if session_id is None:
            raise Refusal(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required; initialize first")
        http_session = self.sessions.get(session_id.decode("latin-1"))
        if http_session is None or http_session.closed:
            message = "Session not found: it expired or was deleted; initialize a new session"
            raise Refusal(404, SESSION_NOT_FOUND, message)
        return http_session

    def _version(self, headers: Headers) -> str:
        """The revision the request speaks by its MCP-Protocol-Version header."""
        raw = headers.get(b"mcp-protocol-version")
        if raw is None:
            return "2025-03-26"  # what the spec says to assume when the header is absent
        version = _VERSIONS.get(raw)
        if version is None:
            supported = ", ".join(versions.SUPPORTED)
            message = f"Bad Request: unsupported MCP-Protocol-Version {_text(raw)!r} (supported: {supported})"
            raise Refusal(400, INVALID_REQUEST, message)
        return version

    async def close_session(self, http_session: HttpSession) -> None:
        """End a session and release everything it holds: work, streams, stored events."""
        if http_session.id is not None:
            self.sessions.pop(http_session.id, None)
        tasks = http_session.close()
        if http_session.id is not None:
            await self.events.forget(http_session.id)
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _reap_forever(self) -> None:
        interval = max(min(self.session_idle_timeout / 4, 60.0), 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.reap()

    async def reap(self) -> int:
        """Close sessions idle for longer than the timeout (never one with an open connection)."""
        import time

        deadline = time.monotonic() - self.session_idle_timeout
        idle = [s for s in self.sessions.values() if s.connections == 0 and s.last_active < deadline]
        for http_session in idle:
            log.info("closing idle session %s", http_session.id)
            await self.close_session(http_session)
        return len(idle)

    # --- lifespan -----------------------------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Stop taking new sessions and end GET streams; POSTs in flight are left to finish (graceful drain)."""
        self.shutting_down = True
        for http_session in self.sessions.values():
            if http_session.standalone is not None:
                http_session.standalone.wake()

    async def aclose(self) -> None:
        """Close every session (cancelling its work) and stop the reaper."""
        self.begin_shutdown()
        for http_session in list(self.sessions.values()):
            await self.close_session(http_session)
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


# --- helpers ----------------------------------------------------------------------------------------------------


def _names(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(v.lower().rstrip("/") for v in values)


def _hostname(host: str) -> str:
    host = host.lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.partition(":")[0]


_UNSEEN = object()
_ACCEPTS: dict[bytes | None, tuple[bool, bool]] = {None: (True, True)}
_MEDIA: dict[bytes | None, bool] = {}


class Refusal(Exception):
    """An HTTP error answer decided before anything was sent: its status, JSON-RPC error code and message."""

    def __init__(self, status: int, code: int, message: str, headers: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


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
        found = _parse_accept(accept.decode("latin-1"))  # type: ignore[union-attr]
        if len(_ACCEPTS) < 256:
            _ACCEPTS[accept] = found
    return found


def _parse_accept(accept: str) -> tuple[bool, bool]:
    types = {part.partition(";")[0].strip().lower() for part in accept.split(",")}
    anything = "*/*" in types
    return (anything or "application/json" in types or "application/*" in types,
            anything or "text/event-stream" in types or "text/*" in types)  # fmt: skip


async def _read_body(receive: Receive, limit: int) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if message.get("more_body"):  # the body came in pieces (the usual case is one message)
        chunks = [body]
        size = len(body)
        while message.get("more_body") and size <= limit:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
        body = b"".join(chunks)
    if len(body) > limit:
        raise Refusal(413, INVALID_REQUEST, f"Payload Too Large: the limit is {limit} bytes")
    return body


async def _watch_disconnect(receive: Receive, gone: asyncio.Event, channel: Channel) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            channel.wake()
            return


async def _respond_start(send: Send, status: int, headers: list[Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _body(send: Send, data: bytes) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def _respond(send: Send, status: int, body: bytes, headers: list[Any]) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, code: int, message: str, extra: list[Any] | None = None) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "error": {"code": code, "message": message}})
    await _respond(send, status, body, _JSON + (extra or []))
