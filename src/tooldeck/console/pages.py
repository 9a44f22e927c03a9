"""The console's pages and actions, rendered on the server: plain HTML, every value escaped, no inline script or
style (the Content-Security-Policy forbids both), charts as SVG (charts.py). ``route`` finds a page for a GET,
``action`` an action for a POST (app.py checks who asks, and the CSRF token, first)."""

from __future__ import annotations

import asyncio
import difflib
import html
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from . import charts
from .seats import Seat

Console = Any  # app.py's Console (not imported: app.py imports this module)

Page = tuple[str, str, int]  # title, the main element's HTML, status
Action = tuple[str, str | None, Callable[[Any, dict[str, str]], Awaitable[tuple[str | None, str | None]]]]
NAV = (("", "Overview"), ("/tools", "Tools"), ("/sessions", "Sessions"), ("/calls", "Calls"),
       ("/approvals", "Approvals"))  # fmt: skip
e = html.escape
RELOAD_TOPIC = "console/reload-policy"  # what a console publishes for the fleet's other processes to reload


def layout(console: Console, title: str, body: str, seat: Seat | None) -> str:
    path = console.path
    nav = "".join(f'<a href="{e(path + href)}">{label}</a>' for href, label in NAV) if seat is not None else ""
    who = ""
    if seat is not None:
        who = (f'<form method="post" action="{e(path)}/logout" class="who">{e(seat.who)} '
               f'<input type="hidden" name="csrf" value="{e(seat.csrf)}"><button>Sign out</button></form>')  # fmt: skip
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{e(title)} — tooldeck console'
            f'</title><link rel="stylesheet" href="{e(path)}/static/console.css">'
            f'<script src="{e(path)}/static/console.js" defer></script></head><body><header><strong>tooldeck</strong>'
            f" {e(console.deck.name)}<nav>{nav}</nav>{who}</header><h1>{e(title)}</h1>{body}</body></html>")  # fmt: skip


def main(body: str, refresh_ms: int | None = None) -> str:
    """The page's main element; with ``refresh_ms`` the console's script reloads it that often (``?part=main``)."""
    refresh = f' data-refresh="{refresh_ms}"' if refresh_ms else ""
    return f'<main id="main"{refresh}>{body}</main>'


def message(text: str) -> str:
    return f'<p class="message">{e(text)}</p>'


def login(console: Console) -> str:
    return (f'<form method="post" action="{e(console.path)}/login" class="login"><label>Token '
            '<input type="password" name="token" autocomplete="off" required autofocus></label> '
            "<button>Sign in</button></form>")  # fmt: skip


def csrf(seat: Seat) -> str:
    return f'<input type="hidden" name="csrf" value="{e(seat.csrf)}">'


def route(console: Console, rest: str, query: dict[str, str], seat: Seat) -> Awaitable[Page] | None:
    parts = [part for part in rest.split("/") if part]
    if not parts:
        return overview(console, seat)
    head, tail = parts[0], parts[1:]
    if head == "tools" and len(tail) <= 1:
        return tool_page(console, tail[0], query, seat) if tail else tools_page(console)
    if head == "sessions" and not tail:
        return sessions_page(console, seat)
    if head == "calls" and not tail:
        return calls_page(console, query, seat)
    if head == "calls" and len(tail) == 2 and tail[1].isdigit():
        return record_page(console, tail[0], int(tail[1]))
    if head == "approvals" and not tail:
        return approvals_page(console, seat)
    return None


def action(console: Console, rest: str) -> Action | None:
    parts = [part for part in rest.split("/") if part]
    if len(parts) == 2 and parts[0] == "approvals":
        return "approval", parts[1], lambda seat, form: decide(console, parts[1], seat, form)
    if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "end":
        return "end-session", parts[1], lambda seat, form: end_session(console, parts[1])
    if len(parts) == 3 and parts[0] == "tools" and parts[2] == "rollback":
        return "rollback", parts[1], lambda seat, form: rollback(console, parts[1])
    if parts == ["calls", "verify"]:
        return "verify-trail", None, lambda seat, form: verify(console)
    if parts == ["policy", "reload"]:
        source = getattr(getattr(console.deck, "policy", None), "source", None)
        return "reload-policy", source, lambda seat, form: reload_policy(console)
    return None


