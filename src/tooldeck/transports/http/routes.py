"""The route table: which ASGI app answers each path (the MCP endpoint; room for ``/.well-known/...`` routes)."""

from __future__ import annotations

from ...protocol.errors import INVALID_REQUEST
from .responses import App, Receive, Scope, Send, error


class Routes:
    """Exact paths (a trailing slash is tolerated) to apps; anything else is a 404 with a JSON-RPC body."""

    def __init__(self, routes: dict[str, App], *, endpoint: str) -> None:
        self.routes = {path.rstrip("/") or "/": app for path, app in routes.items()}
        self.endpoint = endpoint  # named in the 404 message

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        app = self.routes.get(path) or self.routes.get(path.rstrip("/") or "/")
        if app is None:
            await error(send, 404, INVALID_REQUEST, f"Not found: the MCP endpoint is {self.endpoint}")
            return
        await app(scope, receive, send)
