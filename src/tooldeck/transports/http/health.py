"""Health probes for load balancers and orchestrators: ``/healthz`` (the process answers) and ``/readyz`` (it can
serve: its backends are open and reachable, its tool definitions are loaded, and it is not draining).

The rule: a probe is answered before everything else of the app — the Host/Origin guard, authentication, the HTTP
flood guard, the audit trail — so a balancer that knows no token and sends any Host header gets its answer, and
probes every few seconds cost no audit record and no rate-limit token. In exchange a probe reveals nothing but one
word: ``ok``, ``ready`` or ``not ready`` (why not is in the process's log), with ``Cache-Control: no-store``.
Only GET and HEAD are answered (405 otherwise, with ``Allow``).

``/readyz`` is 503 while:

- the backends are not open yet (a process whose shared definitions are not yet read from the fleet's store);
- the process is draining: from SIGTERM on (a process of a fleet hands its clients over first), so a balancer stops
  sending it new connections;
- a shared backend does not answer a PING within ``PING_TIMEOUT`` seconds (one command on the engine's line; a
  process without shared backends has nothing to reach).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .responses import Scope, Send

log = logging.getLogger("tooldeck.http")
PING_TIMEOUT = 1.0  # seconds a shared backend has to answer a readiness probe's PING
_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store")]


class Probes:
    """The probe paths of an app (``None`` turns one off): ``HttpApp`` hands a request whose path is in ``paths``
    here, before its guard."""

    def __init__(self, app: Any, *, healthz: str | None, readyz: str | None) -> None:  # app: the HttpApp
        for name, path in (("healthz", healthz), ("readyz", readyz)):
            if path is not None and not path.startswith("/"):
                raise ValueError(f"the {name} path must start with '/', got {path!r}")
        if healthz is not None and healthz == readyz:
            raise ValueError(f"the healthz and readyz paths must differ, both are {healthz!r}")
        self.app = app
        self.paths = {path: probe for path, probe in ((healthz, self._alive), (readyz, self._ready)) if path}

    async def __call__(self, scope: Scope, send: Send) -> None:
        probe = self.paths[scope["path"]]
        method = scope["method"]
        if method != "GET" and method != "HEAD":
            await _answer(send, 405, b"method not allowed\n", method, [(b"allow", b"GET, HEAD")])
            return
        status, word = await probe()
        await _answer(send, status, word, method)

    async def _alive(self) -> tuple[int, bytes]:
        return 200, b"ok\n"

    async def _ready(self) -> tuple[int, bytes]:
        reason = await self.not_ready()
        if reason is not None:
            log.info("readiness probe answered 503: %s", reason)
            return 503, b"not ready\n"
        return 200, b"ready\n"

    async def not_ready(self) -> str | None:
        """Why this process should get no new traffic now; None when it is ready."""
        app = self.app
        registry = app.registry
        if registry.shutting_down or registry.streams_ending:
            return "the process is draining"
        backends = app.deck.backends
        if backends.shared and not backends.opened:  # its definitions are read from the fleet once open
            return "the backends are not open yet"
        engine = backends.engine
        if engine is not None:
            try:
                await asyncio.wait_for(engine.command("PING"), PING_TIMEOUT)
            except Exception as exc:  # unreachable, lost, or slower than the probe allows
                return f"the shared backend {engine.name} does not answer: {exc or type(exc).__name__}"
        return None


async def _answer(send: Send, status: int, body: bytes, method: str, extra: list[Any] | None = None) -> None:
    headers = [*_HEADERS, (b"content-length", b"%d" % len(body)), *(extra or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
