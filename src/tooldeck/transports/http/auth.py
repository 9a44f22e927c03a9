"""Authentication: an ASGI layer that turns each request into a principal, through a backend.

``AuthenticationBackend.authenticate(scope)`` returns the principal (who is asking) or None (anonymous) — or an
awaitable of either, when it has to look further (an ``async def`` is fine) — or raises ``HttpError`` (401 with a ``WWW-Authenticate`` header, say) to refuse the request before it reaches the protocol.
The principal is put in ``scope["tooldeck.principal"]``, where the MCP endpoint reads it: a session is bound to the
principal that opened it, and tasks to the principal that created them. Without a backend there is no such layer,
and everyone is anonymous.
"""

from __future__ import annotations

from typing import Any, Protocol

from ...protocol.errors import HttpError
from .responses import App, Receive, Scope, Send, error

PRINCIPAL = "tooldeck.principal"


class AuthenticationBackend(Protocol):
    def authenticate(self, scope: Scope) -> Any:
        """The principal of this request (or an awaitable of it), None for anonymous, or raise ``HttpError`` to
        refuse it."""
        ...


class AuthenticationLayer:
    """``on_refused(scope, refusal)``, if given, hears of every request the backend refused (the audit trail); what it
    returns to await (the record being written) is awaited before the refusal is answered."""

    def __init__(self, app: App, backend: AuthenticationBackend, on_refused: Any = None) -> None:
        self.app = app
        self.backend = backend
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                principal = self.backend.authenticate(scope)
                if hasattr(principal, "__await__"):
                    principal = await principal
                scope[PRINCIPAL] = principal
            except HttpError as refusal:
                if self.on_refused is not None:
                    await settled(self.on_refused(scope, refusal))
                await error(send, refusal.status, refusal.code, refusal.message, refusal.headers)
                return
        await self.app(scope, receive, send)


async def settled(outcome: Any) -> None:
    """Await what a refusal's auditor returned, if anything: the refusal stands whether or not it was recorded."""
    if outcome is not None and hasattr(outcome, "__await__"):
        try:
            await outcome
        except Exception:  # the trail could not take it (the sink logged why): the request is refused all the same
            pass
