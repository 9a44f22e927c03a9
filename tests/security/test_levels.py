"""Security levels on every call: 0 anyone, 1-3 authenticated, 4-7 scopes (own or by role), 8-10 verified by a recent
authentication or the user's confirmation — over the in-process client (schema-checked) and over HTTP."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from helpers import client
from tooldeck import Deck
from tooldeck.security.levels import AccessControl, Confirmations
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal


def deck_with_levels(policy: dict[str, Any] | None = None) -> Deck:
    deck = Deck("levels")

    @deck.tool
    def open_(x: int = 0) -> str:
        return "open"

    @deck.tool(security_level=2)
    def signed_in(x: int = 0) -> str:
        return "signed in"

    @deck.tool(security_level=5, scopes=["weather:read"])
    def weather(x: int = 0) -> str:
        return "sunny"

    @deck.tool(security_level=9, scopes=["deploy:write"], version="2.1.0")
    def deploy(target: str) -> str:
        return f"deployed {target}"

    deck.use_policy(Policy(policy or {}))
    return deck


ALICE = Principal("alice", scopes={"weather:read"}, roles={"ops"})


async def refusal(c: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await c.request_raw("tools/call", {"name": name, "arguments": arguments or {}})
    assert "error" in reply, reply
    return reply["error"]  # type: ignore[no-any-return]


async def test_level_0_is_open_to_anyone_and_level_1_needs_someone() -> None:
    deck = deck_with_levels()
    async with client(deck) as c:
        c.session.principal = None  # anonymous
        assert (await c.call_tool("open_"))["structuredContent"] == {"result": "open"}
        assert await refusal(c, "signed_in") == {
            "code": -32000,
            "message": "tool 'signed_in' needs an authenticated caller (security level 2); send credentials",
        }
        c.session.principal = Principal("bob")
        assert (await c.call_tool("signed_in"))["structuredContent"] == {"result": "signed in"}


async def test_levels_4_to_7_need_the_scopes_or_a_role_that_grants_them() -> None:
    deck = deck_with_levels()
    async with client(deck) as c:
        c.session.principal = Principal("bob")
        assert await refusal(c, "weather") == {
            "code": -32000,
            "message": "tool 'weather' needs the scope weather:read (security level 5); ask for a token that grants "
            "weather:read",
        }
        c.session.principal = ALICE
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
    deck = deck_with_levels({"roles": {"forecaster": ["weather:read"]}})
    async with client(deck) as c:
        c.session.principal = Principal("carol", roles={"forecaster"})
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}


async def test_the_policy_default_level_applies_to_tools_that_declare_none() -> None:
    deck = deck_with_levels({"levels": {"default": 1}})
    async with client(deck) as c:
        c.session.principal = None
        assert (await refusal(c, "open_"))["message"].startswith("tool 'open_' needs an authenticated caller")


async def test_a_recent_authentication_verifies_levels_8_to_10() -> None:
    deck = deck_with_levels({"levels": {"recent_auth_seconds": 300, "confirm": False}})
    async with client(deck) as c:
        c.session.principal = Principal("dave", scopes={"deploy:write"}, auth_time=time.time() - 60)
        assert (await c.call_tool("deploy", {"target": "prod"}))["structuredContent"] == {"result": "deployed prod"}
        # an authentication "in the future" is no recent one, whichever backend made the principal
        c.session.principal = Principal("dave", scopes={"deploy:write"}, auth_time=time.time() + 3600)
        assert (await refusal(c, "deploy", {"target": "prod"}))["message"].startswith("tool 'deploy' needs per-call")
        c.session.principal = Principal("dave", scopes={"deploy:write"}, auth_time=time.time() - 3600)
        assert await refusal(c, "deploy", {"target": "prod"}) == {
            "code": -32000,
            "message": "tool 'deploy' needs per-call verification (security level 9); it needs a token from an "
            "authentication in the last 300 s",
        }


def confirm_with_the_code(params: dict[str, Any]) -> dict[str, Any]:
    code = re.search(r"enter the code (\d{6})", params["message"])
    assert code is not None, params["message"]
    return {"action": "accept", "content": {"code": code.group(1)}}


async def test_a_confirmation_shows_the_call_and_verifies_it_once() -> None:
    deck = deck_with_levels()
    asked: list[dict[str, Any]] = []
    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", lambda params: asked.append(params) or confirm_with_the_code(params))
        result = await c.call_tool("deploy", {"target": "prod"})
        assert result["structuredContent"] == {"result": "deployed prod"}
        (params,) = asked
        assert params["mode"] == "form"
        assert 'deploy@2.1.0\narguments: {\n  "target": "prod"\n}' in params["message"]
        assert params["requestedSchema"]["required"] == ["code"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_confirmation_does_not_run_the_call(action: str) -> None:
    ran: list[str] = []
    deck = deck_with_levels()

    @deck.tool(security_level=8)
    def wipe() -> str:
        ran.append("wipe")
        return "wiped"

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.on_request("elicitation/create", lambda params: {"action": action})
        result = await c.call_tool("wipe")
    assert result == {
        "content": [{"type": "text", "text": f"tool 'wipe' was not run: the user did not confirm it ({action})"}],
        "isError": True,
    }
    assert ran == []


async def test_a_confirmation_that_times_out_does_not_run_the_call() -> None:
    deck = deck_with_levels({"levels": {"confirm_timeout": 0.05}})
    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", lambda params: None)  # never answers
        result = await c.call_tool("deploy", {"target": "prod"})
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "tool 'deploy' was not run: the confirmation failed (the client did not answer elicitation/create within "
        "0.05 s)"
    )


async def test_without_elicitation_or_recent_auth_the_refusal_says_what_would_allow_it() -> None:
    deck = deck_with_levels({"levels": {"recent_auth_seconds": 600}})
    async with client(deck) as c:  # no elicitation capability
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        assert (await refusal(c, "deploy", {"target": "prod"}))["message"] == (
            "tool 'deploy' needs per-call verification (security level 9); it needs a client that supports "
            "elicitation (to confirm the call) or a token from an authentication in the last 600 s"
        )


async def test_a_replayed_confirmation_for_other_arguments_is_refused() -> None:
    deck = deck_with_levels()
    codes: list[str] = []

    def first_then_replay(params: dict[str, Any]) -> dict[str, Any]:
        answer = confirm_with_the_code(params)
        codes.append(answer["content"]["code"])
        return {"action": "accept", "content": {"code": codes[0]}}  # always the first call's code

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", first_then_replay)
        assert (await c.call_tool("deploy", {"target": "staging"}))["isError"] is False
        replayed = await c.call_tool("deploy", {"target": "prod"})
    assert replayed["content"][0]["text"] == "tool 'deploy' was not run: the confirmation code does not match this call"


@pytest.mark.parametrize("refusal", ["decline", "cancel", "no answer"])
async def test_a_refused_confirmation_spends_its_code(refusal: str) -> None:
    # A code shown for a call the user declined (or cancelled, or never answered) cannot confirm the same call later.
    ran: list[str] = []
    deck = deck_with_levels({"levels": {"confirm_timeout": 0.5}})

    @deck.tool(security_level=8)
    def wipe(disk: str) -> str:
        ran.append(disk)
        return "wiped"

    shown: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any] | None:
        shown.append(confirm_with_the_code(params)["content"]["code"])
        if len(shown) == 1:
            return None if refusal == "no answer" else {"action": refusal}
        return {"action": "accept", "content": {"code": shown[0]}}  # the first, refused call's code

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.on_request("elicitation/create", answer)
        assert (await c.call_tool("wipe", {"disk": "sda"}))["isError"] is True
        again = await c.call_tool("wipe", {"disk": "sda"})
    assert again["content"][0]["text"] == "tool 'wipe' was not run: the confirmation code does not match this call"
    assert ran == []


async def test_a_code_shown_for_one_call_does_not_confirm_a_concurrent_call_with_other_arguments() -> None:
    # Two calls of one tool wait for their confirmations at once; the harmless call's code, given for the dangerous
    # one, must not run it: a code is bound to its call's arguments (their digest), not only to the tool.
    deck = deck_with_levels()
    asked: dict[str, str] = {}
    both_asked = asyncio.Event()
    answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        target = "prod" if '"target": "prod"' in params["message"] else "test"
        asked[target] = confirm_with_the_code(params)["content"]["code"]
        answers[target] = asyncio.get_running_loop().create_future()
        if len(asked) == 2:
            both_asked.set()
        return await answers[target]

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", answer)
        prod = asyncio.ensure_future(c.call_tool("deploy", {"target": "prod"}))
        test = asyncio.ensure_future(c.call_tool("deploy", {"target": "test"}))
        async with asyncio.timeout(10):
            await both_asked.wait()
        answers["prod"].set_result({"action": "accept", "content": {"code": asked["test"]}})
        assert (await prod)["content"][0]["text"] == (
            "tool 'deploy' was not run: the confirmation code does not match this call"
        )
        answers["test"].set_result({"action": "accept", "content": {"code": asked["test"]}})
        assert (await test)["isError"] is True  # the code was spent by the attempt on the other call: single use


def test_a_code_is_bound_to_each_part_of_its_binding() -> None:
    codes = Confirmations()
    binding = ("token:erin", "deploy@2.1.0", "digest-a")
    for other in (("token:mallory", "deploy@2.1.0", "digest-a"), ("token:erin", "deploy@2.2.0", "digest-a"),
                  ("token:erin", "deploy@2.1.0", "digest-b")):  # fmt: skip
        assert not codes.redeem(codes.issue(binding), other)
    code = codes.issue(binding)
    codes.spend(code)
    assert not codes.redeem(code, binding)


def test_confirmation_codes_are_bound_single_use_and_short_lived() -> None:
    now = [1000.0]
    codes = Confirmations(ttl=10, clock=lambda: now[0])
    binding = ("erin", "deploy@2.1.0", "digest")
    code = codes.issue(binding)
    assert not codes.redeem(code, ("mallory", "deploy@2.1.0", "digest"))  # another principal: and now it is spent
    code = codes.issue(binding)
    assert codes.redeem(code, binding) and not codes.redeem(code, binding)  # single use
    code = codes.issue(binding)
    now[0] += 11
    assert not codes.redeem(code, binding)  # expired


async def test_an_item_that_declares_two_scopes_needs_both() -> None:
    deck = Deck("two")

    @deck.tool(security_level=5, scopes=["files:read", "files:write"])
    def sync_files() -> str:
        return "synced"

    deck.use_policy(Policy({}))
    one, both = Principal("ann", scopes={"files:read"}), Principal("bo", scopes={"files:read", "files:write"})
    tool = deck.tools.get("sync_files")
    assert not deck.access.can_use(one, tool) and deck.access.can_use(both, tool)
    async with client(deck) as c:
        c.session.principal = one
        assert [t["name"] for t in await c.list_tools()] == []
        assert (await refusal(c, "sync_files"))["message"].startswith("tool 'sync_files' needs the scope files:write")
        c.session.principal = both
        assert (await c.call_tool("sync_files"))["structuredContent"] == {"result": "synced"}


def test_can_use_is_what_lists_show() -> None:
    deck = deck_with_levels()
    access: AccessControl = deck.access
    tools = {tool.name: tool for tool in deck.tools}
    assert [name for name, tool in tools.items() if access.can_use(None, tool)] == ["open_"]
    assert [name for name, tool in tools.items() if access.can_use(ALICE, tool)] == ["open_", "signed_in", "weather"]


async def test_stdio_and_in_process_sessions_are_the_local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "olivia")
    deck = deck_with_levels({"authentication": {"stdio": {"scopes": ["weather:read"]}}})
    async with client(deck) as c:
        assert c.session.principal == Principal("olivia", scopes={"weather:read"}, method="local")
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
    await asyncio.sleep(0)


async def test_lists_leave_out_what_a_principal_can_never_use() -> None:
    deck = deck_with_levels()
    async with client(deck) as c:
        c.session.principal = None
        assert [t["name"] for t in await c.list_tools()] == ["open_"]
        c.session.principal = ALICE
        assert [t["name"] for t in await c.list_tools()] == ["open_", "signed_in", "weather"]
        c.session.principal = Principal("root", scopes={"weather:read", "deploy:write"})
        assert [t["name"] for t in await c.list_tools()] == ["open_", "signed_in", "weather", "deploy"]
    shown = deck_with_levels({"levels": {"hide_unusable": False}})
    async with client(shown) as c:
        c.session.principal = None
        assert len(await c.list_tools()) == 4


def test_a_visibility_class_is_listed_from_one_cached_view() -> None:
    deck = deck_with_levels()
    access: AccessControl = deck.access
    key = access.view_key(ALICE, deck.tools)
    assert key == (True, frozenset({"weather:read"}))
    assert access.view_key(Principal("other", scopes={"weather:read", "unrelated"}), deck.tools) == key
    view = deck.tools.view(key, lambda tool: access.can_use(ALICE, tool))
    assert deck.tools.view(key, lambda tool: False) is view  # cached: the filter is not run again
    deck.remove_tool("open_")
    assert deck.tools.view(key, lambda tool: access.can_use(ALICE, tool)) is not view  # a change empties the cache


async def test_resources_and_prompts_have_levels_and_scopes_too() -> None:
    deck = Deck("guarded")

    @deck.resource("secret://plans", security_level=5, scopes=["plans:read"])
    def plans() -> str:
        return "the plans"

    @deck.resource_template("secret://plans/{n}", security_level=5, scopes=["plans:read"])
    def plan(n: int) -> str:
        return f"plan {n}"

    @deck.prompt(security_level=1)
    def review(code: str) -> str:
        return f"Review {code}"

    async with client(deck) as c:
        c.session.principal = None
        read = await c.request_raw("resources/read", {"uri": "secret://plans"})
        assert (
            read["error"]["message"]
            == "resource 'secret://plans' needs an authenticated caller (security level 5); send credentials"
        )
        got = await c.request_raw("prompts/get", {"name": "review", "arguments": {"code": "x"}})
        assert got["error"]["code"] == -32000
        assert (await c.request("resources/list", {}))["resources"] == []
        assert (await c.request("prompts/list", {}))["prompts"] == []
        c.session.principal = Principal("pat")
        read = await c.request_raw("resources/read", {"uri": "secret://plans/2"})
        assert read["error"]["message"].startswith("resource 'secret://plans/2' needs the scope plans:read")
        assert (await c.request("prompts/get", {"name": "review", "arguments": {"code": "x"}}))["messages"]
        c.session.principal = Principal("pat", scopes={"plans:read"})
        assert (await c.request("resources/read", {"uri": "secret://plans/2"}))["contents"][0]["text"] == "plan 2"
        assert [r["uri"] for r in (await c.request("resources/list", {}))["resources"]] == ["secret://plans"]


async def test_listings_are_sanitised_unless_the_policy_says_not_to() -> None:
    deck = Deck("listing")

    @deck.tool(title="Evil\u202e title", description="Does \x1b]8;;https://evil.example\x07things\x1b]8;;\x07 quietly")
    def evil() -> str:
        return "ok"

    async with client(deck) as c:
        (tool,) = await c.list_tools()
    assert (tool["title"], tool["description"]) == ("Evil title", "Does things quietly")
    deck.apply_policy(Policy({"sanitise": {"enabled": False}}))
    async with client(deck) as c:
        (tool,) = await c.list_tools()
    assert tool["title"] == "Evil\u202e title"


async def test_a_stdio_session_can_take_an_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tooldeck.security.tokens import hash_token

    policy = {
        "authentication": {"tokens": [{"subject": "ci-bot", "sha256": hash_token("k3y"), "scopes": ["weather:read"]}]}
    }
    monkeypatch.setenv("TOOLDECK_TOKEN", "k3y")
    deck = deck_with_levels(policy)
    async with client(deck) as c:
        assert c.session.principal == Principal("ci-bot", scopes={"weather:read"})
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
    monkeypatch.setenv("TOOLDECK_TOKEN", "wrong")
    deck = deck_with_levels(policy)
    async with client(deck) as c:
        assert c.session.principal is None  # an unknown key is nobody, not the local user


async def test_error_messages_are_sanitised_too() -> None:
    deck = Deck("errors")
    deck.add_resource("docs://readme", "text")
    async with client(deck) as c:
        reply = await c.request_raw("resources/read", {"uri": "docs://\x1b[2J\u202egone"})
    assert "\x1b" not in reply["error"]["message"] and "\u202e" not in reply["error"]["message"]
    assert "docs://[2Jgone" not in reply["error"]["message"]  # the whole sequence goes, not just the ESC


async def test_an_admitted_call_admits_nobody_else() -> None:
    """The step remembers the last principal and tool it admitted; another principal, another policy or a principal
    of the same subject with fewer scopes is checked afresh."""
    deck = deck_with_levels()
    async with client(deck) as c:
        c.session.principal = ALICE
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
        c.session.principal = Principal("alice")  # the same subject, without the scope
        assert (await refusal(c, "weather"))["code"] == -32000
        c.session.principal = None
        assert (await refusal(c, "weather"))["code"] == -32000
        c.session.principal = ALICE
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
        deck.use_policy(Policy({"roles": {}, "levels": {"default": 0}}))
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
        mallory = Principal("mallory", scopes={"other"})
        c.session.principal = mallory
        assert (await refusal(c, "weather"))["code"] == -32000


# --- each check one step weaker fails a test below (scripts/security_mutants.py) ---------------------------------


@pytest.mark.parametrize("level", [1, 3, 5, 8, 10])
async def test_declared_scopes_are_needed_at_every_level_above_0(level: int) -> None:
    deck = Deck("scoped")

    @deck.tool(security_level=level, scopes=["reports:read"])
    def report() -> str:
        return "report"

    deck.use_policy(Policy({"levels": {"recent_auth_seconds": 300, "confirm": False}}))
    async with client(deck) as c:
        c.session.principal = Principal("bob", auth_time=time.time())  # authenticated just now, without the scope
        assert (await refusal(c, "report"))["message"] == (
            f"tool 'report' needs the scope reports:read (security level {level}); ask for a token that grants "
            "reports:read"
        )
        c.session.principal = Principal("bob", scopes={"reports:read"}, auth_time=time.time())
        assert (await c.call_tool("report"))["structuredContent"] == {"result": "report"}


async def test_reading_a_level_8_resource_or_getting_a_level_8_prompt_is_confirmed_per_call() -> None:
    deck = Deck("vault")

    @deck.resource("secret://vault", security_level=8)
    def vault() -> str:
        return "gold"

    @deck.prompt(security_level=8)
    def incident(host: str) -> str:
        return f"Take {host} out of service"

    asked: list[str] = []
    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin")
        c.on_request("elicitation/create", lambda params: asked.append(params["message"]) or {"action": "decline"})
        read = await c.request_raw("resources/read", {"uri": "secret://vault"})
        assert read["error"] == {
            "code": -32000,
            "message": "resource 'secret://vault' was not run: the user did not confirm it (decline)",
        }
        got = await c.request_raw("prompts/get", {"name": "incident", "arguments": {"host": "db1"}})
        assert got["error"] == {
            "code": -32000,
            "message": "prompt 'incident' was not run: the user did not confirm it (decline)",
        }
        assert (
            len(asked) == 2 and "secret://vault" in asked[0] and 'incident\narguments: {\n  "host": "db1"' in asked[1]
        )
        c.on_request("elicitation/create", confirm_with_the_code)
        assert (await c.request("resources/read", {"uri": "secret://vault"}))["contents"][0]["text"] == "gold"
        got = await c.request("prompts/get", {"name": "incident", "arguments": {"host": "db1"}})
        assert got["messages"][0]["content"]["text"] == "Take db1 out of service"


async def test_static_content_is_guarded_as_a_function_is() -> None:
    deck = Deck("static")
    deck.add_resource("secret://motd", "the plans", security_level=5, scopes=["plans:read"])
    async with client(deck) as c:
        for principal, needs in ((None, "needs an authenticated caller"), (Principal("pat"), "needs the scope")):
            c.session.principal = principal
            reply = await c.request_raw("resources/read", {"uri": "secret://motd"})
            assert reply["error"]["message"].startswith(f"resource 'secret://motd' {needs}"), reply
        c.session.principal = Principal("pat", scopes={"plans:read"})
        assert (await c.request("resources/read", {"uri": "secret://motd"}))["contents"][0]["text"] == "the plans"


async def test_an_admitted_call_admits_no_other_tool() -> None:
    deck = deck_with_levels()

    @deck.tool(security_level=5, scopes=["billing:read"])
    def invoices() -> str:
        return "invoices"

    async with client(deck) as c:
        c.session.principal = ALICE  # weather:read only
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
        assert (await refusal(c, "invoices"))["message"].startswith("tool 'invoices' needs the scope billing:read")
        assert (await refusal(c, "deploy", {"target": "prod"}))["message"].startswith("tool 'deploy' needs the scope")


async def test_a_new_policy_takes_back_what_a_role_granted() -> None:
    # The scopes worked out for a principal and the call admitted last are remembered: a new policy is a new start.
    deck = deck_with_levels({"roles": {"forecaster": ["weather:read"]}})
    carol = Principal("carol", roles={"forecaster"})
    async with client(deck) as c:
        c.session.principal = carol
        assert (await c.call_tool("weather"))["structuredContent"] == {"result": "sunny"}
        assert "weather" in [t["name"] for t in await c.list_tools()]
        deck.use_policy(Policy({"roles": {"forecaster": []}}))
        assert (await refusal(c, "weather"))["message"].startswith("tool 'weather' needs the scope weather:read")
        assert "weather" not in [t["name"] for t in await c.list_tools()]


@pytest.mark.parametrize("guarded", [False, True])
async def test_lists_follow_the_policys_default_level(guarded: bool) -> None:
    # Under the first policy the catalog needs no filtering (nothing guarded), or its anonymous view is cached.
    deck = Deck("defaults")

    @deck.tool
    def plain() -> str:
        return "plain"

    if guarded:

        @deck.tool(security_level=5, scopes=["weather:read"])
        def weather() -> str:
            return "sunny"

    deck.use_policy(Policy({"levels": {"default": 0}}))
    async with client(deck) as c:
        c.session.principal = None
        assert [t["name"] for t in await c.list_tools()] == ["plain"]
        deck.use_policy(Policy({"levels": {"default": 1}}))
        assert [t["name"] for t in await c.list_tools()] == []
        assert not deck.access.can_use(None, deck.tools.get("plain"))
        c.session.principal = Principal("bob")
        assert [t["name"] for t in await c.list_tools()] == ["plain"]


async def test_a_level_1_item_is_listed_to_the_authenticated_only() -> None:
    deck = Deck("members")

    @deck.tool(security_level=1)
    def members() -> str:
        return "members"

    async with client(deck) as c:
        for principal, listed in ((Principal("bob"), ["members"]), (None, []), (Principal("bob"), ["members"])):
            c.session.principal = principal
            assert [t["name"] for t in await c.list_tools()] == listed


async def test_lists_follow_what_is_registered_after_they_were_first_made() -> None:
    deck = Deck("growing")

    @deck.tool
    def plain() -> str:
        return "plain"

    async with client(deck) as c:
        c.session.principal = None
        assert [t["name"] for t in await c.list_tools()] == ["plain"]

        @deck.tool(security_level=5, scopes=["weather:read"])
        def weather() -> str:
            return "sunny"

        @deck.tool(security_level=5, scopes=["plans:read"])
        def plans() -> str:
            return "plans"

        assert [t["name"] for t in await c.list_tools()] == ["plain"]
        c.session.principal = ALICE
        assert [t["name"] for t in await c.list_tools()] == ["plain", "weather"]
        c.session.principal = Principal("pat", scopes={"plans:read"})
        assert [t["name"] for t in await c.list_tools()] == ["plain", "plans"]


def test_a_change_is_announced_per_visibility_class() -> None:
    deck = deck_with_levels()
    weather = deck.tools.get("weather")
    memo: dict[Any, bool] = {}  # one announcement, its sessions in any order
    assert deck.access.sees_any(ALICE, [weather], memo) is True
    assert deck.access.sees_any(Principal("bob"), [weather], memo) is False
    assert deck.access.sees_any(None, [weather], memo) is False
    memo.clear()
    assert deck.access.sees_any(Principal("bob"), [weather], memo) is False
    assert deck.access.sees_any(ALICE, [weather], memo) is True


@pytest.mark.parametrize(
    ("ago", "runs"),
    [(300, True), (301, False), (-60, True), (-61, False)],  # the window is 300 s; the clock skew allowed 60 s
)
async def test_a_recent_authentication_has_exact_bounds(ago: float, runs: bool) -> None:
    deck = deck_with_levels({"levels": {"recent_auth_seconds": 300, "confirm": False}})
    now = 1_800_000_000.0
    deck.access.clock = lambda: now
    async with client(deck) as c:
        c.session.principal = Principal("dave", scopes={"deploy:write"}, auth_time=now - ago)
        reply = await c.request_raw("tools/call", {"name": "deploy", "arguments": {"target": "prod"}})
    if runs:
        assert reply["result"]["structuredContent"] == {"result": "deployed prod"}
    else:
        assert reply["error"]["message"].startswith("tool 'deploy' needs per-call verification")


async def test_with_confirmation_off_a_client_that_could_confirm_is_not_asked() -> None:
    deck = deck_with_levels({"levels": {"recent_auth_seconds": 300, "confirm": False}})
    asked: list[Any] = []
    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", lambda params: asked.append(params) or confirm_with_the_code(params))
        assert (await refusal(c, "deploy", {"target": "prod"}))["message"] == (
            "tool 'deploy' needs per-call verification (security level 9); it needs a token from an authentication "
            "in the last 300 s"
        )
    assert asked == []


class Questions:
    """Answers confirmations when the test says: each question waits, in the order asked, with the code it shows."""

    def __init__(self) -> None:
        self.waiting: list[tuple[str, asyncio.Future[dict[str, Any]]]] = []
        self.arrived = asyncio.Event()

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        answer = asyncio.get_running_loop().create_future()
        self.waiting.append((confirm_with_the_code(params)["content"]["code"], answer))
        self.arrived.set()
        return await answer

    async def until(self, count: int) -> None:
        async with asyncio.timeout(10):
            while len(self.waiting) < count:
                self.arrived.clear()
                await self.arrived.wait()


async def with_the_first_calls_code(first: tuple[Any, str, dict[str, Any]], second: tuple[Any, str, dict[str, Any]],
                                    between: Any = None) -> dict[str, Any]:  # fmt: skip
    """Start two calls (client, tool, arguments) that each wait for their confirmation, the second after ``between()``;
    answer the second with the code shown for the first; the second's result."""
    questions = Questions()
    calls = []
    for number, (c, name, arguments) in enumerate((first, second), 1):
        c.on_request("elicitation/create", questions)
        if number == 2 and between is not None:
            between()
        calls.append(asyncio.ensure_future(c.call_tool(name, arguments)))
        await questions.until(number)
    (code, first_answer), (_, second_answer) = questions.waiting
    second_answer.set_result({"action": "accept", "content": {"code": code}})
    result: dict[str, Any] = await calls[1]
    first_answer.set_result({"action": "cancel"})
    await calls[0]
    return result


