"""The approval page of a level 8-10 call (``[levels] approval = "url"``; security/approvals.py): ``GET
/approve/<id>`` shows the call, and a form; ``POST`` the same path with the form's fields decides it.

What holds:

- The person proves they are the caller: the form asks for the credentials (the bearer token) the call was made
  with, checked by the app's own authentication backend, and the decision counts only if they authenticate the
  caller's identity. The link alone approves nothing; three wrong tries deny the call.
- The form must come back with its own token (a cross-site POST has none), is single-use, and the page is served
  with a strict Content-Security-Policy (no script at all, forms to this origin only, no framing), ``no-store``,
  ``nosniff`` and a referrer for this origin only. What the call carries is escaped.
- An unknown, decided, withdrawn or expired id is a 404 that says nothing more.
- In a fleet (shared backends) the page is served by every process: the approval, its form token and the count of
  wrong tries are in the backends' store, and the decision goes to the process the call waits in
  (security/approvals.py); a decision that could not reach the call (decided first in another tab, its process gone)
  is a 409 that says so.

The page sits behind the app's Host/Origin guard, and before its MCP authentication (a browser brings no bearer
token; the form carries one).
"""

from __future__ import annotations

import hmac
import html
from typing import Any

import orjson

from ...security.approvals import Decision
from .forms import read_form
from .responses import App, Receive, Scope, Send, respond

PREFIX = "/approve/"
MAX_FORM = 16 * 1024  # bytes a decision's form may take
TRIES = 3  # wrong credentials before the call is denied
_HEADERS = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-security-policy",
     b"default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make a browser send "Origin: null" with a form
    (b"cache-control", b"no-store"),
]  # fmt: skip


class ApprovalPages:
    """Serves ``/approve/<id>`` (see the module docstring); passes everything else to ``inner``."""

    def __init__(self, inner: App, deck: Any, auth: Any) -> None:
        self.inner = inner
        self.deck = deck
        self.auth = auth  # the app's authentication backend: the form's credentials are checked with it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if not path.startswith(PREFIX):
            await self.inner(scope, receive, send)
            return
        approvals = self.deck.access.approvals
        approval = await approvals.find(path[len(PREFIX) :], "url")
        method = scope["method"]
        if approval is None:
            await _page(send, 404, "Not found", "<p>There is no call waiting for approval here.</p>")
        elif method == "GET":
            await _page(send, 200, "Approve this call?", _call_form(approval))
        elif method == "POST":
            await self._decide(scope, receive, send, approvals, approval)
        else:
            await _page(
                send, 405, "Method not allowed", "<p>GET the page, POST its form.</p>", [(b"allow", b"GET, POST")]
            )

    async def _decide(self, scope: Scope, receive: Receive, send: Send, approvals: Any, approval: Any) -> None:
        form = await read_form(receive, MAX_FORM, 8)
        if form is None:
            await _page(send, 413, "Too large", "<p>The form is too large.</p>")
            return
        decision = form.get("decision")
        if not hmac.compare_digest(form.get("form", ""), approval.form_token) or decision not in ("approve", "deny"):
            await _page(send, 400, "Not this form", "<p>Use the form on this page to decide.</p>")
            return
        if not await self._is_caller(scope, form.get("token", ""), approval.binding[0]):
            tries = await approvals.store.miss(approval.id)  # counted on every process the page is served by
            if tries >= TRIES:
                why = f"wrong credentials {TRIES} times"
                await approvals.decide(approval, Decision(False, approval.binding[0], why))
                await _page(send, 403, "Denied", f"<p>Wrong credentials {TRIES} times: the call is denied.</p>")
                return
            await _page(send, 403, "Not the caller", "<p>These credentials are not those the call was made with. "
                        "Try again.</p>" + _call_form(approval))  # fmt: skip
            return
        approved = decision == "approve"
        problem = await approvals.decide(approval, Decision(approved, approval.binding[0]))
        if problem is not None:
            await _page(send, 409, "Not decided", f"<p>{html.escape(problem[0].upper() + problem[1:])}.</p>")
            return
        word = "approved" if approved else "denied"
        await _page(send, 200, f"Call {word}", f"<p>The call is {word}. You can close this page.</p>")

    async def _is_caller(self, scope: Scope, token: str, principal_id: str) -> bool:
        """Whether ``token`` authenticates, through the app's backend, the identity the call was made by."""
        if self.auth is None or not token or any(c in token for c in "\r\n"):
            return False
        bearer = f"Bearer {token}".encode("latin-1", "replace")
        probe = {key: scope[key] for key in ("type", "method", "path", "client", "scheme") if key in scope}
        probe["headers"] = [
            *(h for h in scope.get("headers", ()) if h[0] != b"authorization"),
            (b"authorization", bearer),
        ]
        try:
            principal = self.auth.authenticate(probe)
            if hasattr(principal, "__await__"):
                principal = await principal
        except Exception:  # refused (HttpError): not the caller
            return False
        return principal is not None and hmac.compare_digest(str(getattr(principal, "id", "")), principal_id)


def _call_form(approval: Any) -> str:
    shown = approval.shown
    version = f"@{shown['version']}" if shown.get("version") else ""
    arguments = orjson.dumps(shown.get("arguments"), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    e = html.escape
    return (
        f"<dl><dt>Tool</dt><dd><code>{e(str(shown['tool']) + version)}</code></dd>"
        f"<dt>Security level</dt><dd>{e(str(shown['level']))}</dd>"
        f"<dt>Called by</dt><dd><code>{e(str(shown['principal']))}</code></dd></dl>"
        f"<h2>Arguments</h2><pre>{e(arguments)}</pre>"
        '<form method="post">'
        f'<input type="hidden" name="form" value="{e(approval.form_token)}">'
        "<p><label>Sign in with the credentials the call was made with (your token): "
        '<input type="password" name="token" autocomplete="off" required></label></p>'
        '<p><button type="submit" name="decision" value="approve">Approve</button> '
        '<button type="submit" name="decision" value="deny">Deny</button></p></form>'
    )


async def _page(send: Send, status: int, title: str, body: str, extra: list[Any] | None = None) -> None:
    text = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} — tooldeck</title>'
            f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>")  # fmt: skip
    await respond(send, status, text.encode(), [*_HEADERS, *(extra or ())])
