"""The operator console over HTTP (no browser; test_console_browser.py drives one): who gets in, the cookie and the
headers that protect it, the CSRF token every action needs, each action audited, and each page's content — the
approvals queue deciding a waiting call, sessions ended, the audit trail filtered and verified, a rollback."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from asgi_client import AsgiClient, Response
from tooldeck import Deck
from tooldeck.security.audit import line_hash
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http import HttpApp

TOKENS = {"ada": ["ops"], "bob": ["dev"], "eve": []}  # ada: operator and approver; bob: a caller; eve: neither


def console_deck(tmp_path: Path, *, policy: bool = True, backend: str | None = None) -> Deck:
    deck = Deck("consoled")
    if backend is not None:  # before the policy: each process of a fleet keeps an audit trail of its own
        deck.use_backends(backend)

    @deck.tool(security_level=10, version="1.0.0", scopes=["deploy"])
    def deploy(target: str) -> str:
        return f"deployed {target}"

    @deck.tool
    def echo(text: str) -> str:
        return text

    if policy:
        path = tmp_path / "policy.toml"
        path.write_text(
            "".join(
                f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
                f"roles = {orjson.dumps(roles).decode()}\n"
                for who, roles in TOKENS.items()
            )
            + '[roles]\nops = ["operator", "approver", "deploy"]\ndev = ["deploy"]\n'
            + f'[approvals]\nlevels = [10]\n[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n'
        )
        deck.apply_policy(path)
    deck.use_console()
    return deck


@contextlib.asynccontextmanager
async def two_processes(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[Deck, Deck]]:
    """Two consoled decks over one Redis, as two processes of a fleet (their backends open), closed after."""
    here, there = console_deck(tmp_path, backend=redis_url), console_deck(tmp_path, backend=redis_url)
    for deck in (here, there):
        await deck.open_backends()
    try:
        yield here, there
    finally:
        await there.aclose()
        await here.aclose()


class Browser:
    """An HTTP client that keeps the console's cookie, as a browser does."""

    def __init__(self, app: Any, client: tuple[str, int] = ("127.0.0.1", 50000)) -> None:
        self.http = AsgiClient(app, client=client)
        self.cookie = ""

    async def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[Response, str]:
        response = await self.http.request("GET", path=path, jsonrpc=False, headers=self._headers(headers))
        return response, await self._read(response)

    async def post(self, path: str, form: dict[str, str], headers: dict[str, str] | None = None
                   ) -> tuple[Response, str]:  # fmt: skip
        all_headers = {"content-type": "application/x-www-form-urlencoded", **self._headers(headers)}
        response = await self.http.request("POST", path=path, jsonrpc=False, headers=all_headers,
                                           body=urlencode(form).encode())  # fmt: skip
        return response, await self._read(response)

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        return {**({"cookie": self.cookie} if self.cookie else {}), **(headers or {})}

    async def _read(self, response: Response) -> str:
        text = (await response.body()).decode()
        cookie = response.headers.get("set-cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return text

    async def sign_in(self, who: str) -> Response:
        response, _ = await self.post("/console/login", {"token": f"{who}-key"})
        return response

    async def csrf(self, path: str = "/console") -> str:
        _, text = await self.get(path)
        return text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def test_a_page_leads_to_the_sign_in_and_an_operator_signs_in_with_a_cookie_kept_from_scripts(
    tmp_path: Path,
) -> None:
    browser = Browser(HttpApp(console_deck(tmp_path)))
    response, _ = await browser.get("/console/approvals")
    assert (response.status, response.headers["location"]) == (303, "/console/login")
    response, text = await browser.get("/console/login")
    assert response.status == 200 and 'name="token"' in text
    response = await browser.sign_in("ada")
    assert (response.status, response.headers["location"]) == (303, "/console")
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("tooldeck_console=") and "; Path=/console; HttpOnly; SameSite=Strict" in cookie
    assert "Secure" not in cookie  # plain HTTP here: a Secure cookie would never come back
    response, text = await browser.get("/console")
    assert response.status == 200 and "Overview" in text
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    assert response.headers["cache-control"] == "no-store"
    assert '<script src="/console/static/console.js" defer></script>' in text and "<script>" not in text


@pytest.mark.parametrize("path", ["/console", "/console/tools", "/console/tools/echo", "/console/sessions",
                                  "/console/calls", "/console/calls/audit.jsonl/1", "/console/approvals",
                                  "/console/nothing"])  # fmt: skip
async def test_a_principal_without_the_operator_scope_gets_403_on_every_console_path(tmp_path: Path, path: str) -> None:
    browser = Browser(HttpApp(console_deck(tmp_path)))
    response, text = await browser.get(path, {"authorization": "Bearer eve-key"})
    assert response.status == 403 and "needs the &#x27;operator&#x27; scope" in text
    response, _ = await browser.post(path, {}, {"authorization": "Bearer eve-key"})
    assert response.status == 403
    response, _ = await browser.get(path, {"authorization": "Bearer ada-key"})  # an operator's script is let in
    assert response.status in (200, 404)
    signed = await browser.sign_in("eve")
    assert signed.status == 403 and "set-cookie" not in signed.headers


async def test_an_action_without_its_csrf_token_is_refused_and_audited(tmp_path: Path) -> None:
    deck = console_deck(tmp_path)
    app = HttpApp(deck)
    browser = Browser(app)
    await browser.sign_in("ada")
    session = await AsgiClient(app).initialize()
    for form in ({}, {"csrf": "forged"}):
        response, text = await browser.post(f"/console/sessions/{session}/end", form)
        assert response.status == 403 and "not the console&#x27;s own" in text
    assert session in app.sessions  # nothing was done
    response, _ = await browser.post(f"/console/sessions/{session}/end", {"csrf": await browser.csrf()})
    assert (response.status, response.headers["location"]) == (303, "/console/sessions")
    assert session not in app.sessions
    deck._security.sink.flush()
    records = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    console = [(r["action"], r["principal"], r["outcome"]) for r in records if r.get("event") == "console"]
    assert console == [("sign-in", "ada", "ok"), ("refused-form", "ada", "refused"),
                       ("refused-form", "ada", "refused"), ("end-session", "ada", "ok")]  # fmt: skip


async def test_an_approver_approves_a_waiting_call_from_the_approvals_page(tmp_path: Path) -> None:
    deck = console_deck(tmp_path)
    app = HttpApp(deck)
    caller = AsgiClient(app)
    init = await caller.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers={"authorization": "Bearer bob-key"})  # fmt: skip
    await init.body()
    session = init.headers["mcp-session-id"]
    call = asyncio.ensure_future(caller.call(session, 1, "tools/call", {"name": "deploy", "arguments": {
        "target": "<prod>"}}, headers={"authorization": "Bearer bob-key"}))  # fmt: skip
    browser = Browser(app)
    await browser.sign_in("ada")
    for _ in range(200):
        _, text = await browser.get("/console/approvals")
        if "deploy@1.0.0" in text:
            break
        await asyncio.sleep(0.01)
    assert "token:bob" in text and "&lt;prod&gt;" in text and "<prod>" not in text
    approval_id = text.split('data-id="', 1)[1].split('"', 1)[0]
    csrf = text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response, _ = await browser.post(f"/console/approvals/{approval_id}", {"csrf": csrf, "decision": "approve",
                                                                           "reason": "change 7"})  # fmt: skip
    assert response.status == 303
    result = await (await call).json()
    assert result["result"]["structuredContent"] == {"result": "deployed <prod>"}
    response, text = await browser.post(f"/console/approvals/{approval_id}", {"csrf": csrf, "decision": "deny"})
    assert response.status == 409 and "no call with this id is waiting" in text  # single use


