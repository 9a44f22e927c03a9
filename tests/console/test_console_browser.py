"""The operator console in a real browser (headless Chromium, Playwright): a ``tooldeck serve --http --console``
process under a policy, real MCP clients calling it from threads, and a person's clicks. Each page is kept as a
screenshot (tests/artefacts/screenshots/console-*.png)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from browser import screenshot
from http_client import HttpClient, serve_http
from tooldeck.security.tokens import hash_token

if TYPE_CHECKING:
    from playwright.sync_api import Page

DECK = "tests/console/decks/ops.py"
ROLES = {"ada": ["ops"], "bob": ["dev"], "eve": []}  # ada: operator and approver; bob: a caller; eve: neither
WAIT_MS = 5000  # the longest a page is given to show what it must (the within-2-s check says its own)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The console's server: its base URL (no path)."""
    directory = tmp_path_factory.mktemp("console")
    policy = directory / "policy.toml"
    policy.write_text(
        "".join(
            f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
            f"roles = {roles!r}\n".replace("'", '"')
            for who, roles in ROLES.items()
        )
        + '[roles]\nops = ["operator", "approver", "deploy"]\ndev = ["deploy"]\n'
        + '[levels]\napproval = "url"\nconfirm_timeout = 30\n[approvals]\nlevels = [10]\ntimeout = 30\n'
        + f'[audit]\nfile = "{directory / "audit.jsonl"}"\n'
    )
    with serve_http(DECK, "--policy", str(policy), "--console") as url:
        yield url.removesuffix("/mcp")


class Caller:
    """An MCP client of the server, with a token, that can call from a thread of its own."""

    def __init__(self, base: str, who: str, capabilities: dict[str, Any] | None = None) -> None:
        self.http = HttpClient(base + "/mcp", timeout=30)
        self.auth = {"authorization": f"Bearer {who}-key"}
        init = self.http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities or {},
            "clientInfo": {"name": f"{who}-client", "version": "1"}}}, version=None, headers=self.auth)  # fmt: skip
        self.session = init.headers["mcp-session-id"]
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict[str, Any]) -> Any:
        response = self.http.post(message, session=self.session, version="2025-11-25", headers=self.auth)
        return response.json() if response.content and response.headers["content-type"] == "application/json" else None

    def call(self, name: str, arguments: dict[str, Any], request_id: int = 1) -> Any:
        """tools/call, its result (read from the JSON body or the SSE stream)."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}  # fmt: skip
        with self.http.stream(message, session=self.session, version="2025-11-25", headers=self.auth) as stream:
            for found in stream.messages():
                if found.get("id") == request_id:
                    return found
        raise AssertionError(f"no answer to {name}")

    def in_thread(self, name: str, arguments: dict[str, Any]) -> queue.Queue[Any]:
        answers: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=lambda: answers.put(self.call(name, arguments)), daemon=True).start()
        return answers

    def close(self) -> None:
        self.http.client.close()


def sign_in(page: Page, base: str, who: str = "ada") -> None:
    page.goto(base + "/console")
    assert page.url == base + "/console/login"  # a page leads to the sign-in
    page.fill("input[name=token]", f"{who}-key")
    page.click("button:has-text('Sign in')")


def test_a_call_made_by_a_client_appears_within_2_seconds(page: Page, server: str) -> None:
    from playwright.sync_api import expect

    sign_in(page, server)
    page.goto(server + "/console/calls?principal=bob")
    rows = page.locator("main tr", has_text="echo")
    before = rows.count()
    caller = Caller(server, "bob")
    try:
        assert caller.call("echo", {"text": "hi"})["result"]["structuredContent"] == {"result": "hi"}
        expect(rows).to_have_count(before + 1, timeout=2000)  # the page refreshes itself: no reload here
    finally:
        caller.close()


def decided_on_the_approvals_page(
    page: Page, server: str, target: str, decision: str, reason: str, shot: str | None = None
) -> dict[str, Any]:
    """bob's call of deploy to ``target``, waiting in the approvals queue, decided there by ada: its result."""
    from playwright.sync_api import expect

    sign_in(page, server)
    page.goto(server + "/console/approvals")
    caller = Caller(server, "bob")
    try:
        answer = caller.in_thread("deploy", {"target": target})
        pending = page.locator("article.approval", has_text=target)
        expect(pending).to_be_visible(timeout=WAIT_MS)
        expect(pending).to_contain_text("deploy@1.0.0")
        expect(pending).to_contain_text("token:bob")
        if shot is not None:
            screenshot(page, shot)
        pending.locator("input[name=reason]").fill(reason)
        pending.locator(f"button[value={decision}]").click()
        result: dict[str, Any] = answer.get(timeout=10)["result"]
        expect(page.locator("main")).to_contain_text("No call is waiting for approval.")
        return result
    finally:
        caller.close()


def test_an_approver_approves_a_pending_level_10_call_and_the_client_s_call_completes(page: Page, server: str) -> None:
    result = decided_on_the_approvals_page(page, server, "prod", "approve", "change 1234", "console-approvals-pending")
    assert result["structuredContent"] == {"result": "deployed prod"}


