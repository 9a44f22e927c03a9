"""The Host/Origin guard: an ASGI layer that refuses requests from foreign origins and DNS-rebinding hosts.

A ``Host`` that is not a loopback name (nor an allowed host) gets 403: a browser tricked by DNS rebinding sends the
attacker's host name. An ``Origin`` that is present and neither loopback nor allowed gets 403. ``"*"`` allows any.
Verdicts are cached per (Host, Origin) pair: a client sends the same few values every time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...protocol.errors import INVALID_REQUEST
from .responses import App, Receive, Scope, Send, error, text

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
HEADERS = "tooldeck.headers"  # the request's headers as a dict, in the scope
_UNSEEN = object()


class HostOriginGuard:
    def __init__(self, app: App, *, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed_hosts = names(allowed_hosts)
        self.allowed_origins = names(allowed_origins)
        self._verdicts: dict[tuple[bytes | None, bytes | None], str | None] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            verdict = self.verdict(scope)
            if verdict is not None:
                await error(send, 403, INVALID_REQUEST, verdict)
                return
        await self.app(scope, receive, send)

    def verdict(self, scope: Scope) -> str | None:
        """None if the request's Host and Origin are allowed, else why not. Keeps the request's headers as a dict
        in the scope (ASGI header names are lower-case; values are decoded where they are read)."""
        headers = scope[HEADERS] = dict(scope["headers"])
        key = (headers.get(b"host"), headers.get(b"origin"))
        verdict: Any = self._verdicts.get(key, _UNSEEN)
        if verdict is _UNSEEN:
            verdict = self._judge(key)
        return verdict

    def _judge(self, key: tuple[bytes | None, bytes | None]) -> str | None:
        verdict = self.judge(text(key[0]), text(key[1]))
        if len(self._verdicts) < 256:  # a flood of distinct values is not cached
            self._verdicts[key] = verdict
        return verdict

    def judge(self, host: str | None, origin: str | None) -> str | None:
        """None if the pair is allowed, else why not."""
        if host is not None and "*" not in self.allowed_hosts:
            name = hostname(host)
            if name not in LOOPBACK and name not in self.allowed_hosts:
                return f"Forbidden: Host {host!r} is not allowed (DNS rebinding protection); " + _allow(
                    "--allow-host", "allowed_hosts", name
                )
        if origin is not None and not self._origin_allowed(origin):
            return f"Forbidden: Origin {origin!r} is not allowed; " + _allow(
                "--allow-origin", "allowed_origins", origin.lower().rstrip("/")
            )
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
        name = hostname(rest)
        return name in LOOPBACK or name in self.allowed_origins  # or its host name was


def _allow(flag: str, option: str, value: str) -> str:
    """How to allow ``value``, both ways a server is started: the guard cannot tell ``tooldeck serve --http`` from
    ``deck.run(transport="http")`` or a mounted ``deck.http_app()``, so the hint names the flag and the option."""
    return f"allow it with {flag} {value} (tooldeck serve) or {option}=[{value!r}] (deck.run, deck.http_app)"


def names(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(v.lower().rstrip("/") for v in values)


def hostname(host: str) -> str:
    host = host.lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.partition(":")[0]
