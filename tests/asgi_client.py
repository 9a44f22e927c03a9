"""An in-process ASGI client for the HTTP transport tests: real ASGI messages, streamed SSE, schema-checked.

Every JSON-RPC message in a JSON body (of any status) or an SSE event is checked against the official schema by a
WireChecker; a request body can be delivered in pieces (``chunk_size=``), as a network would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from mcp_schema import MODERN, WireChecker, modern_claim

ACCEPT_BOTH = "application/json, text/event-stream"
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "asgi-test", "version": "1"},
}


class Event:
    __slots__ = ("data", "event", "id", "retry")

    def __init__(self) -> None:
        self.id: str | None = None
        self.event: str | None = None
        self.data: str | None = None
        self.retry: int | None = None

    @property
    def message(self) -> Any:
        return orjson.loads(self.data) if self.data else None

    def __repr__(self) -> str:
        return f"Event(id={self.id!r}, data={self.data!r})"


def parse_event(raw: bytes) -> Event | None:
    """One SSE event block (without its blank line); None for a comment-only block (a keepalive)."""
    event = Event()
    for line in raw.decode().split("\n"):
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event.id = value
        elif field == "event":
            event.event = value
        elif field == "retry":
            event.retry = int(value)
        elif field == "data":
            event.data = value if event.data is None else event.data + "\n" + value
    if event.id is None and event.data is None:
        return None
    return event


class BodyCheck:
    """Feeds a checker the JSON-RPC in one response's body as the app sends it, whether the test reads it or not: a
    JSON body of any status (error bodies included) once it has ended, each SSE event as its blank line arrives."""

    def __init__(self, checker: WireChecker, version: str | None = None) -> None:
        self.checker = checker
        self.version = version  # the revision of the request whose response this is, when it is a modern one
        self.status = 0
        self.sse = False
        self.unchecked = b""  # SSE bytes not yet checked, or the JSON body so far

    def feed(self, message: dict[str, Any]) -> None:
        """Called from the app's ``send``: never raises into the app, which could swallow it."""
        try:
            self._feed(message)
        except Exception as exc:
            self.checker.record(f"unreadable HTTP {self.status} response ({exc!r})", message)

    def _feed(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            self.sse = headers.get("content-type", "").startswith("text/event-stream")
            return
        self.unchecked += bytes(message.get("body", b""))
        if self.sse:
            while b"\n\n" in self.unchecked:
                raw, self.unchecked = self.unchecked.split(b"\n\n", 1)
                event = parse_event(raw)
                if event is not None and event.data:
                    self.check(event.data.encode())
        elif not message.get("more_body", False) and self.unchecked:
            self.check(self.unchecked)
            self.unchecked = b""

    def check(self, data: bytes) -> None:
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            self.checker.record(f"HTTP {self.status} body is not JSON ({exc})", data[:300])
        else:
            self.checker.received(message, self.version)


class Response:
    """One HTTP response; ``events()`` reads an SSE body as it arrives (its messages were checked as they were sent)."""

    def __init__(self, task: asyncio.Task[None], outbox: asyncio.Queue[Any], disconnect: asyncio.Event) -> None:
        self._task = task
        self._outbox = outbox
        self._disconnect = disconnect
        self.status = 0
        self.headers: dict[str, str] = {}
        self._buffer = b""
        self.ended = False

    async def _start(self) -> None:
        message = await asyncio.wait_for(self._outbox.get(), 10)
        assert message["type"] == "http.response.start", message
        self.status = message["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}

    async def _chunk(self, timeout: float) -> bytes | None:
        if self.ended:
            return None
        message = await asyncio.wait_for(self._outbox.get(), timeout)
        assert message["type"] == "http.response.body", message
        if not message.get("more_body", False):
            self.ended = True
        return bytes(message.get("body", b""))

    async def body(self, timeout: float = 10) -> bytes:
        data = b""
        while not self.ended:
            data += await self._chunk(timeout) or b""
        return data

    async def json(self) -> Any:
        return orjson.loads(await self.body())

    async def events(self, timeout: float = 10) -> AsyncIterator[Event]:
        while True:
            while b"\n\n" not in self._buffer:
                chunk = await self._chunk(timeout)
                if chunk is None:
                    return
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            event = parse_event(raw)
            if event is not None:
                yield event

    async def messages_until(self, request_id: Any) -> list[Any]:
        """The SSE messages up to and including the response to ``request_id``."""
        out = []
        async for event in self.events():
            if event.data:
                out.append(event.message)
                if out[-1].get("id") == request_id and "method" not in out[-1]:
                    return out
        raise AssertionError(f"stream ended without a response to {request_id!r}: {out}")

    async def close(self) -> None:
        """The client goes away (the server sees http.disconnect)."""
        self._disconnect.set()
        try:
            await asyncio.wait_for(self._task, 5)
        except (asyncio.CancelledError, TimeoutError):
            pass


class AsgiClient:
    def __init__(
        self, app: Any, *, host: str = "127.0.0.1:8000", client: tuple[str, int] = ("127.0.0.1", 50000)
    ) -> None:
        self.app = app
        self.host = host
        self.client = client  # the scope's client address
        self.checker = WireChecker(name="AsgiClient")

    async def request(
        self,
        method: str,
        *,
        path: str = "/mcp",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        json: Any = None,
        chunk_size: int | None = None,
        jsonrpc: bool = True,
    ) -> Response:
        """Send one request; ``chunk_size`` splits its body over that many bytes per ``http.request`` message.

        ``jsonrpc=False`` is for a route that is not the MCP endpoint (a layer's own app): its body is not checked.
        """
        if json is not None:
            self.checker.sent(json)
            body = orjson.dumps(json)
        all_headers = {"host": self.host, **(headers or {})}
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
            "client": self.client,
            "server": ("127.0.0.1", 8000),
        }
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        disconnect = asyncio.Event()
        size = chunk_size or max(len(body), 1)
        pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]

        async def receive() -> dict[str, Any]:
            if pieces:
                piece = pieces.pop(0)
                return {"type": "http.request", "body": piece, "more_body": bool(pieces)}
            await disconnect.wait()
            return {"type": "http.disconnect"}

        body_check = BodyCheck(self.checker, MODERN if modern_claim(json) else None) if jsonrpc else None

        async def send(message: dict[str, Any]) -> None:
            if body_check is not None:
                body_check.feed(message)
            await outbox.put(message)

        task = asyncio.get_running_loop().create_task(self.app(scope, receive, send))
        response = Response(task, outbox, disconnect)
        await response._start()
        return response

    async def post(self, message: Any, *, session: str | None = None, accept: str = ACCEPT_BOTH,
                   version: str | None = "2025-11-25", headers: dict[str, str] | None = None,
                   chunk_size: int | None = None, path: str = "/mcp") -> Response:  # fmt: skip
        all_headers = {"content-type": "application/json", "accept": accept}
        if session is not None:
            all_headers["mcp-session-id"] = session
        if version is not None:
            all_headers["mcp-protocol-version"] = version
        all_headers.update(headers or {})
        return await self.request("POST", path=path, headers=all_headers, json=message, chunk_size=chunk_size)

    async def initialize(self, version: str = "2025-11-25") -> str:
        response = await self.post(
            {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {**INIT, "protocolVersion": version}},
            version=None,
        )
        assert response.status == 200, await response.body()
        await response.json()
        session = response.headers["mcp-session-id"]
        done = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
        assert done.status == 202
        return session

    async def call(self, session: str, request_id: Any, method: str, params: Any = None, **kw: Any) -> Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.post(message, session=session, **kw)
