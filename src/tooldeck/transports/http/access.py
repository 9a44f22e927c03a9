"""The access log: one line per HTTP request once it is answered (``tooldeck serve --http --access-log``;
``HttpApp(access_log=True)``), on the ``tooldeck.access`` logger at INFO — method, path, status, duration, the
principal (the authenticated identity's id) and the client's address. A request that streams (SSE) is logged when
its stream ends; one whose client went away before an answer has the status 0. Health probes are left out.

In text logs a line reads ``POST /mcp 200 1.9 ms principal=token:ci client=127.0.0.1``; in JSON logs
(``--log-format json``) each of these is a key of its own.
"""

from __future__ import annotations

import logging
import time

from .auth import PRINCIPAL
from .responses import App, Message, Receive, Scope, Send

log = logging.getLogger("tooldeck.access")


class AccessLog:
    """Logs each HTTP request ``inner`` answers (see the module docstring)."""

    def __init__(self, inner: App) -> None:
        self.inner = inner
        if log.getEffectiveLevel() > logging.INFO:  # asked for: shown whatever the level of the rest of the log
            log.setLevel(logging.INFO)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.inner(scope, receive, sending)
        finally:
            principal = scope.get(PRINCIPAL)
            who = None if principal is None else getattr(principal, "id", None) or str(principal)
            client = scope.get("client")
            address = client[0] if client else None
            ms = (time.monotonic() - started) * 1000
            log.info("%s %s %d %.1f ms principal=%s client=%s", scope["method"], scope["path"], status, ms,
                     who or "-", address or "-",
                     extra={"method": scope["method"], "path": scope["path"], "status": status,
                            "duration_ms": round(ms, 3), "principal": who, "client": address})  # fmt: skip