# --- overview ---------------------------------------------------------------------------------------------------------


async def overview(console: Console, seat: Seat) -> Page:
    trail = console.trail()
    app = console.app
    deck = console.deck
    sessions = len(app.sessions) if app is not None else 0
    waiting = await _waiting(console)
    source = getattr(getattr(deck, "policy", None), "source", None)
    policy = "none (nobody authenticates)"
    if source:
        policy = (f'<code>{e(str(source))}</code> <form method="post" action="{e(console.path)}/policy/reload" '
                  f'class="inline">{csrf(seat)}<button>Reload the policy</button></form>')  # fmt: skip
    facts = (f"<dl class='facts'><dt>Sessions here</dt><dd>{sessions}</dd><dt>This process</dt>"
             f"<dd><code>{e(deck.node_id)}</code></dd><dt>Tools served</dt><dd>{len(deck.tools)}</dd>"
             f"<dt>Calls waiting for approval</dt><dd>{len(waiting)}</dd><dt>Policy</dt><dd>{policy}</dd></dl>")  # fmt: skip
    if trail is None:
        body = facts + message("Calls are read from the audit trail: give the policy an [audit] file to see them here.")
        return "Overview", main(body, 5000), 200
    seen = trail.overview()
    minutes = seen["per_minute"]
    rows = "".join(
        f"<tr><td><code>{e(name)}</code></td><td>{tool['calls']}</td><td>{tool['errors']}</td>"
        f"<td>{tool['refusals']}</td><td>{_ms(tool['p50_ms'])}</td><td>{_ms(tool['p99_ms'])}</td>"
        f"<td>{charts.spark(tool['per_minute'])}</td></tr>"
        for name, tool in sorted(seen["tools"].items())
    )
    refusals = "".join(f"<tr><td>{e(str(reason))}</td><td>{count}</td></tr>"
                       for reason, count in sorted(seen["refusals"].items(), key=lambda kv: -kv[1]))  # fmt: skip
    nodes = "".join(f"<tr><td><code>{e(node)}</code></td><td>{info['records']}</td><td>{e(str(info['last']))}</td></tr>"
                    for node, info in sorted(seen["trails"].items()))  # fmt: skip
    body = (
        facts
        + f"<h2>Calls per minute, last hour ({sum(minutes)} in all)</h2>{charts.bars(minutes)}"
        + "<h2>By tool</h2><table><tr><th>Tool</th><th>Calls</th><th>Errors</th><th>Refused</th><th>p50</th>"
        + f"<th>p99</th><th>Per minute</th></tr>{rows or _none(7)}</table>"
        + f"<h2>Refusals by reason</h2><table><tr><th>Reason</th><th>Calls</th></tr>{refusals or _none(2)}</table>"
        + "<h2>Processes (audit trails)</h2><table><tr><th>Trail</th><th>Records</th><th>Last</th></tr>"
        + f"{nodes or _none(3)}</table>"
    )
    return "Overview", main(body, 2000), 200


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} ms"


def _none(columns: int) -> str:
    return f'<tr><td colspan="{columns}">None yet.</td></tr>'


async def reload_policy(console: Console) -> tuple[str | None, str | None]:
    """Reload the policy file here (Deck.reload_policy, as SIGHUP does) and, with shared backends, in every other
    process of the fleet (app.py: each hears it on the bus and reloads its own copy of the file)."""
    from ..security.policy import PolicyError

    deck = console.deck
    try:
        deck.reload_policy()
    except PolicyError as exc:  # the old policy serves on: the operator reads why
        return str(exc), None
    if deck.backends.shared:
        deck.bus.publish(RELOAD_TOPIC, {"from": deck.node_id})
    return None, "/"


# --- tools --------------------------------------------------------------------------------------------------------