NOT_THIS_CALL = "tool 'deploy' was not run: the confirmation code does not match this call"


async def test_a_code_shown_to_one_identity_does_not_confirm_the_same_call_of_another() -> None:
    # Same subject, same tool, same arguments: only the identity differs (an API key and a JWT both named erin).
    deck = deck_with_levels()
    async with (
        client(deck, capabilities={"elicitation": {}}) as key,
        client(deck, capabilities={"elicitation": {}}) as j,
    ):
        key.session.principal = Principal("erin", scopes={"deploy:write"})
        j.session.principal = Principal("erin", scopes={"deploy:write"}, method="jwt", issuer="https://id.example")
        result = await with_the_first_calls_code((key, "deploy", {"target": "prod"}), (j, "deploy", {"target": "prod"}))
    assert result["content"][0]["text"] == NOT_THIS_CALL


async def test_a_code_shown_for_one_tool_does_not_confirm_another_with_the_same_arguments() -> None:
    deck = deck_with_levels()

    @deck.tool(security_level=9, scopes=["deploy:write"], version="2.1.0")
    def destroy(target: str) -> str:
        return f"destroyed {target}"

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        result = await with_the_first_calls_code((c, "deploy", {"target": "prod"}), (c, "destroy", {"target": "prod"}))
    assert result["content"][0]["text"] == "tool 'destroy' was not run: the confirmation code does not match this call"