async def test_the_calls_page_shows_the_trail_filtered_and_verifies_it(tmp_path: Path) -> None:
    deck = console_deck(tmp_path)
    app = HttpApp(deck)
    caller = AsgiClient(app)
    session = await caller.initialize()
    for text in ("one", "two"):
        await (await caller.call(session, text, "tools/call", {"name": "echo", "arguments": {"text": text}})).body()
    deck._security.sink.flush()
    browser = Browser(app)
    await browser.sign_in("ada")
    _, page = await browser.get("/console/calls?tool=echo")
    assert page.count("<code>echo</code>") == 2
    head = line_hash((tmp_path / "audit.jsonl").read_bytes().splitlines()[-1])
    assert "has not been verified from the console yet" in page and f"head <code class='hash'>{head}" in page
    _, page = await browser.get("/console/calls?tool=deploy")
    assert "<code>echo</code>" not in page
    _, part = await browser.get("/console/calls?part=main")
    assert part.startswith('<main id="main" data-refresh="1000">') and "<html" not in part
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response, _ = await browser.post("/console/calls/verify", {"csrf": csrf})
    assert response.status == 303
    _, page = await browser.get("/console/calls")
    assert "intact" in page and "BROKEN" not in page
    link = page.split('<a href="/console/calls/audit.jsonl/', 1)[1].split('"', 1)[0]  # the newest record first
    _, record = await browser.get(f"/console/calls/audit.jsonl/{link}")
    assert "&quot;action&quot;: &quot;verify-trail&quot;" in record