async def tools_page(console: Console) -> Page:
    deck = console.deck
    rows = []
    for tool in deck.tools:
        definition = _definition_of(deck, tool)
        scopes = " ".join(getattr(tool, "scopes", ()) or ()) or "—"
        level = getattr(tool, "security_level", None)
        rows.append(
            f'<tr><td><a href="{e(console.path)}/tools/{e(tool.name)}"><code>{e(tool.name)}</code></a></td>'
            f"<td>{e(getattr(tool, 'title', None) or '')}</td><td>{e(getattr(tool, 'version', None) or '—')}</td>"
            f"<td>{'—' if level is None else level}</td><td>{e(scopes)}</td>"
            f"<td><code>{e(_short(definition.digest) if definition else '—')}</code></td>"
            f"<td>{e((definition.source or '') if definition else 'Python')}</td></tr>"
        )
    body = ("<table><tr><th>Name</th><th>Title</th><th>Version</th><th>Level</th><th>Scopes</th><th>Digest</th>"
            f"<th>Source</th></tr>{''.join(rows) or _none(7)}</table>")  # fmt: skip
    return "Tools", main(body, 5000), 200


async def tool_page(console: Console, name: str, query: dict[str, str], seat: Seat) -> Page:
    deck = console.deck
    tool = deck.tools.get(name)
    if tool is None:
        return "Not found", main(message(f"No tool named {name!r} is served.")), 404
    definition = _definition_of(deck, tool)
    facts = (f"<dl class='facts'><dt>Version</dt><dd>{e(getattr(tool, 'version', None) or '—')}</dd>"
             f"<dt>Level</dt><dd>{getattr(tool, 'security_level', None)}</dd>"
             f"<dt>Description</dt><dd>{e(getattr(tool, 'description', None) or '')}</dd></dl>")  # fmt: skip
    if definition is None:
        return name, main(facts + message("A Python tool: its history is its code's.")), 200
    tool_id = definition.document["id"]
    manager = deck.manager
    history = manager.history(tool_id)
    link = f"{console.path}/tools/{name}?from="
    versions = "".join(f"<li><a href=\"{e(link + str(old.document.get('version')))}\"><code>"
                       f"{e(str(old.document.get('version')))}</code></a> <code>{e(_short(old.digest))}</code></li>"
                       for old in reversed(history))  # fmt: skip
    diff = ""
    if history:  # the changes from a version served before (?from=VERSION; the one before this, unless told)
        chosen = query.get("from")
        base = next((old for old in reversed(history) if str(old.document.get("version")) == chosen), history[-1])
        before = _pretty(base.document).splitlines()
        after = _pretty(definition.document).splitlines()
        lines = difflib.unified_diff(before, after, f"{tool_id}@{base.document.get('version')}",
                                     f"{tool_id}@{definition.document.get('version')}", lineterm="")  # fmt: skip
        diff = (f"<h2>Changes from {e(str(base.document.get('version')))}</h2><pre class='diff'>" + "\n".join(
            f'<span class="{_line_kind(line)}">{e(line)}</span>' for line in lines) + "</pre>")  # fmt: skip
        diff += (f'<form method="post" action="{e(console.path)}/tools/{e(name)}/rollback">{csrf(seat)}'
                 f"<button>Roll back to {e(str(history[-1].document.get('version')))}</button></form>")  # fmt: skip
    body = (facts + f"<p>Definition <code>{e(tool_id)}</code>, digest <code>{e(definition.digest)}</code>, from "
            f"<code>{e(definition.source or 'the tool manager')}</code></p><h2>Served before</h2>"
            f"<ul>{versions or '<li>Nothing: this is its first version.</li>'}</ul>{diff}")  # fmt: skip
    return name, main(body), 200


def _definition_of(deck: Any, tool: Any) -> Any:
    manager = getattr(deck, "_manager", None)
    if manager is None:
        return None
    for definition in manager.definitions():
        if tool.name in _names(definition):
            return definition
    return None


def _names(definition: Any) -> set[str]:
    document = definition.document
    names = {document.get("name"), document.get("id")}
    names.update(f"{document.get('id')}.{cap.get('name')}" for cap in document.get("capabilities", ()) or ()
                 if isinstance(cap, dict))  # fmt: skip
    names.update(cap.get("name") for cap in document.get("capabilities", ()) or () if isinstance(cap, dict))
    return {name for name in names if name}


def _pretty(document: Any) -> str:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def _line_kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "head"
    return {"+": "added", "-": "removed", "@": "hunk"}.get(line[:1], "same")


def _short(digest: str) -> str:
    return digest.split(":")[-1][:12]


async def rollback(console: Console, name: str) -> tuple[str | None, str | None]:
    deck = console.deck
    tool = deck.tools.get(name)
    definition = None if tool is None else _definition_of(deck, tool)
    if definition is None:
        return f"{name!r} is not a served tool definition: nothing to roll back", None
    await deck.manager.arollback(definition.document["id"])
    return None, f"/tools/{name}"


