"""What a tool returns, and what a client sends, at the edges: numbers JSON cannot carry, lone surrogates, integers
sent as whole-number floats, oversized batches."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from helpers import Harness, client
from tooldeck import Deck


@dataclass
class Reading:
    value: float


def edge_deck() -> Deck:
    deck = Deck("edges", max_batch=5)

    @deck.tool
    def limit(n: int) -> int:
        assert type(n) is int  # the tool gets the int it declared
        return n

    @deck.tool
    def infinite() -> float:
        return math.inf

    @deck.tool
    def nan_inside() -> Reading:
        return Reading(math.nan)

    @deck.tool(output_schema=False)
    def broken_text() -> str:
        return "half a pair: \ud83d."

    @deck.tool
    def broken_structured() -> str:
        return "\udfff"

    return deck


async def test_a_whole_number_float_for_an_int_parameter_is_that_int() -> None:
    async with client(edge_deck()) as c:
        assert (await c.call_tool("limit", {"n": 1e1}))["structuredContent"] == {"result": 10}
        assert (await c.call_tool("limit", {"n": 10.0}))["structuredContent"] == {"result": 10}
        refused = await c.call_tool("limit", {"n": 1.5})
        assert refused["isError"] and "$.n" in refused["content"][0]["text"]
        huge = await c.call_tool("limit", {"n": 1e300})
        assert huge["isError"] and "too large to be exact" in huge["content"][0]["text"]


async def test_nan_and_infinity_in_output_are_named() -> None:
    async with client(edge_deck()) as c:
        result = await c.call_tool("infinite")
        assert result["isError"]
        assert "$.result: inf is not a JSON number (JSON has no NaN or infinity)" in result["content"][0]["text"]
        result = await c.call_tool("nan_inside")
        assert "$.value: nan is not a JSON number" in result["content"][0]["text"]


async def test_a_lone_surrogate_in_output_is_replaced_and_the_response_survives() -> None:
    async with client(edge_deck()) as c:
        result = await c.call_tool("broken_text")
        assert result == {"content": [{"type": "text", "text": "half a pair: \ufffd."}], "isError": False}
        result = await c.call_tool("broken_structured")
        assert not result.get("isError") and result["structuredContent"] == {"result": "\ufffd"}


def test_a_batch_over_the_limit_is_refused_whole_with_a_clear_error() -> None:
    harness = Harness(edge_deck())
    harness.initialize("2025-03-26")
    (reply,) = harness.send([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(6)])
    assert reply == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": "Invalid request: a batch of 6 messages exceeds the limit of 5; send it in smaller batches",
        },
    }
    (answers,) = harness.send([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(5)])
    assert [a["id"] for a in answers] == [0, 1, 2, 3, 4]


def test_the_default_batch_limit_is_a_thousand() -> None:
    assert Deck("d").options.max_batch == 1000


def plain_deck() -> Deck:
    deck = Deck("plain")

    @deck.tool
    def flag(value: int) -> bool:
        return value  # type: ignore[return-value]  # an int where a boolean was promised

    @deck.tool
    def count(value: bool) -> int:
        return value  # a boolean where an integer was promised

    @deck.tool
    def short(text: str) -> Annotated[str, Field(max_length=3)]:
        return text

    @deck.tool
    def text(value: str) -> str:
        return value

    return deck


async def test_a_wrapped_scalar_is_checked_unless_its_type_is_all_the_schema_asks() -> None:
    deck = plain_deck()
    assert [deck.tools.get(name).plain_output for name in ("flag", "count", "short", "text")] == [
        bool, int, None, str]  # fmt: skip
    async with client(deck) as c:
        assert (await c.call_tool("text", {"value": "hi"}))["structuredContent"] == {"result": "hi"}
        assert (await c.call_tool("flag", {"value": 1}))["isError"]  # 1 is no boolean in JSON Schema
        assert (await c.call_tool("count", {"value": True}))["isError"]  # nor true an integer
        assert (await c.call_tool("short", {"text": "abc"}))["structuredContent"] == {"result": "abc"}
        refused = await c.call_tool("short", {"text": "abcd"})
        assert refused["isError"] and "expected at most 3 characters" in refused["content"][0]["text"]
