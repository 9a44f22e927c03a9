"""Property tests: whatever arrives, the session never crashes, and every request gets exactly one answer."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import Harness, client, init_params
from tooldeck import Deck

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ids = st.integers(min_value=-(2**53), max_value=2**53) | st.text(max_size=8)
methods = st.sampled_from(
    ["ping", "tools/list", "tools/call", "logging/setLevel", "initialize", "resources/list", "nope", ""]
)
params = st.none() | st.dictionaries(st.sampled_from(["name", "arguments", "cursor", "level", "_meta"]), json_values)


@st.composite
def messages(draw: Any) -> Any:
    kind = draw(st.sampled_from(["request", "notification", "response", "junk"]))
    if kind == "junk":
        return draw(json_values)
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"]))}
    if kind == "request":
        message["id"] = draw(ids)
    if kind in ("request", "notification"):
        message["method"] = draw(methods)
        p = draw(params)
        if p is not None:
            message["params"] = p
    else:
        message["id"] = draw(ids)
        message["result"] = {}
    return message


def make_deck() -> Deck:
    deck = Deck("props", page_size=2)

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    @deck.tool
    def greet(name: str = "world") -> str:
        return f"hello {name}"

    return deck


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(messages(), max_size=8), st.booleans())
def test_random_messages_never_crash_the_session(batch: list[Any], initialize_first: bool) -> None:
    harness = Harness(make_deck())  # every emitted message is checked against the official schema
    if initialize_first:
        harness.initialize()
    for message in batch:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            continue  # needs an event loop: covered by the async property below
        replies = harness.send(message)
        is_request = (
            isinstance(message, dict)
            and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str)
            and "id" in message
        )
        if is_request or not isinstance(message, dict):
            assert len(replies) == 1, (message, replies)
        if isinstance(message, dict) and "id" not in message and "method" in message:
            assert replies == [] or ("error" in replies[0] and message.get("jsonrpc") != "2.0"), (message, replies)
    assert harness.request("ping", id="final-ping")["result"] == {}


call_arguments = st.dictionaries(st.sampled_from(["a", "b", "name", "x"]), json_values, max_size=3)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "greet", "missing"]), call_arguments), max_size=6))
def test_random_tool_calls_each_get_exactly_one_answer(calls: list[tuple[str, dict[str, Any]]]) -> None:
    async def scenario() -> None:
        async with client(make_deck()) as c:
            responses = await asyncio.gather(
                *(c.request_raw("tools/call", {"name": name, "arguments": arguments}) for name, arguments in calls)
            )
            for (name, _), response in zip(calls, responses, strict=True):
                if name == "missing":
                    assert response["error"]["code"] == -32602
                else:
                    assert isinstance(response["result"]["isError"], bool)
            assert c.unrouted == []

    asyncio.run(scenario())


def test_notifications_with_ids_are_requests_and_get_answers() -> None:
    harness = Harness(make_deck())
    harness.initialize()
    (reply,) = harness.send({"jsonrpc": "2.0", "id": 3, "method": "notifications/initialized"})
    assert reply["error"]["code"] == -32601


def test_an_initialize_reply_is_valid_for_every_revision() -> None:
    for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
        harness = Harness(make_deck())
        reply = harness.request("initialize", init_params(version))
        assert orjson.loads(orjson.dumps(reply))["result"]["protocolVersion"] == version
