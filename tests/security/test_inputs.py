"""Input limits: exactly at each limit passes, one past it is refused with a message naming the limit and the path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tooldeck.protocol.errors import ToolError
from tooldeck.security.inputs import InputLimits


def nested(levels: int, key: str = "a") -> dict[str, Any]:
    """An arguments object ``levels`` objects deep (the arguments themselves are level 1)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {key: value}
    return value


def test_small_arguments_pass() -> None:
    assert InputLimits().check({"a": 1, "b": "text", "c": [1.5, None, True], "d": {"e": "f"}}) is None
    assert InputLimits().check({}) is None


def test_depth_at_the_limit_passes_and_one_past_is_refused_with_its_path() -> None:
    limits = InputLimits(max_depth=4)
    assert limits.check(nested(4)) is None
    assert limits.check(nested(5)) == "arguments nest deeper than 4 levels at $.a.a.a.a"
    assert limits.check({"x": [[[1]]]}) is None
    assert limits.check({"x": [[[[]]]]}) == "arguments nest deeper than 4 levels at $.x[0][0][0]"


def test_the_default_depth_is_32_and_a_deep_path_is_cut() -> None:
    assert InputLimits().check(nested(32)) is None
    message = InputLimits().check(nested(33, key="level"))
    assert message is not None
    assert message.startswith("arguments nest deeper than 32 levels at $.level.level.")
    assert message.endswith("…")
    assert len(message) < 200


def test_very_deep_arguments_do_not_hit_the_recursion_limit() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert InputLimits().check({"x": deep}) == "arguments nest deeper than 32 levels at $.x" + "[0]" * 31
    assert InputLimits(max_depth=10_000_000).check({"x": deep}) is None


def test_string_length_at_the_limit_passes_and_one_past_is_refused() -> None:
    limits = InputLimits(max_string=10)
    assert limits.check({"text": "x" * 10, "list": ["é" * 10]}) is None
    assert limits.check({"text": "x" * 11}) == "string at $.text is 11 characters; the limit is 10"
    assert limits.check({"list": ["ok", "é" * 11]}) == "string at $.list[1] is 11 characters; the limit is 10"
    assert limits.check({"k" * 11: 1}) == "a key in $ is 11 characters; the limit is 10"


def test_the_default_string_limit_is_a_million_characters() -> None:
    assert InputLimits(max_bytes=10**8).check({"text": "x" * 1_000_000}) is None
    message = InputLimits(max_bytes=10**8).check({"text": "x" * 2_000_001})
    assert message == "string at $.text is 2,000,001 characters; the limit is 1,000,000"


def test_size_at_the_limit_passes_and_one_byte_past_is_refused() -> None:
    arguments = {"text": "é\n" * 100, "n": [1, 2.5, None]}
    size = len(orjson.dumps(arguments))
    assert InputLimits(max_bytes=size).check(arguments) is None
    assert (
        InputLimits(max_bytes=size - 1).check(arguments) == f"arguments are {size:,} bytes; the limit is {size - 1:,}"
    )


def test_the_default_size_limit_is_four_mebibytes() -> None:
    arguments = {"parts": ["x" * 1_000_000] * 5}
    size = len(orjson.dumps(arguments))
    assert InputLimits().check(arguments) == f"arguments are {size:,} bytes; the limit is 4,194,304"
    assert size == 5_000_026


def test_hostile_keys_are_shown_cleaned_in_paths() -> None:
    message = InputLimits(max_string=6).check({"\x1b[2J\u202e": "longer!"})
    assert message == 'string at $["\\u001b[2J"] is 7 characters; the limit is 6'


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_limits_must_be_positive_integers(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_depth: expected a positive integer"):
        InputLimits(max_depth=bad)


class FakeCall:
    kind = "tool"
    name = "echo"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments


def test_as_a_pipeline_step_it_refuses_with_a_tool_error() -> None:
    limits = InputLimits(max_string=3)
    limits(None, FakeCall({"a": "abc"}))
    with pytest.raises(ToolError) as info:
        limits(None, FakeCall({"a": "abcd"}))
    assert str(info.value) == "Arguments for tool 'echo' refused: string at $.a is 4 characters; the limit is 3"


# --- as a policy applies them (security/apply.py's InputStep), at every entry point --------------------------------


def limited_deck(sanitise: str) -> Any:
    import tomllib

    from tooldeck import Deck
    from tooldeck.security.policy import Policy

    deck = Deck("limited")
    deck.add_tool(lambda text="": text, name="echo")

    @deck.resource_template("notes://{name}")
    def note(name: str) -> str:
        return name

    @deck.prompt
    def brief(topic: str) -> str:
        return topic

    deck.apply_policy(Policy({"sanitise": tomllib.loads(sanitise)}))
    return deck


@pytest.mark.parametrize(
    ("sanitise", "ok", "refused", "problem"),
    [('max_string = 8', "a" * 8, "a" * 9, "string at $.text is 9 characters; the limit is 8"),
     ('max_argument_bytes = 40', "a" * 20, "a" * 40, "arguments are 51 bytes; the limit is 40")],
)  # fmt: skip
async def test_a_policys_string_and_size_limits_hold_for_flat_arguments(
    sanitise: str, ok: str, refused: str, problem: str
) -> None:
    # Flat arguments (no object or list inside) take a shortcut that only nesting could fail: a policy that makes
    # strings shorter, or arguments smaller, than a message may be must still be enforced on them.
    from helpers import client

    async with client(limited_deck(sanitise)) as c:
        assert (await c.call_tool("echo", {"text": ok}))["isError"] is False
        result = await c.call_tool("echo", {"text": refused})
    assert result["isError"] is True
    assert problem in result["content"][0]["text"], result


@pytest.mark.parametrize(
    ("method", "params", "where"),
    [("resources/read", {"uri": "notes://" + "a" * 9}, "$.name"),
     ("prompts/get", {"name": "brief", "arguments": {"topic": "a" * 9}}, "$.topic")],
)  # fmt: skip
async def test_input_limits_hold_for_resource_reads_and_prompt_gets(method: str, params: Any, where: str) -> None:
    from helpers import client

    async with client(limited_deck("max_string = 8")) as c:
        reply = await c.request_raw(method, params)
    assert reply["error"]["code"] == -32000, reply
    assert f"string at {where} is 9 characters; the limit is 8" in reply["error"]["message"], reply
