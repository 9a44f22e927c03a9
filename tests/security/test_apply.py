"""apply_policy end to end, over the in-process client (schema-checked): the audit trail's records of allowed, refused
and rate-limited calls (with redacted arguments, and a chain that verifies), a second policy replacing the first's
steps, the sanitiser (on by default, off by the policy, the size cap, links), and the input limits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from helpers import client
from tooldeck import Context, Deck, ResourceLink
from tooldeck.security.apply import AuditGate, CallAuditor, InputStep, Sanitiser
from tooldeck.security.audit_verify import verify
from tooldeck.security.levels import AccessControl
from tooldeck.security.principal import Principal

LOGIN_SCHEMA = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "pin": {"type": "string", "format": "password"},
        "password": {"type": "string"},
        "options": {"type": "object"},
    },
    "required": ["user", "pin", "password"],
}


def policy(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def audited_deck() -> Deck:
    deck = Deck("audited")

    @deck.tool(input_schema=LOGIN_SCHEMA)
    def login(user: str, pin: str, password: str, options: dict[str, Any] | None = None) -> str:
        return f"welcome {user}"

    @deck.tool(security_level=5, scopes=["vault:read"], version="1.2.0")
    def vault(item: str) -> str:
        return f"the {item}"

    return deck


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_allowed_refused_and_rate_limited_calls_are_each_audited_once(tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    deck = audited_deck()
    deck.apply_policy(
        policy(
            tmp_path,
            f"""
[limits]
per_tool = "1/hour"

[audit]
file = "{trail}"
redact = ["password"]
""",
        )
    )
    arguments = {"user": "ada", "pin": "1234", "password": "hunter2", "options": {"Password": "x", "keep": 1}}
    async with client(deck) as c:
        c.session.principal = Principal("ada", method="jwt")
        session = c.session.key
        allowed = await c.call_tool("login", arguments)
        assert allowed == {
            "content": [{"type": "text", "text": "welcome ada"}],
            "structuredContent": {"result": "welcome ada"},
            "isError": False,
        }
        refused = await c.request_raw("tools/call", {"name": "vault", "arguments": {"item": "key"}})
        reason = "tool 'vault' needs the scope vault:read (security level 5); ask for a token that grants vault:read"
        assert refused["error"] == {"code": -32000, "message": reason}
        limited = await c.call_tool("login", arguments)
        assert limited["isError"] is True
        assert limited["_meta"]["tooldeck/retryAfter"] > 0
    deck.apply_policy(policy(tmp_path, "", "empty.toml"))  # replaces the audit trail: its sink is closed (drained)
    allowed_record, refused_record, limited_record = records(trail)
    redacted = {
        "user": "ada",
        "pin": "[redacted]",
        "password": "[redacted]",
        "options": {"Password": "[redacted]", "keep": 1},
    }
    common = {"event": "call", "principal": "ada", "auth": "jwt", "session": session}
    assert {key: allowed_record[key] for key in (*common, "request_id")} == {**common, "request_id": 2}
    assert allowed_record | {"time": "", "duration_ms": 0, "arguments_digest": ""} == {
        **allowed_record,
        **common,
        "seq": 0,
        "tool": "login",
        "version": None,
        "security_level": 0,
        "decision": "allowed",
        "reason": None,
        "outcome": "ok",
        "arguments": redacted,
        "time": "",
        "duration_ms": 0,
        "arguments_digest": "",
    }
    text = trail.read_text()  # the secrets as JSON strings: a bare "1234" may well occur inside a hash
    assert '"hunter2"' not in text and '"1234"' not in text and '"x"' not in text
    assert {
        key: refused_record[key]
        for key in (
            "seq",
            "tool",
            "version",
            "security_level",
            "decision",
            "reason",
            "outcome",
            "principal",
            "arguments",
        )
    } == {
        "seq": 1,
        "tool": "vault",
        "version": "1.2.0",
        "security_level": 5,
        "decision": "refused",
        "reason": reason,
        "outcome": "refused",
        "principal": "ada",
        "arguments": {"item": "key"},
    }
    assert {key: limited_record[key] for key in ("seq", "tool", "decision", "outcome", "arguments")} == {
        "seq": 2,
        "tool": "login",
        "decision": "refused",
        "outcome": "refused",
        "arguments": redacted,
    }
    assert limited_record["reason"] == limited["content"][0]["text"]
    assert re.fullmatch(r"Rate limit exceeded \(per tool: 1/hour\); retry in 3[56]\d\d\.\d s", limited_record["reason"])
    assert allowed_record["arguments_digest"] == limited_record["arguments_digest"]  # of the redacted form
    report = verify([trail])
    assert report.ok and report.records == 3, report.problem


async def test_an_anonymous_refusal_of_a_resource_is_audited_but_reads_are_not(tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    deck = audited_deck()
    deck.add_resource("notes://open", "open notes")
    deck.add_resource("notes://secret", "secret notes", security_level=2)
    deck.apply_policy(policy(tmp_path, f'[audit]\nfile = "{trail}"\n'))
    async with client(deck) as c:
        c.session.principal = None
        assert (await c.request("resources/read", {"uri": "notes://open"}))["contents"][0]["text"] == "open notes"
        refused = await c.request_raw("resources/read", {"uri": "notes://secret"})
        assert refused["error"]["code"] == -32000
    deck.apply_policy(policy(tmp_path, "", "empty.toml"))
    (record,) = records(trail)
    assert {key: record[key] for key in ("tool", "principal", "auth", "security_level", "decision", "outcome")} == {
        "tool": "resource:notes://secret",
        "principal": None,
        "auth": None,
        "security_level": 2,
        "decision": "refused",
        "outcome": "refused",
    }
    assert verify([trail]).ok


def own_limit(request: Any, call: Any) -> None:
    """A deck's own limit step: applying policies leaves it where it is."""