# --- sessions -----------------------------------------------------------------------------------------------------


SESSIONS_LISTED = 500  # sessions the page lists at most from a fleet's shared store


async def sessions_page(console: Console, seat: Seat) -> Page:
    """This process's sessions, and with shared backends every other process's too (from the store: who, which
    client, which revision; when each was last served, as the processes mark it)."""
    app = console.app
    now = time.monotonic()
    rows = []
    live = dict(app.sessions) if app is not None else {}
    for session_id, held in live.items():
        session = held.session
        principal = session.principal
        rows.append(_session_row(console, seat, session_id, getattr(principal, "id", principal), session.client_info,
                                 session.state.revision, _ago(now - held.created), _ago(now - held.last_active),
                                 "this one"))  # fmt: skip
    if app is not None and app.registry.shared:
        registry = app.registry
        stored = [(sid, state) for sid, state in await registry.store.sessions(SESSIONS_LISTED) if sid not in live]
        seen = await registry.store.last_seen([sid for sid, _ in stored])
        wall = time.time()
        for (session_id, state), at in zip(stored, seen, strict=True):
            rows.append(_session_row(console, seat, session_id, state.get("principal"), state.get("clientInfo"),
                                     state.get("revision"), "—", "—" if at is None else _ago(wall - at),
                                     "another"))  # fmt: skip
    body = ("<table><tr><th>Session</th><th>Principal</th><th>Client</th><th>Revision</th><th>Since</th>"
            f"<th>Last activity</th><th>Process</th><th></th></tr>{''.join(rows) or _none(8)}</table>")  # fmt: skip
    return "Sessions", main(body, 3000), 200


def _session_row(console: Console, seat: Seat, session_id: str, principal: Any, info: Any, revision: Any, since: str,
                 last: str, where: str) -> str:  # fmt: skip
    info = info if type(info) is dict else {}
    return (f"<tr><td><code>{e(session_id[:12])}…</code></td><td>{e(str(principal or 'anonymous'))}</td>"
            f"<td>{e(str(info.get('name', '?')))} {e(str(info.get('version', '')))}</td>"
            f"<td>{e(str(revision or '—'))}</td><td>{since}</td><td>{last}</td><td>{where}</td><td>"
            f'<form method="post" action="{e(console.path)}/sessions/{e(session_id)}/end">{csrf(seat)}'
            "<button>End</button></form></td></tr>")  # fmt: skip


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


async def end_session(console: Console, session_id: str) -> tuple[str | None, str | None]:
    app = console.app
    if app is None or not await app.registry.end(session_id):
        return "No such session.", None
    return None, "/sessions"


# --- calls --------------------------------------------------------------------------------------------------------

FILTERS = ("principal", "tool", "decision", "outcome", "since", "until")


async def calls_page(console: Console, query: dict[str, str], seat: Seat) -> Page:
    trail = console.trail()
    if trail is None:
        return (
            "Calls",
            main(message("The policy keeps no audit trail in a file ([audit] file): no calls to show.")),
            200,
        )
    chosen = {key: query[key] for key in FILTERS if query.get(key)}
    chosen_problem: str | None = None
    try:
        found = trail.records(**chosen, limit=200)
    except ValueError as exc:  # a time that is not one
        found, chosen_problem = [], str(exc)
    inputs = "".join(f'<label>{key} <input name="{key}" value="{e(chosen.get(key, ""))}"></label> ' for key in FILTERS)
    rows = "".join(
        f'<tr class="{e(str(record.get("decision", "")))}"><td>{e(str(record.get("time", "")))}</td>'
        f"<td>{e(str(record.get('event', '')))}</td><td><code>{e(str(record.get('tool') or record.get('action') or ''))}"
        f"</code></td><td>{e(str(record.get('principal') or 'anonymous'))}</td>"
        f"<td>{e(str(record.get('decision') or ''))}</td><td>{e(str(record.get('outcome') or ''))}</td>"
        f'<td>{_ms(record.get("duration_ms"))}</td><td><a href="{e(console.path)}/calls/{e(record["trail"])}/'
        f'{record.get("seq")}">#{record.get("seq")}</a></td></tr>'
        for record in found
    )
    verified = _verified(trail, console.verified_at)
    body = (
        f'<form method="get" class="filters">{inputs}<button>Filter</button></form>'
        + (message(chosen_problem) if chosen_problem else "")
        + f'<section class=\'chain\'>{verified}<form method="post" action="{e(console.path)}/calls/verify">'
        + f"{csrf(seat)}<button>Verify now</button></form></section>"
        + "<table><tr><th>Time</th><th>Event</th><th>Tool</th><th>Principal</th><th>Decision</th><th>Outcome</th>"
        + f"<th>Took</th><th>Record</th></tr>{rows or _none(8)}</table>"
    )
    return "Calls", main(body, 1000), 200