async def test_a_code_shown_for_one_version_does_not_confirm_the_next() -> None:
    deck = deck_with_levels()

    def upgrade() -> None:
        deck.remove_tool("deploy")

        @deck.tool(name="deploy", security_level=9, scopes=["deploy:write"], version="2.2.0")
        def deploy_v2(target: str) -> str:
            return f"deployed {target} the new way"

    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        call = (c, "deploy", {"target": "prod"})
        result = await with_the_first_calls_code(call, call, between=upgrade)
    assert result["content"][0]["text"] == NOT_THIS_CALL


async def test_a_cancelled_call_spends_the_code_it_showed() -> None:
    deck = deck_with_levels()
    questions = Questions()
    async with client(deck, capabilities={"elicitation": {}}) as c:
        c.session.principal = Principal("erin", scopes={"deploy:write"})
        c.on_request("elicitation/create", questions)
        first = asyncio.ensure_future(c.request_raw("tools/call", {"name": "deploy", "arguments": {"target": "prod"}},
                                                    id="first"))  # fmt: skip
        await questions.until(1)
        c.notify("notifications/cancelled", {"requestId": "first", "reason": "the user closed the dialog"})
        second = asyncio.ensure_future(c.call_tool("deploy", {"target": "prod"}))
        await questions.until(2)
        questions.waiting[1][1].set_result({"action": "accept", "content": {"code": questions.waiting[0][0]}})
        assert (await second)["content"][0]["text"] == NOT_THIS_CALL
        questions.waiting[0][1].set_result({"action": "cancel"})  # the client's answer to a question withdrawn
        first.cancel()  # a cancelled request is never answered