def test_applying_a_policy_again_replaces_its_steps(tmp_path: Path) -> None:
    deck = audited_deck()
    pipeline = deck.pipeline  # the default policy's steps: input limits and the sanitiser
    assert [type(step) for step in (*pipeline.limiters, *pipeline.sanitisers)] == [InputStep, Sanitiser]
    assert pipeline.auditors == []
    deck.pipeline.limiters.append(own_limit)
    full = policy(tmp_path, f'[limits]\nglobal = "100/s"\n[audit]\nfile = "{tmp_path / "a.jsonl"}"\n', "full.toml")
    for _ in range(3):
        deck.apply_policy(full)
        assert [type(step) for step in pipeline.limiters[:1]] == [InputStep]
        assert len(pipeline.limiters) == 3 and pipeline.limiters[-1] is own_limit
        assert [type(step) for step in pipeline.sanitisers] == [Sanitiser]
        assert [type(step) for step in pipeline.auditors] == [CallAuditor]
        assert [type(step) for step in pipeline.authorizers] == [AuditGate, AccessControl]  # the trail's gate first
        assert pipeline.authorizers[1] is deck.access
    first_sink = deck._security.sink
    deck.apply_policy(policy(tmp_path, "[sanitise]\nenabled = false\n", "off.toml"))
    assert deck.pipeline.limiters == [own_limit]
    assert deck.pipeline.sanitisers == [] and deck.pipeline.auditors == []
    assert deck.pipeline.authorizers == [deck.access]
    assert first_sink._closed
    deck.apply_policy(policy(tmp_path, "", "empty.toml"))
    assert [type(step) for step in deck.pipeline.limiters] == [InputStep, type(own_limit)]
    assert [type(step) for step in deck.pipeline.sanitisers] == [Sanitiser]


HOSTILE = "\x1b[31mred\x1b[0m\u202e"


def sanitiser_deck() -> Deck:
    deck = Deck("sanitised")

    @deck.tool(output_schema=False)
    def shout() -> str:
        return HOSTILE

    @deck.tool(output_schema=False)
    def long() -> str:
        return "x" * 1000

    @deck.tool(output_schema=False)
    def links() -> list[ResourceLink]:
        return [
            ResourceLink("notes://today", "today"),
            ResourceLink("javascript:alert(1)", "click me"),
            ResourceLink("https://example.com/a", "web"),
        ]

    @deck.tool
    def echo(value: Any = None) -> str:
        return "echoed"

    @deck.tool
    def table(rows: int = 300) -> dict[str, list[int]]:
        return {"rows": list(range(rows))}

    @deck.resource("notes://today")
    def today() -> str:
        return HOSTILE

    return deck


async def test_the_sanitiser_is_on_by_default_and_off_by_the_policy(tmp_path: Path) -> None:
    deck = sanitiser_deck()
    async with client(deck) as c:
        assert (await c.call_tool("shout"))["content"] == [{"type": "text", "text": "red"}]
        assert (await c.request("resources/read", {"uri": "notes://today"}))["contents"][0]["text"] == "red"
    deck.apply_policy(policy(tmp_path, "[sanitise]\nenabled = false\n"))
    async with client(deck) as c:
        assert (await c.call_tool("shout"))["content"] == [{"type": "text", "text": HOSTILE}]
        assert (await c.request("resources/read", {"uri": "notes://today"}))["contents"][0]["text"] == HOSTILE


