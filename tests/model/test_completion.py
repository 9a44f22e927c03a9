"""Completers: building them from ``complete=``, and the completion objects they produce."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_schema import check
from tooldeck.model.completion import MAX_VALUES, Completer, complete, make_completers
from tooldeck.protocol.errors import RegistrationError

LANGUAGES = ["Python", "Perl", "PHP", "Go", "Rust"]


def test_make_completers_from_lists_and_functions() -> None:
    def files(value: str, context: dict[str, str]) -> list[str]:
        return []

    completers = make_completers({"language": LANGUAGES, "file": files}, ["language", "file", "other"], "prompt 'p'")
    assert completers == {
        "language": Completer(choices=tuple(LANGUAGES), label="prompt 'p', argument 'language'"),
        "file": Completer(fn=files, label="prompt 'p', argument 'file'"),
    }
    assert make_completers(None, ["a"], "prompt 'p'") == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"nope": ["a"]}, "prompt 'p': complete names unknown argument 'nope' (arguments: language, file)"),
        (["language"], "prompt 'p': complete must be a dict mapping argument names to a list of values or a function"),
        ({"language": "Python"}, "prompt 'p', argument 'language': complete takes a list of strings or a function"),
        ({"language": ["Python", 3]}, "prompt 'p', argument 'language': completion values must be strings; [1] is 3"),
        ({"language": 3}, "complete takes a list of strings or a function (value, context) -> list[str], got int"),
    ],
)
def test_make_completers_refuses(spec: Any, message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        make_completers(spec, ["language", "file"], "prompt 'p'")
    assert message in str(info.value)


def test_a_completer_has_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one of choices= or fn="):
        Completer()
    with pytest.raises(ValueError, match="exactly one of choices= or fn="):
        Completer(choices=("a",), fn=lambda value, context: [])


@pytest.mark.parametrize(
    ("typed", "values"),
    [
        ("p", ["Python", "Perl", "PHP"]),
        ("PY", ["Python"]),
        ("", LANGUAGES),
        ("x", []),
        ("Python3", []),
    ],
)
async def test_list_completion_is_a_case_insensitive_prefix_filter(typed: str, values: list[str]) -> None:
    completer = make_completers({"language": LANGUAGES}, ["language"], "prompt 'p'")["language"]
    result = await complete(completer, typed, {})
    assert result == {"values": values, "total": len(values), "hasMore": False}
    check("2025-11-25", "CompleteResult", {"completion": result})


async def test_at_most_100_values_with_the_total() -> None:
    many = [f"item{i:03}" for i in range(250)]
    completer = make_completers({"a": many}, ["a"], "prompt 'p'")["a"]
    result = await complete(completer, "item", {})
    assert result == {"values": many[:MAX_VALUES], "total": 250, "hasMore": True}
    check("2025-11-25", "CompleteResult", {"completion": result})
    assert await complete(completer, "item1", {}) == {"values": many[100:200], "total": 100, "hasMore": False}


async def test_functions_get_the_value_and_the_context() -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    def sync(value: str, context: dict[str, str]) -> list[str]:
        seen.append((value, context))
        return [f"{context.get('owner', '?')}/{value}x"]

    async def asynchronous(value: str, context: dict[str, str]) -> list[str]:
        return [value.upper()] * 150

    completers = make_completers({"a": sync, "b": asynchronous}, ["a", "b"], "template 't'")
    assert await complete(completers["a"], "re", {"owner": "me"}) == {
        "values": ["me/rex"],
        "total": 1,
        "hasMore": False,
    }
    assert seen == [("re", {"owner": "me"})]
    assert await complete(completers["a"], "", None) == {"values": ["?/x"], "total": 1, "hasMore": False}
    result = await complete(completers["b"], "q", {})
    assert result == {"values": ["Q"] * 100, "total": 150, "hasMore": True}
    check("2025-11-25", "CompleteResult", {"completion": result})


async def test_no_completer_completes_to_nothing() -> None:
    result = await complete(None, "x", {})
    assert result == {"values": [], "total": 0, "hasMore": False}
    check("2025-11-25", "CompleteResult", {"completion": result})


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("abc", "template 't', argument 'a': the completion function must return a list of strings, got str"),
        (None, "must return a list of strings, got NoneType"),
        (["ok", 2], "template 't', argument 'a': the completion function returned a non-string at [1]: 2"),
    ],
)
async def test_a_function_that_returns_something_else_is_a_type_error(returned: Any, message: str) -> None:
    completer = make_completers({"a": lambda value, context: returned}, ["a"], "template 't'")["a"]
    with pytest.raises(TypeError) as info:
        await complete(completer, "", {})
    assert message in str(info.value)


async def test_tuples_are_accepted_as_lists() -> None:
    completer = make_completers({"a": lambda value, context: ("x", "y")}, ["a"], "template 't'")["a"]
    assert await complete(completer, "", {}) == {"values": ["x", "y"], "total": 2, "hasMore": False}