def _verified(trail: Any, at: str | None) -> str:
    """Each trail's head as read so far, and the verdicts of the last "verify now" (the trail keeps them)."""
    if trail.verified is None:
        heads = "".join(f"<li><code>{e(name)}</code>: record {seen['seq']}, head <code class='hash'>"
                        f"{e(seen['head'])}</code></li>" for name, seen in trail.status().items() if seen["head"])  # fmt: skip
        return f"<p>The chain has not been verified from the console yet.</p><ul>{heads}</ul>"
    lines = "".join(
        f"<li><code>{e(name)}</code>: {'intact' if report['ok'] else 'BROKEN: ' + e(str(report['problem']))}, "
        f"{report['records']} records, head <code class='hash'>{e(str(report.get('head')))}</code></li>"
        for name, report in sorted(trail.verified.items())
    )
    return f"<p>Verified at {e(at or '')}:</p><ul class='verified'>{lines}</ul>"


async def verify(console: Console) -> tuple[str | None, str | None]:
    trail = console.trail()
    if trail is None:
        return "The policy keeps no audit trail in a file: nothing to verify.", None
    await asyncio.to_thread(trail.verify_now)  # the trail keeps its verdicts (Trail.verified)
    from ..security.audit_chain import format_time

    console.verified_at = format_time(time.time())
    return None, "/calls"


async def record_page(console: Console, trail_name: str, seq: int) -> Page:
    trail = console.trail()
    record = None if trail is None else trail.record(trail_name, seq)
    if record is None:
        return "Not found", main(message("There is no such record in the audit trail.")), 404
    return f"Record {seq}", main(f"<pre>{e(_pretty(record))}</pre>"), 200


# --- approvals ----------------------------------------------------------------------------------------------------


async def _waiting(console: Console) -> list[Any]:
    """The calls waiting for an approver, in every process that shares the deck's backends."""
    access = getattr(console.deck, "access", None)
    return [] if access is None else await access.approvals.waiting("operator")


async def approvals_page(console: Console, seat: Seat) -> Page:
    now = time.time()
    items = []
    for approval in await _waiting(console):
        shown = approval.shown
        version = f"@{shown['version']}" if shown.get("version") else ""
        items.append(
            f'<article class="approval" data-id="{e(approval.id)}"><h2><code>{e(shown["tool"] + version)}</code> '
            f"(level {shown['level']})</h2><p>Called by <code>{e(str(shown['principal']))}</code> on process "
            f"<code>{e(approval.node)}</code>; waits {max(0, approval.expires - now):.0f} s more.</p>"
            f"<pre>{e(_pretty(shown['arguments']))}</pre>"
            f'<form method="post" action="{e(console.path)}/approvals/{e(approval.id)}">{csrf(seat)}'
            '<label>Reason <input name="reason" maxlength="500"></label> '
            '<button name="decision" value="approve">Approve</button> '
            '<button name="decision" value="deny">Deny</button></form></article>'
        )
    body = "".join(items) or message("No call is waiting for approval.")
    return "Approvals", main(body, 1000), 200


async def decide(console: Console, approval_id: str, seat: Seat, form: dict[str, str]) -> tuple[str | None, str | None]:
    decision = form.get("decision")
    if decision not in ("approve", "deny"):
        return "Choose approve or deny.", None
    access = getattr(console.deck, "access", None)
    if access is None:
        return "This deck has no access control to decide with.", None
    problem = await access.decide(approval_id, seat.principal, decision == "approve", form.get("reason", "")[:500])
    return problem, "/approvals"
