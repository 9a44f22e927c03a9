"""Prompts built from functions: wire forms, names, argument checks and conversions, completers."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from annotated_types import Ge
from pydantic import Field

from mcp_schema import check
from tooldeck.model.completion import Completer, complete
from tooldeck.prompts.prompt import Prompt, check_arguments, prompt_from_function
from tooldeck.protocol.errors import INVALID_PARAMS, InvalidParamsError, RegistrationError

VERSION = "2025-11-25"


class Context:
    """Stands for the server's injected context class."""


class Tone(enum.Enum):
    FORMAL = "formal"
    CASUAL = "casual"


def review(
    code: str,
    language: Literal["python", "go"] = "python",
    comments: Annotated[int, Ge(1)] = 3,
    tone: Tone = Tone.FORMAL,
    strict: bool = False,
    focus: Annotated[str, Field(title="Focus area", description="What to look at first.")] = "bugs",
) -> str:
    """Review a piece of code.

    Args:
        code: The code to review.
        comments: How many comments to make.
    """
    return code


def test_wire_form_from_the_function() -> None:
    prompt = prompt_from_function(review)
    assert prompt.wire == {
        "name": "review",
        "description": "Review a piece of code.",
        "arguments": [
            {"name": "code", "description": "The code to review.", "required": True},
            {"name": "language", "required": False},
            {"name": "comments", "description": "How many comments to make.", "required": False},
            {"name": "tone", "required": False},
            {"name": "strict", "required": False},
            {"name": "focus", "title": "Focus area", "description": "What to look at first.", "required": False},
        ],
    }
    assert prompt.required == ("code",) and prompt.is_async is False and prompt.fn is review
    check(VERSION, "Prompt", prompt.wire)
    check(VERSION, "ListPromptsResult", {"prompts": [prompt.wire]})


def test_wire_form_carries_every_option() -> None:
    async def greet() -> str:
        return "hi"

    prompt = prompt_from_function(
        greet,
        name="greet.v2",
        title="Greeting",
        description="Say hello.",
        icons=[{"src": "data:image/svg+xml;base64,PHN2Zy8+", "sizes": ["any"]}],
        meta={"com.example/x": 1},
    )
    assert prompt.wire == {
        "name": "greet.v2",
        "title": "Greeting",
        "description": "Say hello.",
        "icons": [{"src": "data:image/svg+xml;base64,PHN2Zy8+", "sizes": ["any"]}],
        "_meta": {"com.example/x": 1},
    }
    assert prompt.is_async is True and prompt.arguments == [] and isinstance(prompt, Prompt)
    check(VERSION, "Prompt", prompt.wire)


def test_injected_parameters_are_not_arguments() -> None:
    def with_context(topic: str, ctx: Context) -> str:
        return topic

    prompt = prompt_from_function(with_context, injectable=(Context,))
    assert prompt.arguments == [{"name": "topic", "required": True}]
    assert prompt.injected == {"ctx": Context}


@pytest.mark.parametrize("name", ["review", "code.review", "code-review_2", "x" * 128])
def test_valid_names(name: str) -> None:
    assert prompt_from_function(review, name=name).name == name


@pytest.mark.parametrize("name", ["", "x" * 129, "code review", "review/2", "<lambda>"])
def test_invalid_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(RegistrationError) as info:
        prompt_from_function(review, name=name)
    assert str(info.value) == (f"invalid prompt name {name!r}: use 1-128 characters from A-Z a-z 0-9 _ - . (no spaces)")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"title": 1}, "prompt 'review': title must be a string, got int"),
        ({"meta": {1: "x"}}, "prompt 'review': meta must be a dict with string keys"),
        (
            {"icons": [{"src": "javascript:alert(1)"}]},
            "prompt 'review': icons[0].src must be an https:, http: or data:",
        ),
        ({"complete": {"nope": ["a"]}}, "prompt 'review': complete names unknown argument 'nope' (arguments: code, "),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        prompt_from_function(review, **options)
    assert message in str(info.value)


