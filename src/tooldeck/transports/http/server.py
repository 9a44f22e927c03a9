"""Serving the HTTP app with uvicorn: bind, run, and drain gracefully on SIGTERM/SIGINT.

Imported only to serve HTTP (``deck.run(transport="http")``, ``tooldeck serve --http``), so uvicorn loads with it.
"""

from __future__ import annotations

import logging
import signal
from typing import TYPE_CHECKING, Any

import uvicorn

from .app import HttpApp
from .cork import corked_protocol
from .guard import LOOPBACK

if TYPE_CHECKING:
    from ...server.core import Server as Deck

log = logging.getLogger("tooldeck.http")
_WILDCARDS = ("0.0.0.0", "::", "")


def run_http(
    deck: Deck,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    graceful_timeout: int = 10,
    log_level: str = "warning",
    **app_options: Any,
) -> None:
    """Serve ``deck`` at ``http://host:port/mcp`` until SIGTERM/SIGINT.

    On shutdown new sessions are refused and GET streams end at once; POSTs in flight get up to
    ``graceful_timeout`` seconds to finish before their work is cancelled.
    """
    allowed_hosts = list(app_options.pop("allowed_hosts", ()))
    if host not in _WILDCARDS and host not in LOOPBACK and host not in allowed_hosts:
        allowed_hosts.append(host)  # the name we were told to bind is a name clients may use
    if host in _WILDCARDS and not allowed_hosts:
        log.warning(
            "bound to %r: only loopback Host headers are accepted; name the host names clients use with "
            "--allow-host (or '*' behind a proxy that checks them)",
            host,
        )
    app = HttpApp(deck, allowed_hosts=allowed_hosts, **app_options)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=corked_protocol() or "auto",  # one write per response (see cork.py)
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=graceful_timeout,
        access_log=False,
        server_header=False,
        proxy_headers=False,  # tooldeck reads no client address; the middleware would only cost time
    )
    # uvicorn re-raises the signal that stopped it once it has drained, with the handlers it found installed;
    # these turn that into a clean exit (status 0), as on stdio.
    previous = signal.signal(signal.SIGTERM, _ignore)
    try:
        _DrainingServer(config, app).run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ignore(signum: int, frame: Any) -> None:
    return None


class _DrainingServer(uvicorn.Server):
    """uvicorn's Server, telling the app to end its long-lived streams before uvicorn waits for connections."""

    def __init__(self, config: Any, app: HttpApp) -> None:
        super().__init__(config)
        self.mcp_app = app

    async def shutdown(self, sockets: Any = None) -> None:
        self.mcp_app.begin_shutdown()
        await super().shutdown(sockets=sockets)
