"""A limit on HTTP requests per caller, as an ASGI layer behind authentication: a flood gets ``429 Too Many
Requests`` with ``Retry-After`` before its body is read, and nothing queues up.

The caller is the authenticated principal when there is one, else the client's address. The limiter is the
policy's (``[limits] http_requests``), any object with ``check(key) -> seconds`` (0 when admitted).
"""

from __future__ import annotations

from typing import Any

from ...protocol.errors import SERVER_ERROR
from ...security.limits import retry_after_header
from .auth import PRINCIPAL
from .responses import App, Receive, Scope, Send, error


class RequestLimitLayer:
    def __init__(self, app: App, guard: Any) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            principal = scope.get(PRINCIPAL)
            if principal is not None:
                key = f"principal:{getattr(principal, 'id', principal)}"
            else:
                client = scope.get("client")
                key = f"address:{client[0] if client else 'unknown'}"
            wait = self.guard.check(key)
            if wait > 0:
                seconds = retry_after_header(wait)
                await error(send, 429, SERVER_ERROR, f"Too Many Requests: retry in {seconds} s",
                            [(b"retry-after", seconds.encode())])  # fmt: skip
                return
        await self.app(scope, receive, send)