async def test_with_no_authentication_the_console_is_for_this_machine_only(tmp_path: Path) -> None:
    app = HttpApp(console_deck(tmp_path, policy=False))
    local = Browser(app)
    response, text = await local.get("/console/sessions")
    assert response.status == 200 and "local operator" in text and local.cookie.startswith("tooldeck_console=")
    response, _ = await local.post("/console/calls/verify", {"csrf": await local.csrf()})
    assert response.status == 409  # no trail to verify, but the form was the console's own
    remote = Browser(app, client=("203.0.113.9", 50000))
    response, text = await remote.get("/console/sessions")
    assert response.status == 403 and "open to this machine only" in text


def greet(version: str, description: str) -> dict[str, Any]:
    return {"id": "greet", "name": "Greet", "version": version, "description": description, "capabilities": [
        {"name": "hello", "description": description, "parameters": [
            {"name": "who", "type": "string", "required": True, "description": "who to greet"}]}]}  # fmt: skip


async def test_a_definition_s_page_shows_its_history_and_diff_and_rolls_it_back_for_every_client(
    tmp_path: Path,
) -> None:
    deck = console_deck(tmp_path)
    deck.manager.implements("greet.hello")(lambda who: f"hello {who}")
    deck.manager.register(greet("1.0.0", "Say hello"))
    deck.manager.register(greet("1.0.1", "Say hello warmly"))
    app = HttpApp(deck)
    browser = Browser(app)
    await browser.sign_in("ada")
    _, tools = await browser.get("/console/tools")
    assert '<a href="/console/tools/greet.hello"><code>greet.hello</code></a>' in tools and "<td>1.0.1</td>" in tools
    _, page = await browser.get("/console/tools/greet.hello")
    assert '<span class="removed">-  &quot;description&quot;: &quot;Say hello&quot;,</span>' in page
    assert '<span class="added">+  &quot;description&quot;: &quot;Say hello warmly&quot;,</span>' in page
    assert "Roll back to 1.0.0" in page
    changed: list[Any] = []
    deck.tools.subscribe(lambda: changed.append(True))
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response, _ = await browser.post("/console/tools/greet.hello/rollback", {"csrf": csrf})
    assert (response.status, response.headers["location"]) == (303, "/console/tools/greet.hello")
    assert deck.manager.get("greet").document["version"] == "1.0.0" and changed
    response, text = await browser.post("/console/tools/echo/rollback", {"csrf": csrf})
    assert response.status == 409 and "is not a served tool definition" in text


