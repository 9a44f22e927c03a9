"""The metrics endpoint (``GET /metrics``, Prometheus text format) of a deck whose metrics are on: for operators only.

Behind the app's guard and authentication like the MCP endpoint: a principal with the operator scope (``operator``
unless ``HttpApp(operator_scope=...)`` names another) gets the scrape; one without it 403; nobody authenticated
401. A deck that authenticates nobody serves its metrics to loopback clients only (403 to the others).
"""

from __future__ import annotations

from typing import Any

from ...protocol.errors import INVALID_REQUEST
from .auth import PRINCIPAL
from .guard import LOOPBACK
from .responses import Receive, Scope, Send, error, respond

_LOOPBACK_ADDRESSES = frozenset((*LOOPBACK, "127.0.0.1", "::1"))


class MetricsRoute:
    def __init__(self, metrics: Any, operator_scope: str, *, authenticated: bool) -> None:
        self.metrics = metrics
        self.scope = operator_scope
        self.authenticated = authenticated

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await error(send, 405, INVALID_REQUEST, "Method not allowed: GET the metrics", [(b"allow", b"GET, HEAD")])
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await error(send, refusal[0], INVALID_REQUEST, refusal[1])
            return
        body, content_type = self.metrics.exposition()
        headers = [(b"content-type", content_type.encode()), (b"cache-control", b"no-store")]
        await respond(send, 200, b"" if scope["method"] == "HEAD" else body, headers)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why this request may not read the metrics (status, message); None when it may."""
        if not self.authenticated:
            client = scope.get("client")
            if client is None or client[0] not in _LOOPBACK_ADDRESSES:
                return 403, "Forbidden: with no authentication configured, metrics are served to loopback clients only"
            return None
        principal = scope.get(PRINCIPAL)
        if principal is None:
            return 401, "Unauthorized: the metrics need credentials with the operator scope"
        if self.scope not in (getattr(principal, "scopes", None) or ()):
            return 403, f"Forbidden: the metrics need the {self.scope!r} scope"
        return None
