"""The Streamable HTTP transport as a plain ASGI application, assembled from small layers:

    HostOriginGuard (guard.py)  ->  AuthenticationLayer (auth.py)  ->  Routes (routes.py)  ->  Endpoint (exchange.py)
    403 for foreign Host/Origin     the request's principal            the MCP path (404      POST / GET / DELETE,
                                                                        elsewhere)             SSE via sse.py

Sessions live in a ``SessionRegistry`` (sessions.py) over the deck's ``SessionStore``; SSE events wait in its
``EventStore`` for clients that resume (both seams of the deck's backends, server/backends.py). ``HttpApp`` wires
them together and answers the ASGI lifespan.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ...engine.errors import BackendUnavailableError
from ...protocol.errors import INVALID_REQUEST
from ...server.core import Server
from ...server.events import EventStore
from .auth import AuthenticationBackend, AuthenticationLayer
from .channels import MAX_BACKLOG, HttpSession
from .exchange import Endpoint
from .forwarded import TrustedProxies
from .guard import LOOPBACK, HostOriginGuard
from .health import Probes
from .responses import App, Receive, Scope, Send, error
from .routes import Routes
from .sessions import SessionRegistry
from .sse import SseWriter

__all__ = ["LOOPBACK", "HttpApp"]

log = logging.getLogger("tooldeck.http")


class HttpApp:
    """``deck.http_app()``: mount it anywhere ASGI apps go, or let ``tooldeck serve --http`` run it under uvicorn.

    ``allowed_hosts`` / ``allowed_origins``: host names (or full origins) accepted besides the loopback names;
    ``"*"`` accepts any. ``stateless``: no sessions; every POST is answered on its own. ``session_idle_timeout``:
    seconds without traffic after which a session is closed (with shared backends: without traffic on any process).
    ``max_sessions``: live sessions at most in this process (503 past it; per process, also when the backends are
    shared, since it bounds this process's memory).
    ``auth``: the authentication backend (default: everyone is anonymous). Session state and SSE events are kept
    in the deck's backends (``Deck(backends=...)``, server/backends.py: in memory by default). ``routes``: more ASGI apps by path (``/.well-known/...``). ``body_timeout``:
    seconds a POST body may take to arrive whole (408 past it). ``max_backlog``: messages each SSE stream keeps
    waiting for a client that reads slower than the server sends; past it the oldest notifications are dropped
    (channels.py). ``trusted_proxies``: addresses or networks of the proxies whose ``X-Forwarded-For`` names the
    client an anonymous caller's rate limits are keyed by (forwarded.py); none by default. ``healthz_path`` /
    ``readyz_path``: the health probes (health.py; None turns one off). ``access_log``: a log line per request
    (access.py). ``metrics_path``: where a deck's metrics (``deck.use_metrics()``) are served, to principals with
    ``operator_scope`` (to loopback clients when nobody authenticates; metrics_route.py).
    """

    def __init__(
        self,
        deck: Server,
        *,
        path: str = "/mcp",
        json_response: bool = False,
        stateless: bool = False,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        max_body_bytes: int | None = None,
        body_timeout: float = 30.0,
        auth: AuthenticationBackend | None = None,
        routes: dict[str, App] | None = None,
        retry_ms: int = 1000,
        keepalive: float = 25.0,
        max_backlog: int = MAX_BACKLOG,
        trusted_proxies: Iterable[str] = (),
        healthz_path: str | None = "/healthz",
        readyz_path: str | None = "/readyz",
        access_log: bool = False,
        metrics_path: str = "/metrics",
        operator_scope: str = "operator",
    ) -> None:
        self.deck = deck
        self.path = path
        self.stateless = stateless
        backends = deck.backends
        self.events: EventStore = backends.events
        self.registry = SessionRegistry(deck, self.events, store=backends.sessions, max_sessions=max_sessions,
                                        idle_timeout=session_idle_timeout, backlog=max_backlog,
                                        shared=backends.shared)  # fmt: skip
        self.sse = SseWriter(self.events, self.registry, retry_ms=retry_ms, keepalive=keepalive)
        if backends.shared:  # a stream resumed through another process than the one feeding it is relayed
            from .relay import StreamRelay

            self.sse.relay = StreamRelay(self.registry, self.sse, deck.nodes)
        limit = max_body_bytes if max_body_bytes is not None else deck.options.max_message_bytes
        self.endpoint = Endpoint(self.registry, self.sse, json_response=json_response, stateless=stateless,
                                 max_body_bytes=limit, body_timeout=body_timeout,
                                 trusted_proxies=TrustedProxies(trusted_proxies) or None)  # fmt: skip
        self._given = (auth, dict(routes or {}), path, metrics_path, operator_scope, list(allowed_hosts),
                       list(allowed_origins), access_log)  # fmt: skip
        self._layers()
        self.probes = Probes(self, healthz=healthz_path, readyz=readyz_path)
        for probe in self.probes.paths:
            if probe in self.routes.routes:
                raise ValueError(f"{probe} is both a health probe and a route of the app: give the probe another path")
        metrics = getattr(deck, "metrics", None)
        if metrics is not None:
            metrics.count_sessions(lambda: len(self.registry.live))
        on_reload = getattr(deck, "on_policy_reload", None)
        if on_reload is not None:
            on_reload(self._layers)  # a reloaded policy's authentication, routes and request limit, from then on

    def _layers(self) -> None:
        """The layers in front of the endpoint, from what the app was given and what the deck's policy names now."""
        deck = self.deck
        auth, routes, path, metrics_path, operator_scope, allowed_hosts, allowed_origins, access_log = self._given
        if auth is None:  # the deck's policy may name one (and its RFC 9728 metadata route)
            auth = getattr(deck, "http_auth", None)
        routes = {**getattr(deck, "http_routes", {}), **routes}
        metrics = getattr(deck, "metrics", None)
        if metrics is not None:  # deck.use_metrics(): served here, to operators
            from .metrics_route import MetricsRoute

            routes.setdefault(metrics_path, MetricsRoute(metrics, operator_scope, authenticated=auth is not None))
        self.routes = Routes({path: self.endpoint, **routes}, endpoint=path)
        request_limit = getattr(deck, "http_request_limit", None)  # a policy's [limits] http_requests
        refusals = _refusals(deck) if auth is not None else None

        def checked(app: App) -> App:
            """``app`` behind the layers every path has: the request limit, then authentication."""
            if request_limit is not None:
                from .flood import RequestLimitLayer

                app = RequestLimitLayer(app, request_limit)
            if auth is not None:  # no backend: everyone is anonymous
                app = AuthenticationLayer(app, auth, refusals)
            return app

        inner = checked(self.routes)
        # The endpoint's own path, with only those layers in front of it, skips the guard's and the routes' layers:
        # ``__call__`` checks the guard and hands the request to ``_bare_app``, the same layers before the endpoint.
        bare = self.routes.routes.get(path.rstrip("/") or "/") is self.endpoint
        policy = getattr(deck, "policy", None)
        if policy is not None and policy.levels.get("approval") == "url":  # level 8-10 calls approved in a browser
            from .approve import ApprovalPages

            inner, bare = ApprovalPages(inner, deck, auth), False
        console = getattr(deck, "console", None)
        if console is not None:  # Deck.use_console(): its pages sign people in themselves, before the MCP auth
            inner, bare = console.layer(inner, auth, self), False
        self.guard = HostOriginGuard(inner, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
        self._bare = path if bare else None
        self._bare_app = checked(self.endpoint) if bare else self.endpoint
        self.access: App | None = None
        if access_log:
            from .access import AccessLog

            self.access = AccessLog(self.guard)

    @property
    def sessions(self) -> dict[str, HttpSession]:
        """The live sessions by id."""
        return self.registry.live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if path in self.probes.paths:  # before the guard: unauthenticated, unaudited, unlimited
                await self.probes(scope, send)
            elif self.access is not None:
                await self.access(scope, receive, send)
            elif path == self._bare:  # the endpoint's own path: the guard's check inline (see _layers)
                verdict = self.guard.verdict(scope)
                if verdict is None:
                    await self._bare_app(scope, receive, send)
                else:
                    await error(send, 403, INVALID_REQUEST, verdict)
            else:
                await self.guard(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def close_session(self, http_session: HttpSession) -> None:
        await self.registry.close(http_session)

    async def reap(self) -> int:
        """Close sessions idle for longer than the timeout (never one with an open connection)."""
        return await self.registry.reap()

    def begin_shutdown(self) -> None:
        """Stop taking new sessions and end GET streams and listen streams (each gets its result); POSTs in flight are
        left to finish (graceful drain)."""
        self.registry.begin_shutdown()
        self.deck.listeners.end_all()

    def hand_over(self) -> None:
        """The first step of stopping a process of a fleet: end GET streams and listen streams (their clients open
        them again elsewhere) while every request still reaching this process is served as ever."""
        self.registry.end_streams()
        self.deck.listeners.end_all()

    async def aclose(self) -> None:
        """Close every session (cancelling its work) and stop the reaper."""
        await self.registry.aclose()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message: Any = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.deck.open_backends()
                except Exception as exc:  # a shared backend out of reach, or a key only this process knows
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                self.deck.bind_loop()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self.aclose()
                except BackendUnavailableError as exc:  # what the store holds of these sessions stays there
                    log.warning("shutting down without the shared backend: %s", exc)
                await self.deck.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _refusals(deck: Any) -> Any:
    """What hears of a request the authentication backend refused: the audit trail, and the metrics' count."""
    auditor = getattr(deck, "http_refusal_auditor", None)
    metrics = getattr(deck, "metrics", None)
    if metrics is None:
        return auditor

    def refused(scope: Scope, refusal: Any) -> Any:
        metrics.refused(refusal, None)
        return None if auditor is None else auditor(scope, refusal)

    return refused
