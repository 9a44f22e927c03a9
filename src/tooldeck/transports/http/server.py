"""Serving the HTTP app with uvicorn: bind, run, limit slow clients and open connections (connections.py), and
drain gracefully on SIGTERM/SIGINT.

Imported only to serve HTTP (``deck.run(transport="http")``, ``tooldeck serve --http``), so uvicorn loads with it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import uvicorn

from ...server import heap
from .app import HttpApp
from .connections import limited_protocol
from .cork import corked_protocol
from .guard import LOOPBACK

if TYPE_CHECKING:
    from ...server.core import Server as Deck

log = logging.getLogger("tooldeck.http")
_WILDCARDS = ("0.0.0.0", "::", "")


def run_http(deck: Deck, *, workers: int = 1, **options: Any) -> None:
    """Serve ``deck`` at ``http://host:port/mcp`` until SIGTERM/SIGINT; ``options`` are ``http_server``'s.

    On shutdown new sessions are refused and GET streams end at once; POSTs in flight get up to
    ``graceful_timeout`` seconds to finish before their work is cancelled. A request's headers must arrive within
    ``header_timeout`` seconds, and at most ``max_connections`` connections are open at once (see connections.py);
    a body must arrive within ``body_timeout`` seconds (an ``HttpApp`` option, like the rest of ``app_options``).
    ``workers``: that many processes on the one port (workers.py), for a deck with shared backends.
    """
    if workers > 1:
        from .workers import run_workers

        on_listening = options.pop("on_listening", None)

        def serve(worker_deck: Deck, sock: Any) -> None:
            server = http_server(worker_deck, **options)
            heap.settle()
            try:
                server.run(sockets=[sock])
            except KeyboardInterrupt:
                pass

        run_workers(deck, workers, serve, host=options.get("host", "127.0.0.1"), port=options.get("port", 8000),
                    endpoint_url=endpoint_url, on_listening=on_listening)  # fmt: skip
        return
    server = http_server(deck, **options)
    heap.settle()
    # uvicorn re-raises the signal that stopped it once it has drained, with the handlers it found installed;
    # these turn that into a clean exit (status 0), as on stdio.
    previous = signal.signal(signal.SIGTERM, _ignore)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def http_server(
    deck: Deck,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    graceful_timeout: int = 10,
    header_timeout: float = 10.0,
    max_connections: int = 1000,
    log_level: str = "warning",
    on_listening: Callable[[str, str | None], None] | None = None,
    **app_options: Any,
) -> _DrainingServer:
    """The uvicorn server ``run_http`` runs (``.run()``, or ``await .serve()`` in a loop of one's own); its app is
    ``server.mcp_app``. ``on_listening(url, bound)`` is called once the socket is bound, with the endpoint's URL
    (the real port when ``port`` is 0) and, for a wildcard address, the address (the URL then names loopback)."""
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
    base = corked_protocol() or _h11_protocol()  # one write per response (see cork.py); h11 without httptools
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=limited_protocol(base, header_timeout=header_timeout, max_connections=max_connections),
        ws="none",  # tooldeck serves no WebSocket; an upgraded connection would escape the limits above
        lifespan="on",
        log_level=log_level,
        timeout_graceful_shutdown=graceful_timeout,
        access_log=False,
        server_header=False,
        proxy_headers=False,  # tooldeck reads no client address; the middleware would only cost time
    )
    server = _DrainingServer(config, app, on_listening)
    tasks = server.server_state.tasks  # uvicorn's request tasks, those still to run included
    deck.busy = lambda: len(tasks) > 1
    return server


def endpoint_url(host: str, port: int) -> tuple[str, str | None]:
    """The MCP endpoint's URL for a server bound to ``host:port``, and the wildcard address it is bound to, if any
    (a client cannot connect to 0.0.0.0 or ::, so the URL names loopback then)."""
    bound = host if host in _WILDCARDS else None
    name = "[::1]" if host == "::" else "127.0.0.1" if bound is not None else f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}/mcp", bound


def _h11_protocol() -> type[Any]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


def _ignore(signum: int, frame: Any) -> None:
    return None


def _accept_pending(fd: int) -> list[socket.socket]:
    """Accept, without waiting, every connection waiting on the listening socket ``fd`` (through a duplicate of it)."""
    found: list[socket.socket] = []
    with socket.socket(fileno=os.dup(fd)) as listener:
        listener.setblocking(False)
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return found
            except OSError:  # the listener is gone, or a connection reset before it was taken: nothing more
                return found
            sock.setblocking(False)
            found.append(sock)


HAND_OVER = 2.0  # seconds a stopping process of a fleet keeps its open connections for one more request each


class _DrainingServer(uvicorn.Server):
    """uvicorn's Server, telling the app to end its long-lived streams before uvicorn waits for connections."""

    def __init__(self, config: Any, app: HttpApp, on_listening: Callable[[str, str | None], None] | None) -> None:
        super().__init__(config)
        self.mcp_app = app
        self.on_listening = on_listening
        self.url: str | None = None

    def _log_started_message(self, listeners: Sequence[Any]) -> None:
        # uvicorn's own line names the server root; the endpoint is /mcp, and with port 0 only the socket knows it.
        host = self.config.host
        self.url, bound = endpoint_url(host, listeners[0].getsockname()[1])
        log.info("serving at %s (press CTRL+C to quit)", self.url)
        if self.on_listening is not None:
            self.on_listening(self.url, bound)

    async def serve(self, sockets: Any = None) -> None:
        # The backends first, in this loop (a shared server's connections belong to the loop that made them): one
        # that cannot be reached ends the run with one line, before a socket is bound.
        try:
            await self.mcp_app.deck.open_backends()
        except Exception as exc:
            from ...protocol.errors import TargetError

            raise TargetError(str(exc)) from None
        import asyncio

        from ..signals import reload_on_hangup

        reload_on_hangup(asyncio.get_running_loop(), self.mcp_app.deck)  # SIGHUP: the policy file read again
        await super().serve(sockets=sockets)

    async def shutdown(self, sockets: Any = None) -> None:
        if self.mcp_app.deck.backends.shared:
            await self._hand_over()
        self.mcp_app.begin_shutdown()
        await super().shutdown(sockets=sockets)

    async def _hand_over(self) -> None:
        """Stopping one process of a fleet (a rolling restart): its clients go on with the others, losing nothing.
        No new connection is taken (a balancer, or a client, connects to another process); GET streams end (they
        are opened again elsewhere); every open connection carries at most one more request, served as ever and
        answered with ``Connection: close``, for up to ``HAND_OVER`` seconds. Only then does uvicorn close what is
        left idle: a connection closed while idle may cross a request the client had just sent, which it could not
        tell from one that was lost, and must not send again."""
        import asyncio

        loop = asyncio.get_running_loop()
        accepted: list[socket.socket] = []
        for server in self.servers:  # what the kernel accepted but we did not yet would be reset by the close
            for listener in server.sockets:
                accepted += _accept_pending(listener.fileno())
            server.close()
        config = self.config
        for sock in accepted:
            await loop.connect_accepted_socket(lambda: config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state), sock)  # fmt: skip
        self.mcp_app.hand_over()
        connections = self.server_state.connections
        for connection in list(connections):
            drain = getattr(connection, "drain", None)
            if drain is not None:
                drain()
        deadline = loop.time() + HAND_OVER
        while connections and loop.time() < deadline:
            await asyncio.sleep(0.02)  # no event says "the last connection closed": uvicorn keeps a plain set