def test_an_approver_denies_a_pending_call_and_the_client_gets_the_refusal(page: Page, server: str) -> None:
    result = decided_on_the_approvals_page(page, server, "staging", "deny", "freeze")
    assert result["isError"] is True
    assert result["content"][0]["text"] == "tool 'deploy' was not run: token:ada denied it: freeze"


def test_the_caller_approves_a_level_9_call_from_the_url_mode_link(page: Page, server: str) -> None:
    from playwright.sync_api import expect

    caller = Caller(server, "bob", {"elicitation": {"url": {}, "form": {}}})
    seen: queue.Queue[Any] = queue.Queue()
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "purge",
                                                                             "arguments": {"cache": "cdn"}}}  # fmt: skip

    def call() -> None:
        with caller.http.stream(message, session=caller.session, version="2025-11-25", headers=caller.auth) as stream:
            for found in stream.messages():
                seen.put(found)

    threading.Thread(target=call, daemon=True).start()
    try:
        asked = seen.get(timeout=10)
        assert asked["method"] == "elicitation/create" and asked["params"]["mode"] == "url"
        caller.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}})  # the user opens it
        page.goto(asked["params"]["url"])
        expect(page.locator("h1")).to_have_text("Approve this call?")
        expect(page.locator("body")).to_contain_text("purge@2.0.0")
        screenshot(page, "approval-page")
        page.fill("input[name=token]", "bob-key")  # the caller's own credentials
        page.click("button[value=approve]")
        expect(page.locator("h1")).to_have_text("Call approved")
        complete = seen.get(timeout=10)
        assert complete == {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                            "params": {"elicitationId": asked["params"]["elicitationId"]}}  # fmt: skip
        assert seen.get(timeout=10)["result"]["structuredContent"] == {"result": "purged cdn"}
    finally:
        caller.close()


def test_a_rollback_reaches_a_client_as_list_changed_and_the_old_version(page: Page, server: str) -> None:
    from playwright.sync_api import expect

    caller = Caller(server, "bob")
    heard: queue.Queue[Any] = queue.Queue()

    def listen() -> None:
        try:
            with caller.http.stream(method="GET", session=caller.session, version="2025-11-25",
                                    headers=caller.auth) as stream:  # fmt: skip
                for found in stream.messages():
                    heard.put(found)
        except Exception:  # the client closed at the end of the test
            pass

    threading.Thread(target=listen, daemon=True).start()
    try:
        sign_in(page, server)
        page.goto(server + "/console/tools/greet.hello")
        expect(page.locator("pre.diff")).to_contain_text("Say hello warmly")
        page.click("button:has-text('Roll back to 1.0.0')")
        expect(page.locator("h2", has_text="Served before")).to_be_visible()
        assert heard.get(timeout=10)["method"] == "notifications/tools/list_changed"
        tools = caller.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})["result"]["tools"]
        (greet,) = [tool for tool in tools if tool["name"] == "greet.hello"]
        assert greet["description"] == "Say hello"  # 1.0.0's
        page.goto(server + "/console/tools")
        expect(page.locator("tr", has_text="greet.hello")).to_contain_text("1.0.0")
    finally:
        caller.close()


def test_a_principal_without_the_operator_scope_is_refused_everywhere_and_forms_need_their_token(
    page: Page, server: str
) -> None:
    from playwright.sync_api import expect

    sign_in(page, server, "eve")
    expect(page.locator("body")).to_contain_text("The console needs the 'operator' scope.")
    assert page.context.cookies() == []  # no session for eve
    for path in ("", "/tools", "/tools/echo", "/sessions", "/calls", "/approvals", "/calls/verify"):
        response = page.request.get(server + "/console" + path, headers={"authorization": "Bearer eve-key"})
        assert response.status == 403, path
    sign_in(page, server, "ada")
    expect(page.locator("h1")).to_have_text("Overview")
    forged = page.request.post(server + "/console/calls/verify", form={"csrf": "not-the-token"})
    assert forged.status == 403 and "not the console" in forged.text()  # the cookie alone does nothing
    page.goto(server + "/console/calls")
    page.click("button:has-text('Verify now')")
    expect(page.locator("ul.verified")).to_contain_text("intact")


def test_an_operator_signs_in_and_every_page_is_shown(page: Page, server: str) -> None:  # last: the pages have calls
    from playwright.sync_api import expect

    caller = Caller(server, "bob")  # a session to show, and calls of several tools (the tests above made some too)
    for n, text in enumerate(("one", "two", "three")):
        caller.call("echo", {"text": text}, n + 1)
    caller.call("greet.hello", {"who": "ada"}, 9)
    page.goto(server + "/console")
    screenshot(page, "console-sign-in")
    sign_in(page, server)
    expect(page.locator("h1")).to_have_text("Overview", timeout=WAIT_MS)
    assert page.url == server + "/console"
    expect(page.locator("header .who")).to_contain_text("token:ada")
    for path, title in (("", "Overview"), ("/tools", "Tools"), ("/sessions", "Sessions"), ("/calls", "Calls"),
                        ("/approvals", "Approvals"), ("/tools/greet.hello", "greet.hello")):  # fmt: skip
        page.goto(server + "/console" + path)
        expect(page.locator("h1")).to_have_text(title)
        screenshot(page, "console-" + (path.strip("/").replace("/", "-") or "overview"))
    caller.close()