@pytest.mark.parametrize(
    ("oversize", "expected"),
    [
        ("truncate", None),
        (
            "error",
            {"content": [{"type": "text", "text": "Tool result too large: 1,055 bytes (limit 200)"}], "isError": True},
        ),
    ],
)
async def test_max_result_bytes_cuts_a_call_result(tmp_path: Path, oversize: str, expected: Any) -> None:
    deck = sanitiser_deck()
    deck.apply_policy(policy(tmp_path, f'[sanitise]\nmax_result_bytes = 200\noversize = "{oversize}"\n'))
    async with client(deck) as c:
        result = await c.call_tool("long")
    if expected is not None:
        assert result == expected
        return
    size = len(orjson.dumps({"content": [{"type": "text", "text": "x" * 1000}], "isError": False}))  # uncut
    assert size == 1055
    cut, notice = result["content"]
    assert notice == {"type": "text", "text": "[truncated: the result was 1,055 bytes, the limit is 200]"}
    assert cut["type"] == "text" and set(cut["text"]) == {"x"} and 0 < len(cut["text"]) < 200
    assert result["isError"] is False
    assert len(orjson.dumps(result)) <= 200


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("limit", [150, 400, 1000, 1500])
async def test_a_structured_result_over_max_result_bytes_is_the_documented_error_in_both_eras(
    tmp_path: Path, era: str, limit: int
) -> None:
    # Before: 400-1500 bytes kept the whole structuredContent beside a cut text block; 150 bytes gave an error.
    from server.test_stateless import Driver

    deck = sanitiser_deck()
    deck.apply_policy(policy(tmp_path, f"[sanitise]\nmax_result_bytes = {limit}\n"))
    if era == "2026-07-28":
        result = (await Driver(deck).request(1, "tools/call", {"name": "table"}))["result"]
        assert result.pop("resultType") == "complete"  # the envelope's members, added after the cap
        assert set(result.pop("_meta")) == {"io.modelcontextprotocol/serverInfo"}
    else:
        async with client(deck) as c:
            result = await c.call_tool("table")
    size = len(orjson.dumps({"content": [{"type": "text", "text": orjson.dumps({"rows": list(range(300))}).decode()}],
                             "structuredContent": {"rows": list(range(300))}, "isError": False}))  # fmt: skip
    assert result == {"content": [{"type": "text", "text": f"Tool result too large: {size:,} bytes (limit {limit:,}); a "
                                   "result with structuredContent is not truncated, as a cut value could break its "
                                   "outputSchema"}], "isError": True}  # fmt: skip
    async with client(deck) as c:
        small = await c.call_tool("table", {"rows": 3})  # under the limit: whole
    assert small["structuredContent"] == {"rows": [0, 1, 2]} and small["content"][0]["text"] == '{"rows":[0,1,2]}'


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_input_limits_refuse_deep_arguments_naming_the_limit(tmp_path: Path) -> None:
    deck = sanitiser_deck()
    async with client(deck) as c:
        assert (await c.call_tool("echo", {"value": nested(30)}))["isError"] is False
        refused = await c.call_tool("echo", {"value": nested(40)})
        assert refused["isError"] is True
        assert refused["content"][0]["text"] == (
            "Invalid arguments for tool 'echo': arguments nest deeper than 32 levels at $.value" + "[0]" * 31
        )
    deck.apply_policy(policy(tmp_path, "[sanitise]\nmax_depth = 3\n"))
    async with client(deck) as c:
        assert (await c.call_tool("echo", {"value": nested(2)}))["isError"] is False
        refused = await c.call_tool("echo", {"value": nested(3)})
        assert refused["content"][0]["text"] == (
            "Invalid arguments for tool 'echo': arguments nest deeper than 3 levels at $.value[0][0]"
        )


async def test_links_to_the_decks_own_resources_survive_and_javascript_does_not() -> None:
    deck = sanitiser_deck()
    async with client(deck) as c:
        result = await c.call_tool("links")
    assert result["content"] == [
        {"type": "resource_link", "uri": "notes://today", "name": "today"},
        {"type": "text", "text": "[link removed: scheme 'javascript' is not allowed]"},
        {"type": "resource_link", "uri": "https://example.com/a", "name": "web"},
    ]


def test_applying_an_audited_policy_again_does_not_pile_up_services(tmp_path: Path) -> None:
    deck = audited_deck()
    audited = policy(tmp_path, f'[audit]\nfile = "{tmp_path / "a.jsonl"}"\n')
    for _ in range(3):
        deck.apply_policy(audited)
    assert len(deck.services) == 1  # the closer of each replaced sink goes with it
    deck.apply_policy(policy(tmp_path, "", "empty.toml"))
    assert deck.services == []


async def test_each_round_of_a_2026_07_28_call_is_audited_the_asking_ones_as_input_required(tmp_path: Path) -> None:
    from server.test_stateless import Driver

    trail = tmp_path / "audit.jsonl"
    deck = Deck("rounds-audited")

    @deck.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {(answer.content or {}).get('name')}!"

    deck.apply_policy(policy(tmp_path, f'[audit]\nfile = "{trail}"\n'))
    driver = Driver(deck)
    caps = {"elicitation": {}}
    first = (await driver.request(1, "tools/call", {"name": "greet", "arguments": {}}, capabilities=caps))["result"]
    answers = {"input-1": {"action": "accept", "content": {"name": "Ada"}}}
    retry = {"name": "greet", "arguments": {}, "inputResponses": answers, "requestState": first["requestState"]}
    done = (await driver.request(2, "tools/call", retry, capabilities=caps))["result"]
    assert done["content"][0]["text"] == "Hello, Ada!"
    deck.apply_policy(policy(tmp_path, "", "empty.toml"))  # closes (drains) the trail
    asked, answered = records(trail)
    assert (asked["request_id"], asked["tool"], asked["decision"], asked["outcome"]) == (
        1,
        "greet",
        "allowed",
        "input_required",
    )
    assert (answered["request_id"], answered["outcome"], answered["prev"] != asked["prev"]) == (2, "ok", True)
