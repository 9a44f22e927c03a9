"""An in-process ASGI client for the HTTP transport tests: real ASGI messages, streamed SSE, schema-checked.

Every JSON-RPC message in a JSON body or an SSE event is checked against the official schema by a WireChecker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from mcp_schema import WireChecker

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


class Response:
    """One HTTP response; ``events()`` reads an SSE body as it arrives."""

    def __init__(self, task: asyncio.Task[None], outbox: asyncio.Queue[Any], disconnect: asyncio.Event) -> None:
        self._task = task
        self._outbox = outbox
        self._disconnect = disconnect
        self.status = 0
        self.headers: dict[str, str] = {}
        self._buffer = b""
        self.ended = False
        self.checker: WireChecker | None = None

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
        message = orjson.loads(await self.body())
        if self.checker is not None:
            self.checker.received(message)
        return message

    async def events(self, timeout: float = 10) -> AsyncIterator[Event]:
        while True:
            while b"\n\n" not in self._buffer:
                chunk = await self._chunk(timeout)
                if chunk is None:
                    return
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
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
                continue  # a comment-only block (keepalive)
            if event.data and self.checker is not None:
                self.checker.received(orjson.loads(event.data))
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
    def __init__(self, app: Any, *, host: str = "127.0.0.1:8000") -> None:
        self.app = app
        self.host = host
        self.checker = WireChecker()

    async def request(
        self,
        method: str,
        *,
        path: str = "/mcp",
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        json: Any = None,
    ) -> Response:
        if json is not None:
            self.checker.sent(json)
            body = orjson.dumps(json)
        all_headers = {"host": self.host, **(headers or {})}
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        disconnect = asyncio.Event()
        sent_body = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            await outbox.put(message)

        task = asyncio.get_running_loop().create_task(self.app(scope, receive, send))
        response = Response(task, outbox, disconnect)
        response.checker = self.checker
        await response._start()
        return response

    async def post(self, message: Any, *, session: str | None = None, accept: str = ACCEPT_BOTH,
                   version: str | None = "2025-11-25", headers: dict[str, str] | None = None) -> Response:  # fmt: skip
        all_headers = {"content-type": "application/json", "accept": accept}
        if session is not None:
            all_headers["mcp-session-id"] = session
        if version is not None:
            all_headers["mcp-protocol-version"] = version
        all_headers.update(headers or {})
        return await self.request("POST", headers=all_headers, json=message)

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
