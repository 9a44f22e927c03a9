"""The console as an ASGI layer: who gets in, what protects each page and action, and where each path goes.

Who gets in:

- With a policy that authenticates, a person signs in on ``/console/login`` with their token (checked by the HTTP
  app's own authentication backend, as a bearer token would be) and must hold the operator scope (``operator``
  unless told; a role may grant it). A script may send the bearer token itself on each request instead.
- With no authentication at all, the console is open to loopback clients only (a local operator), and refused to
  everyone else.
- Anyone else gets 403 on every console path: a token without the operator scope, a client from elsewhere.

What protects it: a session cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure`` under TLS, path ``/console``)
naming a session (a seat, seats.py: kept in this process, or in Redis for a whole fleet; idle 30 minutes at most,
12 hours in all); a CSRF token in every form,
checked on every action; a strict Content-Security-Policy (scripts and styles from this origin only, no inline
script or style, no framing); ``no-store``; the HTTP app's Host/Origin guard in front. Every action is written to
the audit trail (``event: "console"``), with who did it, to what, and how it ended.

Routes (``pages.py`` renders them): ``/console`` (overview), ``/console/tools`` and ``/console/tools/<name>``
(history, diff, rollback), ``/console/sessions`` (end one), ``/console/calls`` and ``/console/calls/<trail>/<seq>``
(the audit trail, verify now), ``/console/approvals`` (approve or deny). A GET with ``?part=main`` answers the
page's main element alone: the console's script refreshes pages with it.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote

from ..engine.errors import BackendUnavailableError
from ..transports.http.forms import read_form
from ..transports.http.responses import App, Receive, Scope, Send, respond
from . import pages
from .seats import LIFETIME, MemorySeats, RedisSeats, Seat, Seats

log = logging.getLogger("tooldeck.console")

COOKIE = "tooldeck_console"
MAX_FORM = 16 * 1024  # bytes an action's form may take
STATIC = {"console.css": b"text/css; charset=utf-8", "console.js": b"text/javascript; charset=utf-8"}
CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")  # fmt: skip
_HEADERS = [
    (b"content-security-policy", CSP),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make a browser send "Origin: null" with a form
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
]
_HTML = [(b"content-type", b"text/html; charset=utf-8"), *_HEADERS]


class Console:
    """The operator console of ``deck`` at ``path``, for principals holding ``operator_scope``. The HTTP app puts it
    in front of its authentication (``layer``) each time it builds its layers, so one console keeps its sessions
    across policy reloads."""

    def __init__(self, deck: Any, *, path: str = "/console", operator_scope: str = "operator") -> None:
        self.deck = deck
        self.path = "/" + path.strip("/")
        self.scope = operator_scope
        self.auth: Any = None  # the HTTP app's authentication backend (None: nobody authenticates)
        self.app: Any = None  # the HttpApp: its sessions
        self._seats: Seats | None = None  # made at first use: where the deck's backends are then known
        self.verified_at: str | None = None  # when "verify now" last ran (its verdicts: the trail's own)
        self._trail: Any = None
        self._trail_file: str | None = None
        self._heard_on: Any = None  # the bus this console hears the fleet's policy reloads on

    def layer(self, inner: App, auth: Any, app: Any) -> App:
        """An ASGI app serving the console's paths and passing every other request to ``inner``."""
        self.auth, self.app = auth, app
        bus = self.deck.bus
        if self.deck.backends.shared and self._heard_on is not bus:  # a reload asked for on another process's console
            bus.subscribe(pages.RELOAD_TOPIC, self._reload_heard)
            self._heard_on = bus
        prefix = self.path

        async def console_or_inner(scope: Scope, receive: Receive, send: Send) -> None:
            path = scope["path"]
            if path == prefix or path.startswith(prefix + "/"):
                await self.serve(scope, receive, send)
            else:
                await inner(scope, receive, send)

        return console_or_inner

    @property
    def seats(self) -> Seats:
        """Who is signed in (seats.py): in Redis when the deck's backends are shared through it, else here."""
        if self._seats is None:
            backends = self.deck.backends
            engine = backends.engine if backends.shared else None
            self._seats = RedisSeats(engine) if engine is not None else MemorySeats()
        return self._seats

    def _reload_heard(self, payload: Any) -> None:
        """Another process's console reloaded the policy: reload this process's copy of the file too."""
        if type(payload) is not dict or payload.get("from") == self.deck.node_id:
            return  # this process's own reload, done already
        from ..security.policy import PolicyError

        try:
            source = self.deck.reload_policy()
        except PolicyError as exc:
            log.error("the policy reload asked for by process %s failed here; the policy before serves on: %s",
                      payload.get("from"), exc)  # fmt: skip
        else:
            log.info("reloaded the policy %s, as process %s asked", source, payload.get("from"))

    # --- the data the pages show -----------------------------------------------------------------------------------

    def trail(self) -> Any:
        """The audit trail as the pages read it (trail.py), or None when the policy keeps none in a file."""
        policy = getattr(self.deck, "policy", None)
        file = (policy.audit.get("file") if policy is not None else None) or None
        if file in (None, "-"):
            return None
        if self._trail is None or self._trail_file != file:
            from .trail import Trail

            self._trail, self._trail_file = Trail(file), file
        self._trail.refresh()
        return self._trail

    # --- requests ---------------------------------------------------------------------------------------------------

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        rest = scope["path"][len(self.path) :].rstrip("/") or "/"
        method = scope["method"]
        if rest.startswith("/static/"):
            await self._static(send, rest.removeprefix("/static/"))
            return
        if rest == "/login":
            await self._login(scope, receive, send)
            return
        try:
            seat, refusal = await self._seat(scope)
        except BackendUnavailableError as exc:  # the fleet's seats are out of reach
            await self.page(send, 503, "Unavailable", pages.message(f"The console's sign-ins are kept in the shared "
                            f"backend, which is out of reach: {exc}. Try again shortly."), None,
                            [(b"retry-after", b"5")])  # fmt: skip
            return
        if refusal is not None:
            status, message = refusal
            await self.page(send, status, "Not allowed", pages.message(message), seat=None)
            return
        if seat is None:  # nobody signed in: a page leads to the sign-in form; an action is refused
            if method == "GET":
                await respond(send, 303, b"", [(b"location", f"{self.path}/login".encode()), *_HEADERS])
            else:
                await self.page(send, 403, "Not allowed", pages.message("Sign in first."), seat=None)
            return
        if method == "POST":
            await self._act(scope, receive, send, seat, rest)
        elif method == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), max_num_fields=32)
            found = pages.route(self, rest, {key: values[-1] for key, values in query.items()}, seat)
            if found is None:
                await self.page(send, 404, "Not found", pages.message("There is no such console page."), seat)
                return
            title, body, status = await found
            if query.get("part") == ["main"]:
                await respond(send, status, body.encode(), _HTML)
            else:
                await self.page(send, status, title, body, seat, scope=scope)
        else:
            await self.page(send, 405, "Method not allowed", pages.message("GET a page, POST its forms."), seat,
                            [(b"allow", b"GET, POST")])  # fmt: skip

    async def page(self, send: Send, status: int, title: str, body: str, seat: Seat | None,
                   extra: list[Any] | None = None, scope: Scope | None = None) -> None:  # fmt: skip
        text = pages.layout(self, title, body, seat)
        headers = [*_HTML, *(extra or ())]
        if seat is not None and seat.new and scope is not None:  # the local operator's first page: its session
            headers.append(self.cookie_for(scope, seat))
            seat.new = False
        await respond(send, status, text.encode(), headers)

    async def _static(self, send: Send, name: str) -> None:
        kind = STATIC.get(name)
        if kind is None:
            await respond(send, 404, b"not found", [(b"content-type", b"text/plain"), *_HEADERS])
            return
        data = resources.files(__package__).joinpath("static", name).read_bytes()
        await respond(send, 200, data, [(b"content-type", kind), *_HEADERS[:-1], (b"cache-control", b"max-age=300")])

    # --- who is asking ----------------------------------------------------------------------------------------------

    async def _seat(self, scope: Scope) -> tuple[Seat | None, tuple[int, str] | None]:
        """The console session of the request, or None (not signed in); or a refusal (status, why)."""
        headers = dict(scope.get("headers", ()))
        if self.auth is None:
            if not _loopback(scope):
                return None, (403, "With no authentication configured, the console is open to this machine only.")
            seat = await self._cookie_seat(headers)
            return seat or await self.seats.open(None), None
        if b"authorization" in headers:  # a script with its bearer token: no cookie, so no CSRF to fear
            principal = await self._authenticate(scope, headers[b"authorization"])
            if principal is None:
                return None, (401, "These credentials are not valid.")
            if not self.is_operator(principal):
                return None, (403, f"The console needs the {self.scope!r} scope.")
            seat = Seat(principal)
            seat.csrf, seat.new = "", False  # a bearer request needs no CSRF token (no cookie) and gets no cookie
            return seat, None
        seat = await self._cookie_seat(headers)
        if seat is not None and not self.is_operator(seat.principal):  # a reloaded policy took the scope away
            await self.seats.end(seat.id)
            return None, (403, f"The console needs the {self.scope!r} scope.")
        return seat, None

    def is_operator(self, principal: Any) -> bool:
        access = getattr(self.deck, "access", None)
        scopes = access.scopes_of(principal) if access is not None else frozenset(getattr(principal, "scopes", ()))
        return self.scope in scopes

    async def _cookie_seat(self, headers: dict[bytes, bytes]) -> Seat | None:
        value = _cookie(headers.get(b"cookie", b""), COOKIE)
        return await self.seats.get(value) if value else None

    async def _authenticate(self, scope: Scope, authorization: bytes) -> Any:
        probe = {key: scope[key] for key in ("type", "method", "path", "client", "scheme") if key in scope}
        probe["headers"] = [(b"authorization", authorization)]
        try:
            principal = self.auth.authenticate(probe)
            if hasattr(principal, "__await__"):
                principal = await principal
        except Exception:  # refused (HttpError)
            return None
        return principal

    def cookie_for(self, scope: Scope, seat: Seat) -> tuple[bytes, bytes]:
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        value = f"{COOKIE}={seat.id}; Path={self.path}; HttpOnly; SameSite=Strict; Max-Age={int(LIFETIME)}{secure}"
        return b"set-cookie", value.encode()

    async def _login(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.auth is None:  # nothing to sign in with: the loopback rule decides
            location = self.path.encode()
            await respond(send, 303, b"", [(b"location", location), *_HEADERS])
            return
        if scope["method"] != "POST":
            await self.page(send, 200, "Sign in", pages.login(self), None)
            return
        form = await read_form(receive, MAX_FORM, 32)
        token = (form or {}).get("token", "")
        principal = None
        if token and not any(c in token for c in "\r\n"):
            principal = await self._authenticate(scope, f"Bearer {token}".encode("latin-1", "replace"))
        if principal is None:
            await self.page(send, 401, "Sign in", pages.message("These credentials are not valid.") + pages.login(self),
                            None)  # fmt: skip
            return
        if not self.is_operator(principal):
            await self.audit(principal, "sign-in", None, "refused", f"no {self.scope!r} scope")
            await self.page(send, 403, "Not allowed", pages.message(f"The console needs the {self.scope!r} scope."),
                            None)  # fmt: skip
            return
        seat = await self.seats.open(principal)
        seat.new = False
        await self.audit(principal, "sign-in", None, "ok")
        await respond(send, 303, b"", [(b"location", self.path.encode()), self.cookie_for(scope, seat), *_HEADERS])

    # --- actions ----------------------------------------------------------------------------------------------------

    async def _act(self, scope: Scope, receive: Receive, send: Send, seat: Seat, rest: str) -> None:
        form = await read_form(receive, MAX_FORM, 32)
        if form is None:
            await self.page(send, 413, "Too large", pages.message("The form is too large."), seat)
            return
        if seat.csrf and not hmac.compare_digest(form.get("csrf", ""), seat.csrf):
            await self.audit(seat.principal, "refused-form", rest, "refused", "missing or wrong CSRF token")
            await self.page(send, 403, "Not allowed", pages.message("This form is not the console's own: reload "
                            "the page and try again."), seat)  # fmt: skip
            return
        if rest == "/logout":
            await self.seats.end(seat.id)
            await self.audit(seat.principal, "sign-out", None, "ok")
            cookie = (b"set-cookie", f"{COOKIE}=; Path={self.path}; HttpOnly; SameSite=Strict; Max-Age=0".encode())
            await respond(send, 303, b"", [(b"location", f"{self.path}/login".encode()), cookie, *_HEADERS])
            return
        action = pages.action(self, rest)
        if action is None:
            await self.page(send, 404, "Not found", pages.message("There is no such console action."), seat)
            return
        name, target, run = action
        try:
            problem, back = await run(seat, form)
        except Exception as exc:  # a rollback with nothing to go back to, say: the operator reads why
            problem, back = str(exc) or type(exc).__name__, None
        await self.audit(seat.principal, name, target, "refused" if problem else "ok", problem or form.get("reason"))
        if problem:
            await self.page(send, 409, "Not done", pages.message(problem), seat)
            return
        location = back or rest.rsplit("/", 2)[0] or "/"
        await respond(send, 303, b"", [(b"location", (self.path + location).encode()), *_HEADERS])

    async def audit(self, principal: Any, action: str, target: str | None, outcome: str,
                    detail: str | None = None) -> None:  # fmt: skip
        """One audit record of a console action (``event: "console"``), where the deck keeps its trail."""
        installed = getattr(self.deck, "_security", None)
        sink = getattr(installed, "sink", None)
        if sink is None:
            return
        from ..security.audit_chain import format_time

        record = {"time": format_time(time.time()), "event": "console", "action": action, "target": target,
                  "principal": None if principal is None else getattr(principal, "subject", str(principal)),
                  "auth": getattr(principal, "method", "local"), "outcome": outcome, "detail": detail}  # fmt: skip
        try:
            written = sink.write(record)
            if written is not None:
                await written
        except Exception as exc:  # the trail's own failure is logged where it happens; say which action it was
            log.warning("the console's %s of %s could not be audited: %s", action, target, exc)


def _cookie(header: bytes, name: str) -> str | None:
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


def link(console: Console, *parts: str) -> str:
    """The console's path for ``parts`` (each quoted)."""
    return console.path + "".join("/" + quote(part, safe="") for part in parts)
