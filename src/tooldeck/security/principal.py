"""The Principal: who is asking, as an authentication backend established it.

A request's principal is None when nobody authenticated (anonymous). Sessions, tasks, confirmations, request
states and rate-limit buckets are bound to ``principal.id``: the full identity (how the caller authenticated, the
issuer for a token from an authorization server, and the subject), never the bare subject, so a JWT whose ``sub`` is
``"ci"`` is not the API key named ``ci``. The policy reads ``scopes`` and ``roles``; per-call verification reads
``auth_time``; the HTTP layer refuses a token past ``expires_at``.
"""

from __future__ import annotations

from typing import Any

from ..protocol.record import Record


class Principal(Record):
    """An authenticated caller. ``method`` says how: "token" (a static API key), "jwt" (an OAuth access token),
    "local" (the user running a stdio server), or a backend's own word."""

    __slots__ = ("subject", "scopes", "roles", "method", "issuer", "auth_time", "expires_at", "claims", "id")

    def __init__(
        self,
        subject: str,
        *,
        scopes: frozenset[str] | set[str] | tuple[str, ...] | list[str] = frozenset(),
        roles: frozenset[str] | set[str] | tuple[str, ...] | list[str] = frozenset(),
        method: str = "token",
        issuer: str | None = None,
        auth_time: float | None = None,
        expires_at: float | None = None,
        claims: dict[str, Any] | None = None,
    ) -> None:
        self.subject = subject
        self.scopes = frozenset(scopes)
        self.roles = frozenset(roles)
        self.method = method
        self.issuer = issuer  # who vouches for the subject (a JWT's iss); None for an API key or the local user
        # The full identity, made once: "token:ci", "local:alice", "jwt:https://issuer.example#ci". An issuer has no
        # fragment (RFC 8414 §2), so the first "#" ends it and no subject can pass for another issuer's.
        self.id = f"{method}:{subject}" if issuer is None else f"{method}:{issuer}#{subject}"
        self.auth_time = auth_time  # seconds since the epoch when the user authenticated (a JWT's auth_time)
        self.expires_at = expires_at  # seconds since the epoch when the credential stops being valid
        self.claims = claims or {}

    def __str__(self) -> str:
        return self.subject


def local_principal(stdio: dict[str, Any] | None = None) -> Principal:
    """The user running a stdio (or in-process) server: the spec has stdio take its credentials from the
    environment. ``stdio`` is the policy's ``[authentication.stdio]`` table (subject, scopes, roles)."""
    import os

    stdio = stdio or {}
    subject = stdio.get("subject") or os.environ.get("USER") or os.environ.get("LOGNAME") or os.environ.get("USERNAME")
    if not subject:
        import getpass

        try:
            subject = getpass.getuser()
        except (KeyError, OSError):  # no user name to be found (a container without a passwd entry)
            subject = "local"
    return Principal(subject, scopes=stdio.get("scopes", ()), roles=stdio.get("roles", ()), method="local")


def principal_id(principal: Any) -> str | None:
    """Who a principal is, as a string: its ``id`` (the full identity of a ``Principal``; ``id`` or ``sub`` of a
    dict of claims), or itself; None for anonymous. Sessions and tasks are bound to this."""
    if principal is None:
        return None
    if isinstance(principal, dict):
        return str(principal.get("id", principal.get("sub", principal)))
    return str(getattr(principal, "id", principal))
