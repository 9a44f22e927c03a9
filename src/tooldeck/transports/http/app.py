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
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SESSION_NOT_FOUND = -32001  # no code is specified; the TypeScript SDK's, so clients that look at it understand
SERVER_BUSY = -32000
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_JSON = [(b"content-type", b"application/json")]
_WANTED = frozenset(  # the request headers the transport reads; the others are never decoded
    {b"host", b"origin", b"content-type", b"accept", b"mcp-session-id", b"mcp-protocol-version", b"last-event-id"}
)
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
        self._verdicts: dict[tuple[str | None, str | None], str | None] = {}

    # --- ASGI entry point ---------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"] if key in _WANTED}
        refusal = self._refuse_host_or_origin(headers)
        if refusal is not None:
            await _error(send, 403, INVALID_REQUEST, refusal)
            return
        if scope["path"].rstrip("/") != self.path.rstrip("/"):
            await _error(send, 404, INVALID_REQUEST, f"Not found: the MCP endpoint is {self.path}")
            return
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
            extra = [(b"allow", b"GET, POST, DELETE")]
            await _error(send, 405, INVALID_REQUEST, f"Method not allowed: {method}", extra)

    # --- security -----------------------------------------------------------------------------------------------

    def _refuse_host_or_origin(self, headers: dict[str, str]) -> str | None:
        key = (headers.get("host"), headers.get("origin"))
        verdict = self._verdicts.get(key, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = self._judge_host_and_origin(headers)
            if len(self._verdicts) < 256:  # a client sends the same few values every time; a flood is not cached
                self._verdicts[key] = verdict
        return verdict  # type: ignore[return-value]

    def _judge_host_and_origin(self, headers: dict[str, str]) -> str | None:
        host = headers.get("host")
        if host is not None and "*" not in self.allowed_hosts:
            name = _hostname(host)
            if name not in LOOPBACK and name not in self.allowed_hosts:
                return (
                    f"Forbidden: Host {host!r} is not allowed (DNS rebinding protection; allow it with allowed_hosts)"
                )
        origin = headers.get("origin")
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

    async def _post(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if headers.get("content-type", "").partition(";")[0].strip().lower() != "application/json":
            await _error(send, 415, INVALID_REQUEST, "Unsupported Media Type: POST bodies must be application/json")
            return
        json_ok, sse_ok = _accepts(headers.get("accept"))
        if not (json_ok or sse_ok):
            await _error(send, 406, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream")
            return
        body = await _read_body(receive, self.max_body_bytes)
        if body is None:
            await _error(send, 413, INVALID_REQUEST, f"Payload Too Large: the limit is {self.max_body_bytes} bytes")
            return
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            await _error(send, 400, PARSE_ERROR, f"Parse error: {exc}")
            return
        if type(obj) is list:
            if not obj:
                await _error(send, 400, INVALID_REQUEST, "Invalid request: empty batch")
                return
            parsed = [jsonrpc.parse(item) for item in obj]
        else:
            parsed = [jsonrpc.parse(obj)]
            first = parsed[0]
            if type(first) is Invalid:
                status_body = jsonrpc.error(first.id, first.error)
                await _respond(send, 400, orjson.dumps(status_body), _JSON)
                return
        requests = [m for m in parsed if type(m) is Request]
        initialize = type(obj) is dict and bool(requests) and requests[0].method == "initialize"
        http_session = await self._session_for_post(headers, send, initialize)
        if http_session is None:
            return
        if type(obj) is list and not versions.accepts_batches(http_session.session.protocol_version):
            version = http_session.session.protocol_version
            await _error(
                send, 400, INVALID_REQUEST, f"Invalid request: JSON-RPC batches are not supported in {version}"
            )
            return
        if not requests:
            http_session.session.receive(obj)
            http_session.touch()
            await _respond(send, 202, b"", [])
            return
        await self._exchange(http_session, obj, requests, json_ok, sse_ok, initialize, receive, send)

    async def _session_for_post(self, headers: dict[str, str], send: Send, initialize: bool) -> HttpSession | None:
        if initialize:
            if self.shutting_down:
                await _error(send, 503, SERVER_BUSY, "Service Unavailable: the server is shutting down")
                return None
            if self.stateless:
                return HttpSession(self.deck, None)
            if len(self.sessions) >= self.max_sessions:
                await _error(send, 503, SERVER_BUSY, f"Service Unavailable: {self.max_sessions} sessions are open")
                return None
            return HttpSession(self.deck, secrets.token_urlsafe(24))
        version = await self._check_version(headers, send)
        if version is None:
            return None
        if self.stateless:
            transient = HttpSession(self.deck, None)
            transient.session.assume_initialized(version)  # each request stands alone: there is no handshake
            return transient
        return await self._lookup(headers, send)

    async def _exchange(
        self,
        http_session: HttpSession,
        obj: Any,
        requests: list[Request],
        json_ok: bool,
        sse_ok: bool,
        initialize: bool,
        receive: Receive,
        send: Send,
    ) -> None:
        channel = http_session.open_channel(tuple(r.id for r in requests))
        http_session.connections += 1
        session = http_session.session
        try:
            if len(requests) == 1 and type(obj) is dict:
                # Work that can only end in its response runs here, in this request's own task.
                request_id = requests[0].id
                session.inline.add(request_id)
                session.receive_parsed(requests[0])
                work = session.take_inline(request_id)
                if work is not None:
                    await work
            else:
                session.receive(obj)
            json_only = not sse_ok or (self.json_response and json_ok)
            while not channel.finished and not http_session.closed:
                if channel.queue and not json_only:
                    break  # something came before the response: this answer is a stream
                if channel.sse and sse_ok:
                    break
                channel.wakeup.clear()
                await channel.wakeup.wait()
            extra = []
            if initialize and http_session.id is not None and self._initialized(http_session, channel):
                self.sessions[http_session.id] = http_session
                extra.append((b"mcp-session-id", http_session.id.encode()))
            if http_session.closed and not channel.queue:
                message = "Session not found: it was deleted or expired while this request ran"
                await _error(send, 404, SESSION_NOT_FOUND, message)
            elif json_only or (channel.finished and not channel.sse and len(channel.queue) <= 1):
                await self._answer_json(http_session, channel, send, extra)
            else:
                await _respond_start(send, 200, _SSE + extra)
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
        while channel.queue:  # notifications cannot reach a JSON-only client: only the response is kept
            message = channel.queue.popleft()
            if type(message) is list or "method" not in message:
                response = message
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

    async def _get(self, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if self.stateless:
            await _error(send, 405, INVALID_REQUEST, "Method not allowed: a stateless server has no GET stream",
                         [(b"allow", b"POST")])  # fmt: skip
            return
        if not _accepts(headers.get("accept"))[1]:
            await _error(send, 406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
            return
        if await self._check_version(headers, send) is None:
            return
        http_session = await self._lookup(headers, send)
        if http_session is None:
            return
        last_event_id = headers.get("last-event-id")
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

    async def _delete(self, headers: dict[str, str], send: Send) -> None:
        if self.stateless:
            await _error(send, 405, INVALID_REQUEST, "Method not allowed: a stateless server has no sessions",
                         [(b"allow", b"POST")])  # fmt: skip
            return
        http_session = await self._lookup(headers, send)
        if http_session is not None:
            await self.close_session(http_session)
            await _respond(send, 200, b"", [])

    # --- sessions -----------------------------------------------------------------------------------------------

    async def _lookup(self, headers: dict[str, str], send: Send) -> HttpSession | None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await _error(send, 400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required; initialize first")
            return None
        http_session = self.sessions.get(session_id)
        if http_session is None or http_session.closed:
            message = "Session not found: it expired or was deleted; initialize a new session"
            await _error(send, 404, SESSION_NOT_FOUND, message)
            return None
        return http_session

    async def _check_version(self, headers: dict[str, str], send: Send) -> str | None:
        version = headers.get("mcp-protocol-version")
        if version is None:
            return "2025-03-26"  # what the spec says to assume when the header is absent
        if version not in versions.SUPPORTED:
            supported = ", ".join(versions.SUPPORTED)
            message = f"Bad Request: unsupported MCP-Protocol-Version {version!r} (supported: {supported})"
            await _error(send, 400, INVALID_REQUEST, message)
            return None
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
_ACCEPTS: dict[str | None, tuple[bool, bool]] = {None: (True, True)}


def _accepts(accept: str | None) -> tuple[bool, bool]:
    """(JSON acceptable, SSE acceptable) from an Accept header; none at all accepts both."""
    found = _ACCEPTS.get(accept)
    if found is None:
        found = _parse_accept(accept)  # type: ignore[arg-type]
        if len(_ACCEPTS) < 256:
            _ACCEPTS[accept] = found
    return found


def _parse_accept(accept: str) -> tuple[bool, bool]:
    types = {part.partition(";")[0].strip().lower() for part in accept.split(",")}
    anything = "*/*" in types
    return (anything or "application/json" in types or "application/*" in types,
            anything or "text/event-stream" in types or "text/*" in types)  # fmt: skip


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


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