def test_unusable_functions_are_refused() -> None:
    def star(*topics: str) -> str:
        return ""

    with pytest.raises(RegistrationError, match="prompt 'star': .*\\*topics is not supported"):
        prompt_from_function(star)
    with pytest.raises(RegistrationError, match="a prompt must be callable, got int"):
        prompt_from_function(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"code": "x = 1"}, {"code": "x = 1"}),
        (
            {"code": "x", "language": "go", "comments": "5", "tone": "casual", "strict": "true", "focus": "style"},
            {"code": "x", "language": "go", "comments": 5, "tone": Tone.CASUAL, "strict": True, "focus": "style"},
        ),
    ],
)
def test_check_arguments_converts_to_the_declared_types(arguments: dict[str, str], expected: dict[str, Any]) -> None:
    assert check_arguments(prompt_from_function(review), arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Missing required argument 'code' for prompt 'review'"),
        (None, "Missing required argument 'code' for prompt 'review'"),
        ({"language": "go"}, "Missing required argument 'code' for prompt 'review'"),
        (
            {"code": "x", "lang": "go"},
            "Unknown argument 'lang' for prompt 'review' (it takes: code, language, comments, tone, strict, focus)",
        ),
        (
            ["x"],
            "Invalid arguments for prompt 'review': expected an object mapping argument names to strings, got [\"x\"]",
        ),
        ({"code": 3}, "Invalid arguments for prompt 'review': argument values are strings; 'code' is 3"),
        (
            {"code": "x", "comments": "many"},
            "Invalid arguments for prompt 'review': $.comments: expected integer, got \"many\"",
        ),
        (
            {"code": "x", "comments": "0"},
            "Invalid arguments for prompt 'review': $.comments: expected a number >= 1, got 0",
        ),
        (
            {"code": "x", "language": "rust"},
            'Invalid arguments for prompt \'review\': $.language: expected one of "python", "go", got "rust"',
        ),
        (
            {"code": "x", "tone": "rude"},
            'Invalid arguments for prompt \'review\': $.tone: expected one of "formal", "casual", got "rude"',
        ),
        (
            {"code": "x", "strict": "yes"},
            "Invalid arguments for prompt 'review': $.strict: expected boolean, got \"yes\"",
        ),
    ],
)
def test_check_arguments_refuses_with_invalid_params(arguments: Any, message: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        check_arguments(prompt_from_function(review), arguments)
    assert info.value.message == message
    assert info.value.code == INVALID_PARAMS == info.value.to_error()["code"]


def test_several_missing_arguments_are_named_together() -> None:
    def pair(first: str, second: str) -> str:
        return first + second

    with pytest.raises(InvalidParamsError, match="Missing required arguments 'first', 'second' for prompt 'pair'"):
        check_arguments(prompt_from_function(pair), {})


def test_a_prompt_without_arguments() -> None:
    def hello() -> str:
        return "hi"

    prompt = prompt_from_function(hello)
    assert check_arguments(prompt, {}) == {} and check_arguments(prompt, None) == {}
    with pytest.raises(
        InvalidParamsError, match="Unknown argument 'x' for prompt 'hello' \\(it takes: no arguments\\)"
    ):
        check_arguments(prompt, {"x": "1"})


async def test_completers_default_to_listed_values_and_can_be_given() -> None:
    def files(value: str, context: dict[str, str]) -> list[str]:
        return [f"{context.get('language', '?')}:{value}"]

    prompt = prompt_from_function(review, complete={"code": files, "language": ["python", "go", "rust"]})
    assert sorted(prompt.completers) == ["code", "language", "strict", "tone"]
    assert prompt.completers["tone"] == Completer(
        choices=("formal", "casual"), label="prompt 'review', argument 'tone'"
    )
    assert prompt.completers["language"].choices == ("python", "go", "rust")  # given beats derived
    result = await complete(prompt.completers["code"], "ma", {"language": "go"})
    assert result == {"values": ["go:ma"], "total": 1, "hasMore": False}
    check(VERSION, "CompleteResult", {"completion": result})
    assert await complete(prompt.completers["strict"], "t", {}) == {"values": ["true"], "total": 1, "hasMore": False}