async def test_the_overview_charts_the_last_hour_from_the_trail(tmp_path: Path) -> None:
    deck = console_deck(tmp_path)
    app = HttpApp(deck)
    caller = AsgiClient(app)
    session = await caller.initialize()
    for n in range(3):
        await (await caller.call(session, n, "tools/call", {"name": "echo", "arguments": {"text": "x"}})).body()
    await (await caller.call(session, 9, "tools/call", {"name": "deploy", "arguments": {"target": "x"}})).body()
    deck._security.sink.flush()
    browser = Browser(app)
    await browser.sign_in("ada")
    _, page = await browser.get("/console")
    assert '<svg class="bars"' in page and "peak 4/min" in page
    assert "<td><code>echo</code></td><td>3</td><td>0</td><td>0</td>" in page
    assert "needs an authenticated caller" in page  # deploy's refusal, by reason
    assert "<dt>Sessions here</dt><dd>1</dd>" in page


async def test_the_policy_is_reloaded_from_the_overview_and_a_broken_one_is_refused_saying_why(
    tmp_path: Path,
) -> None:
    deck = console_deck(tmp_path)
    app = HttpApp(deck)
    browser = Browser(app)
    await browser.sign_in("ada")
    _, page = await browser.get("/console")
    assert "Reload the policy" in page and str(tmp_path / "policy.toml") in page
    policy = tmp_path / "policy.toml"
    good = policy.read_text()
    policy.write_text(good + "[limits\n")  # broken
    response, text = await browser.post("/console/policy/reload", {"csrf": await browser.csrf()})
    assert response.status == 409 and "policy.toml:" in text and "not valid TOML" in text
    eve = {"authorization": "Bearer eve-key"}
    assert (await browser.get("/console", eve))[0].status == 403  # the policy before serves on
    policy.write_text(good.replace("roles = []", 'roles = ["ops"]'))  # eve made an operator
    response, _ = await browser.post("/console/policy/reload", {"csrf": await browser.csrf()})
    assert (response.status, response.headers["location"]) == (303, "/console/")
    assert (await browser.get("/console", eve))[0].status == 200


async def test_a_reload_on_one_process_s_console_reloads_the_others_too(tmp_path: Path, redis_url: str) -> None:
    async with two_processes(tmp_path, redis_url) as (here, there):
        reloaded = asyncio.Event()
        there.on_policy_reload(reloaded.set)
        here_app, there_app = HttpApp(here), HttpApp(there)
        await there.bus.ready()
        browser = Browser(here_app)
        await browser.sign_in("ada")
        policy = tmp_path / "policy.toml"
        policy.write_text(policy.read_text().replace("roles = []", 'roles = ["ops"]'))
        response, _ = await browser.post("/console/policy/reload", {"csrf": await browser.csrf()})
        assert response.status == 303
        await asyncio.wait_for(reloaded.wait(), 5)
        eve = {"authorization": "Bearer eve-key"}
        assert (await Browser(there_app).get("/console", eve))[0].status == 200


async def test_a_definition_s_changes_are_shown_from_any_version_served_before(tmp_path: Path) -> None:
    deck = console_deck(tmp_path)
    deck.manager.implements("greet.hello")(lambda who: f"hello {who}")
    for version, text in (("1.0.0", "Say hello"), ("1.0.1", "Say hello warmly"), ("1.0.2", "Say hello kindly")):
        deck.manager.register(greet(version, text))
    browser = Browser(HttpApp(deck))
    await browser.sign_in("ada")
    _, page = await browser.get("/console/tools/greet.hello")
    assert "Changes from 1.0.1" in page and '<a href="/console/tools/greet.hello?from=1.0.0">' in page
    _, page = await browser.get("/console/tools/greet.hello?from=1.0.0")
    assert "Changes from 1.0.0" in page and "-  &quot;description&quot;: &quot;Say hello&quot;," in page


