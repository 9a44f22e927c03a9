"""subscriptions/listen against the sans-IO session (server/subscriptions.py): the acknowledgement first, the filter
honoured, the subscriptionId on every message, one bus publication reaching a 2025 session and a modern listener,
resource updates only for subscribed URIs the principal may read, cancellation freeing everything, no logs on the
stream. Every message is checked against the 2026-07-28 schema (the Driver's WireChecker), which also holds that
each list_changed/updated/acknowledged carries its subscriptionId and no progress or log does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eras import era_deck, modern
from helpers import Harness
from server.test_stateless import Driver
from tooldeck import Deck
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal

SUB = "io.modelcontextprotocol/subscriptionId"
ACK = "notifications/subscriptions/acknowledged"
ALL = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}


def guarded_deck() -> Deck:
    deck = era_deck()
    deck.add_resource("test://secret", "classified", description="Level 5.", security_level=5, scopes=["weather:read"])
    return deck


async def listen(driver: Driver, request_id: Any, notifications: dict[str, Any], **envelope: Any) -> list[Any]:
    """Open a listen stream; its first message (the acknowledgement)."""
    message = modern(request_id, "subscriptions/listen", {"notifications": notifications}, **envelope)
    driver.checker.sent(message)
    start = len(driver.out)
    driver.session.receive_stateless(message)
    return await next_messages(driver, start)


async def next_messages(driver: Driver, start: int, count: int = 1) -> list[Any]:
    async with asyncio.timeout(5):
        while len(driver.out) < start + count:
            driver.arrived.clear()
            await driver.arrived.wait()
    return driver.out[start:]


async def settle() -> None:
    """Let a burst of registry changes be announced (the server publishes them on the next loop turns)."""
    for _ in range(3):
        await asyncio.sleep(0)


def cancel(driver: Driver, request_id: Any) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
    driver.session.receive_stateless(note)


def tagged(method: str, subscription: Any, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": {**(params or {}), "_meta": {SUB: subscription}}}


async def test_the_acknowledgement_comes_first_and_names_what_is_honoured() -> None:
    driver = Driver(era_deck())
    sent = await listen(driver, 7, {"toolsListChanged": True, "promptsListChanged": False,
                                    "resourceSubscriptions": ["test://static-text", "test://nowhere"]})  # fmt: skip
    assert sent == [tagged(ACK, 7, {"notifications": {"toolsListChanged": True,
                                                      "resourceSubscriptions": ["test://static-text"]}})]  # fmt: skip


async def test_types_the_server_does_not_offer_are_left_out_of_the_acknowledgement() -> None:
    deck = Deck("bare", version="1.0.0")

    @deck.tool
    def noop() -> str:
        """Nothing."""
        return ""

    driver = Driver(deck)
    sent = await listen(driver, "s", {**ALL, "resourceSubscriptions": ["test://static-text"]})
    assert sent == [tagged(ACK, "s", {"notifications": {"toolsListChanged": True}})]


async def test_only_what_the_filter_asked_for_is_sent_each_tagged_with_its_id() -> None:
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, "prompts-only", {"promptsListChanged": True})
    start = len(driver.out)
    deck.add_tool(lambda: "hi", name="hello")  # a tool-list change must not leak onto a prompts-only stream
    deck.add_resource("test://more", "more", description="More.")
    await settle()
    assert driver.out[start:] == []
    deck.add_prompt(lambda: "hi", name="greet", description="Greets.")
    assert await next_messages(driver, start) == [tagged("notifications/prompts/list_changed", "prompts-only")]


async def test_one_publication_reaches_a_2025_session_and_modern_listeners() -> None:
    deck = era_deck()
    legacy = Harness(deck)
    legacy.initialize()
    legacy.out.clear()
    driver = Driver(deck)
    await listen(driver, 1, {"toolsListChanged": True})
    await listen(driver, "two", {"toolsListChanged": True, "resourcesListChanged": True})
    start = len(driver.out)
    deck.add_tool(lambda: "hi", name="hello")
    got = await next_messages(driver, start, 2)
    assert got == [tagged("notifications/tools/list_changed", 1), tagged("notifications/tools/list_changed", "two")]
    assert legacy.out == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]  # unchanged for 2025


async def test_resource_updates_only_for_subscribed_uris_and_what_is_under_them() -> None:
    deck = era_deck()
    legacy = Harness(deck)
    legacy.initialize()
    assert legacy.request("resources/subscribe", {"uri": "test://template/1/data"}, id="sub")["result"] == {}
    legacy.out.clear()
    driver = Driver(deck)
    await listen(driver, 3, {"resourceSubscriptions": ["test://static-text", "test://template/1/data"]})
    start = len(driver.out)
    deck.notify_resource_updated("test://template/2/data")  # subscribed by nobody
    assert driver.out[start:] == [] and legacy.out == []
    deck.notify_resource_updated("test://static-text")
    deck.notify_resource_updated("test://template/1/data")
    assert driver.out[start:] == [
        tagged("notifications/resources/updated", 3, {"uri": "test://static-text"}),
        tagged("notifications/resources/updated", 3, {"uri": "test://template/1/data"}),
    ]
    assert legacy.out == [{"jsonrpc": "2.0", "method": "notifications/resources/updated",
                           "params": {"uri": "test://template/1/data"}}]  # fmt: skip


@pytest.mark.parametrize(
    ("principal", "sees"),
    [
        (None, False),
        (Principal("ada", scopes=frozenset()), False),
        (Principal("ada", scopes=frozenset({"weather:read"})), True),
    ],
)
async def test_updates_of_a_guarded_resource_reach_only_a_principal_who_may_read_it(principal: Any, sees: bool) -> None:
    deck = guarded_deck()
    driver = Driver(deck, principal=principal)
    ack = await listen(driver, 1, {"toolsListChanged": True, "resourceSubscriptions": ["test://secret"]})
    assert ack[0]["params"]["notifications"]["resourceSubscriptions"] == (["test://secret"] if sees else [])
    start = len(driver.out)
    deck.notify_resource_updated("test://secret")
    deck.add_tool(lambda: "hi", name="hello")  # a list_changed says nothing secret: everyone who asked gets it
    expected = [tagged("notifications/tools/list_changed", 1)]
    if sees:
        expected.insert(0, tagged("notifications/resources/updated", 1, {"uri": "test://secret"}))
    assert await next_messages(driver, start, len(expected)) == expected


async def test_a_resource_replaced_by_a_guarded_one_stops_its_updates() -> None:
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, 1, {"resourceSubscriptions": ["test://static-text"]})
    deck.remove_resource("test://static-text")
    deck.add_resource("test://static-text", "now secret", security_level=5, scopes=["weather:read"])
    start = len(driver.out)
    deck.notify_resource_updated("test://static-text")
    assert driver.out[start:] == []


async def test_cancelling_ends_the_stream_and_frees_its_subscriptions() -> None:
    deck = era_deck()
    driver = Driver(deck)
    before = (deck.bus.subscribers("list_changed"), deck.bus.subscribers("resource_updated"))
    for request_id in range(3):
        await listen(driver, request_id, {**ALL, "resourceSubscriptions": ["test://static-text"]})
    assert len(deck.listeners) == 3
    assert deck.bus.subscribers("list_changed") == before[0] + 3
    for request_id in range(3):
        cancel(driver, request_id)
    await settle()
    assert len(deck.listeners) == 0
    assert (deck.bus.subscribers("list_changed"), deck.bus.subscribers("resource_updated")) == before
    assert driver.session.in_flight == {}
    start = len(driver.out)
    deck.add_tool(lambda: "hi", name="hello")
    deck.notify_resource_updated("test://static-text")
    await settle()
    assert driver.out[start:] == []  # nothing after the cancellation, not even a response


async def test_closing_the_connection_ends_every_stream() -> None:
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, 1, ALL)
    tasks = driver.session.close()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert len(deck.listeners) == 0
    assert deck.bus.subscribers("list_changed") == 0  # the connection's own subscription went with it


# The work of a request cancelled before its task ran is never started (for any request): its coroutine is dropped.
@pytest.mark.filterwarnings("ignore:coroutine '(Listener.run|finishing)' was never awaited:RuntimeWarning")
async def test_a_stream_cancelled_before_it_starts_leaves_nothing_behind() -> None:
    deck = era_deck()
    driver = Driver(deck)
    message = modern(5, "subscriptions/listen", {"notifications": ALL})
    driver.checker.sent(message)
    driver.session.receive_stateless(message)
    cancel(driver, 5)
    await settle()
    assert driver.out == [] and len(deck.listeners) == 0 and deck.bus.subscribers("list_changed") == 1
    driver.checker.expect_no_messages()


async def test_a_stream_the_server_ends_gets_its_result() -> None:
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, "bye", {"toolsListChanged": True})
    start = len(driver.out)
    deck.listeners.end_all()
    [result] = await next_messages(driver, start)
    assert result["id"] == "bye"
    assert result["result"]["resultType"] == "complete"
    assert result["result"]["_meta"][SUB] == "bye"
    assert len(deck.listeners) == 0 and deck.bus.subscribers("list_changed") == 1  # the connection's own


@pytest.mark.parametrize("envelope", [{}, {"logLevel": "debug"}])
async def test_no_log_or_progress_ever_goes_on_a_listen_stream(envelope: dict[str, Any]) -> None:
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, "l", ALL, **envelope)
    # a request that logs, on the same connection: its logs (only with its own logLevel) are its own, untagged
    logged = await driver.exchange(modern(2, "tools/call", {"name": "steps"}, logLevel="debug", progressToken=1))
    assert [m.get("method") for m in logged] == ["notifications/progress", "notifications/message",
                                                 "notifications/progress", None]  # fmt: skip
    silent = await driver.exchange(modern(3, "tools/call", {"name": "steps"}))
    assert [m.get("method") for m in silent] == [None]
    assert not any(SUB in m.get("params", {}).get("_meta", {}) for m in logged + silent)
    tagged_messages = [m for m in driver.out if SUB in m.get("params", {}).get("_meta", {})]
    assert [m["method"] for m in tagged_messages] == [ACK]


@pytest.mark.parametrize(
    ("notifications", "where"),
    [
        (None, "$.params.notifications"),
        ([], "$.params.notifications"),
        ({"toolsListChanged": "yes"}, "$.params.notifications.toolsListChanged"),
        ({"resourceSubscriptions": "test://static-text"}, "$.params.notifications.resourceSubscriptions"),
        ({"resourceSubscriptions": [3]}, "$.params.notifications.resourceSubscriptions[0]"),
    ],
)
async def test_a_malformed_filter_is_invalid_params(notifications: Any, where: str) -> None:
    driver = Driver(era_deck())
    params = {} if notifications is None else {"notifications": notifications}
    reply = await driver.request(1, "subscriptions/listen", params)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"].endswith(f"at {where}")
    assert len(driver.session.server.listeners) == 0


async def test_discover_advertises_the_notifications_listen_serves() -> None:
    driver = Driver(era_deck())
    capabilities = (await driver.request(1, "server/discover"))["result"]["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}


async def test_a_stream_message_without_its_subscription_id_fails_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_schema import collect, verify
    from tooldeck.server import subscriptions

    monkeypatch.setattr(subscriptions, "SUBSCRIPTION_ID", "planted/elsewhere")  # every message loses its id
    deck = era_deck()
    driver = Driver(deck)
    await listen(driver, 1, {"toolsListChanged": True})
    start = len(driver.out)
    deck.add_tool(lambda: "hi", name="hello")
    await next_messages(driver, start)
    pattern = r"stateless.Driver: a notifications/subscriptions/acknowledged without its subscriptionId"
    with pytest.raises(AssertionError, match=pattern):
        verify(collect())


async def test_a_stream_ends_when_the_token_it_was_opened_with_expires() -> None:
    import time

    driver = Driver(era_deck(), principal=Principal("ada", expires_at=time.time() + 0.05))
    sent = await driver.exchange(modern("L", "subscriptions/listen", {"notifications": ALL}))
    assert sent[0]["method"] == ACK
    assert sent[-1] == {
        "jsonrpc": "2.0",
        "id": "L",
        "result": {"resultType": "complete", "_meta": sent[-1]["result"]["_meta"]},
    }
    assert sent[-1]["result"]["_meta"][SUB] == "L"


# --- list_changed only for what a principal can see (a policy's hide_unusable) ------------------------------------

TOOLS_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
NOBODY, ANN, OLGA = None, Principal("ann", scopes=frozenset()), Principal("olga", scopes=frozenset({"ops:write"}))
WHO = [(NOBODY, False), (ANN, False), (OLGA, True)]  # who can see a level-5 tool that needs ops:write


def secret() -> str:
    """Needs ops:write."""
    return "secret"


def legacy_session(deck: Deck, principal: Any) -> Harness:
    harness = Harness(deck)
    harness.session.principal = principal
    harness.initialize()
    harness.out.clear()
    return harness


@pytest.mark.parametrize(("principal", "sees"), WHO, ids=["anonymous", "no scope", "scoped"])
def test_a_2025_session_hears_of_a_tool_only_if_it_can_see_it(principal: Any, sees: bool) -> None:
    deck = era_deck()
    legacy = legacy_session(deck, principal)
    deck.add_tool(secret, name="secret", security_level=5, scopes=["ops:write"])
    assert legacy.out == ([TOOLS_CHANGED] if sees else [])
    listed = [t["name"] for t in legacy.request("tools/list", id=2)["result"]["tools"]]
    assert ("secret" in listed) is sees  # what it was told matches what it is listed
    legacy.out.clear()
    deck.remove_tool("secret")
    assert legacy.out == ([TOOLS_CHANGED] if sees else [])
    deck.add_tool(lambda: "hi", name="hello")  # a change everyone sees
    assert legacy.out == [TOOLS_CHANGED] * (2 if sees else 1)


def test_everyone_hears_of_every_change_when_nothing_is_hidden() -> None:
    deck = era_deck()
    deck.apply_policy(Policy({"levels": {"hide_unusable": False}}))
    legacy = legacy_session(deck, NOBODY)
    deck.add_tool(secret, name="secret", security_level=5, scopes=["ops:write"])
    assert legacy.out == [TOOLS_CHANGED]


def test_a_tool_replaced_by_one_a_session_cannot_see_is_a_change_it_hears_of() -> None:
    deck = Deck("defs", version="1.0.0")

    @deck.implements("ops.run")
    def run() -> str:
        return "ran"

    definition = {"id": "ops", "name": "Ops", "version": "1.0.0", "description": "Runs things.", "securityLevel": 0,
                  "capabilities": [{"name": "run", "description": "Runs.", "parameters": []}]}  # fmt: skip
    deck.manager.register(definition)
    everyone, scoped = legacy_session(deck, ANN), legacy_session(deck, OLGA)
    guarded = definition | {"version": "2.0.0", "securityLevel": 5, "scopes": ["ops:write"]}
    deck.manager.upgrade(guarded)  # ann's list loses ops.run, olga's shows its new version: both hear it
    assert everyone.out == scoped.out == [TOOLS_CHANGED]
    everyone.out.clear(), scoped.out.clear()
    deck.manager.upgrade(guarded | {"version": "2.0.1", "description": "Runs, again."})  # only olga sees ops.run
    assert (everyone.out, scoped.out) == ([], [TOOLS_CHANGED])


@pytest.mark.parametrize(("principal", "sees"), WHO, ids=["anonymous", "no scope", "scoped"])
async def test_a_listen_stream_hears_of_a_tool_only_if_its_principal_can_see_it(principal: Any, sees: bool) -> None:
    deck = era_deck()
    driver = Driver(deck, principal=principal)
    await listen(driver, "L", {"toolsListChanged": True, "promptsListChanged": True})
    start = len(driver.out)
    deck.add_tool(secret, name="secret", security_level=5, scopes=["ops:write"])
    await settle()
    deck.add_prompt(lambda: "hi", name="marker", description="A change everyone sees, after the tool's.")
    expected = [tagged("notifications/prompts/list_changed", "L")]
    if sees:
        expected.insert(0, tagged("notifications/tools/list_changed", "L"))
    assert await next_messages(driver, start, len(expected)) == expected


async def test_a_burst_that_ends_as_it_began_is_not_announced() -> None:
    deck = era_deck()
    driver = Driver(deck, principal=OLGA)
    await listen(driver, "L", {"toolsListChanged": True, "promptsListChanged": True})
    start = len(driver.out)
    deck.add_tool(lambda: "hi", name="fleeting")
    deck.remove_tool("fleeting")  # in the same turn of the loop: one burst, no change
    await settle()
    deck.add_prompt(lambda: "hi", name="marker", description="A change after it.")
    assert await next_messages(driver, start) == [tagged("notifications/prompts/list_changed", "L")]
