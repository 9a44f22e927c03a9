"""The in-process transport: a client connected to a Session through real JSON bytes, for tests and the CLI.

Every message crosses as encoded JSON (as on a pipe), so what a test sees is exactly what a client would read.

    async with connect(deck) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol import versions
from ..protocol.codec import encode
from ..server.session import Session

if TYPE_CHECKING:
    from ..server.core import Server as Deck

Observer = Callable[[bytes, Any], None]


class ClientError(Exception):
    """A JSON-RPC error: the server's answer to our request, or ours to the server's (raise it in a handler)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


class MemoryClient:
    """A minimal MCP client speaking to one in-process session."""

    def __init__(self, deck: Deck, observer: Observer | None = None) -> None:
        self._observer = observer
        self._ids = itertools.count(1)
        self._waiting: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.unrouted: list[Any] = []
        self._notified = asyncio.Event()
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}  # answers to the server's requests
        self.requests: list[dict[str, Any]] = []  # every request the server sent
        self.session = Session(deck, self._from_server, principal=deck.local_principal())
        self.initialize_result: dict[str, Any] | None = None

    def _from_server(self, message: Any, related: Any = None) -> None:
        data = encode(message)
        decoded = orjson.loads(data)
        if self._observer is not None:
            self._observer(data, decoded)
        if isinstance(decoded, dict) and "method" in decoded and "id" not in decoded:
            self.notifications.append(decoded)
            self._notified.set()
            return
        if isinstance(decoded, dict) and "method" in decoded:
            self.requests.append(decoded)
            asyncio.get_running_loop().call_soon(self._answer, decoded)  # as a real client would: later
            return
        key = decoded.get("id") if isinstance(decoded, dict) else None
        future = self._waiting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(decoded)
        else:
            self.unrouted.append(decoded)

    def on_request(self, method: str, handler: Callable[[dict[str, Any]], Any]) -> None:
        """Answer the server's ``method`` requests with ``handler(params)`` (a result dict, or raise ClientError;
        an awaitable is awaited). Unhandled methods are answered with -32601, as a client without them would."""
        self.handlers[method] = handler

    def _answer(self, request: dict[str, Any]) -> None:
        asyncio.get_running_loop().create_task(self._answer_async(request))

    async def _answer_async(self, request: dict[str, Any]) -> None:
        handler = self.handlers.get(request["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if handler is None:
            reply["error"] = {"code": -32601, "message": f"Method not found: {request['method']}"}
        else:
            try:
                result = handler(request.get("params", {}))
                if inspect.isawaitable(result):
                    result = await result
                if result is None:
                    return  # the handler chose not to answer (tests of time-outs)
                reply["result"] = result
            except ClientError as exc:
                reply["error"] = {"code": exc.code, "message": exc.message}
        self.send(reply)

    def send(self, message: Any) -> None:
        self.session.receive(orjson.loads(orjson.dumps(message)))

    async def request_raw(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """Send a request and return the whole response message (result or error)."""
        request_id = extra.pop("id", None)
        if request_id is None:
            request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self.send(message)
        return await future

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its result; a JSON-RPC error raises ``ClientError``."""
        response = await self.request_raw(method, params)
        if "error" in response:
            raise ClientError(response["error"])
        return response["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    async def initialize(
        self,
        protocol_version: str = versions.LATEST,
        capabilities: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        params = {
            "protocolVersion": protocol_version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "tooldeck-memory-client", "version": "1"},
        }
        self.initialize_result = await self.request("initialize", params)
        self.notify("notifications/initialized")
        return self.initialize_result

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        return await self.request("tools/call", params)

    async def wait_for_notification(self, method: str, timeout: float = 5.0) -> dict[str, Any]:
        """The first notification with ``method`` not yet consumed (waits for it to arrive)."""
        async with asyncio.timeout(timeout):
            while True:
                for i, note in enumerate(self.notifications):
                    if note["method"] == method:
                        return self.notifications.pop(i)
                self._notified.clear()
                await self._notified.wait()

    async def aclose(self) -> None:
        tasks = self.session.close()
        if tasks:
            await asyncio.wait(tasks, timeout=5)


@asynccontextmanager
async def connect(
    deck: Deck,
    *,
    initialize: bool = True,
    protocol_version: str = versions.LATEST,
    capabilities: dict[str, Any] | None = None,
    observer: Observer | None = None,
) -> AsyncIterator[MemoryClient]:
    """An initialized in-process client for ``deck`` (closed, with its work cancelled, on exit)."""
    client = MemoryClient(deck, observer)
    try:
        if initialize:
            await client.initialize(protocol_version, capabilities)
        yield client
    finally:
        await client.aclose()
