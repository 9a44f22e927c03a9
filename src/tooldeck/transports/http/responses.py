"""Writing HTTP answers through ASGI ``send``: JSON bodies, JSON-RPC error bodies, and SSE framing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ...protocol.codec import encode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = dict[bytes, bytes]

JSON = [(b"content-type", b"application/json")]
SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
NO_HEADERS: list[Any] = []


async def start(send: Send, status: int, headers: list[Any]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def chunk(send: Send, data: bytes) -> None:
    """A piece of a streamed body (an SSE event)."""
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def end(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def respond(send: Send, status: int, body: bytes, headers: list[Any]) -> None:
    """A whole response with a known length."""
    headers = [*headers, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def respond_json(send: Send, status: int, message: Any, headers: list[Any] = NO_HEADERS) -> None:
    await respond(send, status, encode(message), JSON + headers)


async def error(send: Send, status: int, code: int, message: str, extra: list[Any] | None = None) -> None:
    """A JSON-RPC error body with no id (it answers the HTTP request, not a JSON-RPC one)."""
    await respond_json(send, status, {"jsonrpc": "2.0", "error": {"code": code, "message": message}}, extra or [])


def event(event_id: str, message: Any) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    return b"id: %s\nevent: message\ndata: %s\n\n" % (event_id.encode(), encode(message))


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
