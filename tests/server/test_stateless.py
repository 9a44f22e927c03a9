"""The stateless era against the sans-IO session: each 2026-07-28 request served from its own envelope, with no
initialize, through the same handlers and call pipeline as a 2025 session (server/stateless.py,
Session.receive_modern / receive_stateless). Every message is checked against the 2026-07-28 schema."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from eras import MODERN, SERVER_INFO_KEY, era_deck, meta, modern
from mcp_schema import WireChecker
from tooldeck import Deck
from tooldeck.server.session import Session


class Driver:
    """One connection of the modern era: messages in through ``receive_stateless``, checked messages out."""

    def __init__(self, deck: Deck, principal: Any = None) -> None:
        self.checker = WireChecker(MODERN, name="stateless.Driver")
        self.out: list[Any] = []
        self.arrived = asyncio.Event()
        self.session = Session(deck, self._emit, principal=principal)

    def _emit(self, message: Any, related: Any = None) -> None:
        decoded = orjson.loads(orjson.dumps(message))
        self.checker.received(decoded)
        self.out.append(decoded)
        self.arrived.set()

    async def exchange(self, message: dict[str, Any]) -> list[Any]:
        """Send one request; every message up to and including its response."""
        self.checker.sent(message)
        start = len(self.out)
        self.session.receive_stateless(orjson.loads(orjson.dumps(message)))
        async with asyncio.timeout(10):
            while not any(m.get("id") == message["id"] and "method" not in m for m in self.out[start:]):
                self.arrived.clear()
                await self.arrived.wait()
        return self.out[start:]

    async def request(self, request_id: Any, method: str, params: dict[str, Any] | None = None,
                      **envelope: Any) -> dict[str, Any]:  # fmt: skip
        return (await self.exchange(modern(request_id, method, params, **envelope)))[-1]


@pytest.fixture
def driver() -> Driver:
    return Driver(era_deck())


async def test_discover_names_the_modern_versions_capabilities_and_the_server(driver: Driver) -> None:
    result = (await driver.request(1, "server/discover"))["result"]
    assert result == {
        "supportedVersions": [MODERN],
        "capabilities": {
            "logging": {},
            "tools": {"listChanged": True},  # served through subscriptions/listen
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            "extensions": {},
        },
        "instructions": "Serves both eras.",
        "resultType": "complete",
        "ttlMs": 60_000,
        "cacheScope": "public",
        "_meta": {SERVER_INFO_KEY: {"name": "eras", "version": "2.0.0"}},
    }


async def test_discover_is_made_once_and_follows_what_is_registered() -> None:
    deck = Deck("bare")
    deck.add_tool(lambda: "hi", name="hello")
    driver = Driver(deck)
    first = (await driver.request(1, "server/discover"))["result"]
    assert (await driver.request(2, "server/discover"))["result"] == first
    assert "prompts" not in first["capabilities"]
    deck.add_prompt(lambda: "go", name="go")
    later = (await driver.request(3, "server/discover"))["result"]
    assert later["capabilities"]["prompts"] == {"listChanged": True}
    known = (await Driver(deck, principal={"id": "alice"}).request(4, "server/discover"))["result"]
    assert (later["cacheScope"], known["cacheScope"]) == ("public", "private")


async def test_every_listing_and_read_is_complete_and_cacheable(driver: Driver) -> None:
    tools = (await driver.request(1, "tools/list"))["result"]
    # in registration order, every time; the level 5 tool is left out for an anonymous caller, as in 2025 sessions
    assert [t["name"] for t in tools["tools"]] == ["add", "steps", "fail", "ask_name", "think"]
    assert all("execution" not in t for t in tools["tools"])
    for method, key in (("resources/list", "resources"), ("resources/templates/list", "resourceTemplates"),
                        ("prompts/list", "prompts")):  # fmt: skip
        result = (await driver.request(method, method))["result"]
        assert len(result[key]) == 1
        assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 60_000, "public")
    read = (await driver.request(2, "resources/read", {"uri": "test://static-text"}))["result"]
    assert read["contents"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                                 "text": "This is the content of the static text resource."}]  # fmt: skip
    assert (read["ttlMs"], read["cacheScope"]) == (0, "private")
    templated = (await driver.request(3, "resources/read", {"uri": "test://template/123/data"}))["result"]
    assert orjson.loads(templated["contents"][0]["text"]) == {"id": "123", "templateTest": True}


async def test_the_deck_options_choose_the_cache_hints() -> None:
    driver = Driver(era_deck(list_ttl=5, read_ttl=1.5, cache_scope="private"))
    listed = (await driver.request(1, "tools/list"))["result"]
    assert (listed["ttlMs"], listed["cacheScope"]) == (5000, "private")
    read = (await driver.request(2, "resources/read", {"uri": "test://static-text"}))["result"]
    assert (read["ttlMs"], read["cacheScope"]) == (1500, "private")


async def test_calls_prompts_and_completions_are_served_with_their_result_type(driver: Driver) -> None:
    called = (await driver.request(1, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))["result"]
    assert called["structuredContent"] == {"result": 5}
    assert called["resultType"] == "complete" and "ttlMs" not in called
    failed = (await driver.request(2, "tools/call", {"name": "fail"}))["result"]
    assert failed["isError"] is True and failed["content"][0]["text"] == "this tool fails on purpose"
    prompt = (await driver.request(3, "prompts/get", {"name": "review", "arguments": {"language": "rust"}}))["result"]
    assert prompt["messages"][0]["content"]["text"] == "Review this rust code."
    assert prompt["resultType"] == "complete"
    completion = await driver.request(
        4,
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": "p"}},
    )
    assert completion["result"]["completion"]["values"] == ["python", "perl"]
    assert completion["result"]["_meta"][SERVER_INFO_KEY]["name"] == "eras"


async def test_resource_not_found_is_minus_32602_with_the_uri(driver: Driver) -> None:
    missing = await driver.request(1, "resources/read", {"uri": "test://nonexistent"})
    assert missing["error"] == {"code": -32602, "message": "Resource not found: test://nonexistent",
                                "data": {"uri": "test://nonexistent"}}  # fmt: skip


async def test_unknown_tools_and_bad_arguments_are_answered_as_in_2025(driver: Driver) -> None:
    unknown = await driver.request(1, "tools/call", {"name": "nope"})
    assert unknown["error"]["code"] == -32602
    invalid = (await driver.request(2, "tools/call", {"name": "add", "arguments": {"a": "x", "b": 1}}))["result"]
    assert invalid["isError"] is True


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "tasks/get", "tasks/list", "tasks/result", "no/such"])  # fmt: skip
async def test_methods_the_revision_removed_are_minus_32601(driver: Driver, method: str) -> None:
    reply = await driver.request(1, method, {"uri": "test://static-text", "level": "info"})
    assert reply["error"]["code"] == (-32022 if method == "initialize" else -32601), reply


async def test_logs_only_when_the_request_sets_a_log_level_and_progress_by_token(driver: Driver) -> None:
    quiet = await driver.exchange(modern(1, "tools/call", {"name": "steps"}))
    assert [m.get("method") for m in quiet] == [None]  # no progress without a token, no log without a level
    token = {"progressToken": "p1"}
    loud = await driver.exchange(modern(2, "tools/call", {"name": "steps"}, logLevel="info", **token))
    assert [m.get("method") for m in loud] == ["notifications/progress", "notifications/message",
                                               "notifications/progress", None]  # fmt: skip
    assert loud[0]["params"] == {"progressToken": "p1", "progress": 1, "total": 2}
    assert loud[1]["params"] == {"level": "info", "data": "halfway"}
    above = await driver.exchange(modern(3, "tools/call", {"name": "steps"}, logLevel="warning"))
    assert [m.get("method") for m in above] == [None]


@pytest.mark.parametrize(
    ("tool", "capabilities", "required"),
    [
        ("ask_name", {}, {"elicitation": {"form": {}}}),
        ("ask_name", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("think", {}, {"sampling": {}}),
        ("think", {"elicitation": {}}, {"sampling": {}}),
    ],
)
async def test_a_tool_that_asks_the_client_is_minus_32021_with_the_capability_as_an_object(
    driver: Driver, tool: str, capabilities: dict[str, Any], required: dict[str, Any]
) -> None:
    reply = await driver.request(1, "tools/call", {"name": tool}, capabilities=capabilities)
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": required}
    assert [m for m in driver.out if "id" in m and "method" in m] == []  # the server sent no request of its own


async def test_each_request_is_judged_by_its_own_envelope(driver: Driver) -> None:
    assert (await driver.request(1, "tools/list", version="2025-11-25"))["error"]["data"] == {
        "supported": [MODERN], "requested": "2025-11-25"}  # fmt: skip
    no_caps = modern(2, "tools/list")
    del no_caps["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert (await driver.exchange(no_caps))[-1]["error"]["code"] == -32602
    plain = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    assert (await driver.exchange(plain))[-1]["error"]["code"] == -32602
    assert "result" in await driver.request(4, "tools/list")  # nothing of the failures before is remembered
    assert driver.session.initialized is False


async def test_a_level_5_tool_runs_through_the_pipeline_in_a_modern_request() -> None:
    from tooldeck.security.principal import Principal

    anonymous = Driver(era_deck())
    refused = await anonymous.request(1, "tools/call", {"name": "weather"})
    assert refused["error"]["code"] == -32000
    assert "needs an authenticated caller (security level 5)" in refused["error"]["message"]
    without_scope = Driver(era_deck(), principal=Principal("ada", scopes=frozenset()))
    assert "weather:read" in (await without_scope.request(1, "tools/call", {"name": "weather"}))["error"]["message"]
    with_scope = Driver(era_deck(), principal=Principal("ada", scopes=frozenset({"weather:read"})))
    ok = await with_scope.request(1, "tools/call", {"name": "weather"})
    assert ok["result"]["structuredContent"] == {"result": "sunny"}
    listed = (await with_scope.request(2, "tools/list"))["result"]
    assert "weather" in [t["name"] for t in listed["tools"]]
    assert listed["cacheScope"] == "private"  # a known caller: lists may be made for them


def test_meta_helper_builds_the_envelope() -> None:
    assert meta(logLevel="debug")["io.modelcontextprotocol/logLevel"] == "debug"