async def test_clients_that_never_keep_their_cookie_keep_at_most_max_seats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.console import seats

    monkeypatch.setattr(seats, "MAX_SEATS", 3)
    http = HttpApp(console_deck(tmp_path, policy=False))
    for _ in range(5):  # a loopback script without cookies: a seat each time
        response, _ = await Browser(http).get("/console/sessions")
        assert response.status == 200
    assert len(http.deck.console.seats.seats) == 3
    browser = Browser(http)
    await browser.get("/console")
    kept = http.deck.console.seats.seats
    assert len(kept) == 3 and browser.cookie.split("=", 1)[1] in kept  # the newest is one of those kept


async def test_a_fleet_s_consoles_share_their_sign_ins_and_a_sign_out_ends_one_everywhere(
    tmp_path: Path, redis_url: str
) -> None:
    async with two_processes(tmp_path, redis_url) as (here, there):
        here_app, there_app = HttpApp(here), HttpApp(there)
        browser = Browser(here_app)
        await browser.sign_in("ada")
        assert "redis" in type(here.console.seats).__name__.lower()
        elsewhere = Browser(there_app)  # the same browser, its next request balanced to the other process
        elsewhere.cookie = browser.cookie
        response, page = await elsewhere.get("/console/approvals")
        assert response.status == 200 and "token:ada" in page
        csrf = await elsewhere.csrf()
        assert csrf == await browser.csrf()  # one seat: its forms carry the same token on every process
        response, _ = await elsewhere.post("/console/logout", {"csrf": csrf})
        assert (response.status, response.headers["location"]) == (303, "/console/login")
        response, _ = await browser.get("/console")  # signed out there: out here too
        assert (response.status, response.headers["location"]) == (303, "/console/login")


async def test_a_fleet_s_console_lists_and_ends_the_sessions_another_process_serves(
    tmp_path: Path, redis_url: str
) -> None:
    async with two_processes(tmp_path, redis_url) as (here, there):
        here_app, there_app = HttpApp(here), HttpApp(there)
        await here.bus.ready()
        client = AsgiClient(here_app)
        session = await client.initialize()
        browser = Browser(there_app)
        await browser.sign_in("ada")
        _, page = await browser.get("/console/sessions")
        row = page.split(f"<code>{session[:12]}…</code>", 1)[1].split("</tr>", 1)[0]
        assert "<td>anonymous</td>" in row and "<td>2025-11-25</td>" in row and "<td>another</td>" in row
        response, _ = await browser.post(f"/console/sessions/{session}/end", {"csrf": await browser.csrf()})
        assert (response.status, response.headers["location"]) == (303, "/console/sessions")
        answer = await client.call(session, 2, "tools/list")  # the process serving it: the store says it ended
        assert answer.status == 404
        response, text = await browser.post(f"/console/sessions/{session}/end", {"csrf": await browser.csrf()})
        assert response.status == 409 and "No such session." in text


async def test_a_shared_seat_keeps_who_signed_in_and_expires_after_its_lifetime(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.console import seats
    from tooldeck.security.principal import Principal

    deck = console_deck(tmp_path, backend=redis_url)
    await deck.open_backends()
    try:
        store = deck.console.seats
        ada = Principal("ada", scopes=["operator"], roles=["ops"], issuer=None, expires_at=1e10)
        seat = await store.open(ada)
        found = await store.get(seat.id)
        assert found is not None and found.principal == ada and found.csrf == seat.csrf and not found.new
        assert (await store.get("no-such-seat")) is None
        now = seats.time.time()
        monkeypatch.setattr(seats.time, "time", lambda: now + seats.LIFETIME + 1)
        assert (await store.get(seat.id)) is None  # past its lifetime: gone, however busy it was
        monkeypatch.undo()
        assert (await store.get(seat.id)) is None  # and removed
    finally:
        await deck.aclose()
