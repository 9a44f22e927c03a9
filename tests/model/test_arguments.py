"""String arguments -> declared types: what each annotation accepts, what it refuses, and the messages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal, Optional

import pytest
from annotated_types import Ge, MaxLen

from samples import Color, Level
from tooldeck.model.arguments import ArgumentError, choices, string_converters
from tooldeck.schema.generate import inspect_function


@dataclass
class Point:
    x: int
    y: int


def convert(annotation: Any, text: str) -> Any:
    """Convert ``text`` for a parameter ``value: annotation``."""

    def fn(value: Any) -> None: ...

    fn.__annotations__ = {"value": annotation}
    converters = string_converters(inspect_function(fn))
    return converters["value"](text) if "value" in converters else text


@pytest.mark.parametrize(
    ("annotation", "text", "expected"),
    [
        (int, "42", 42),
        (int, "-7", -7),
        (float, "2.5", 2.5),
        (float, "3", 3.0),
        (float, "1e3", 1000.0),
        (bool, "true", True),
        (bool, "false", False),
        (bool, "True", True),
        (Color, "green", Color.GREEN),
        (Level, "2", Level.HIGH),
        (Literal["a", "b"], "b", "b"),
        (Literal[1, 2], "2", 2),
        (Optional[int], "5", 5),
        (Optional[int], "null", None),
        (str | None, "null", "null"),  # a string is read as itself first
        (int | str, "5", "5"),
        (list[int], "[1, 2]", [1, 2]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (date, "2025-11-25", date(2025, 11, 25)),
        (Annotated[int, Ge(0)], "0", 0),
        (Any, "anything", "anything"),
        (Annotated[str, MaxLen(3)], "abc", "abc"),
    ],
)
def test_text_becomes_the_declared_type(annotation: Any, text: str, expected: Any) -> None:
    value = convert(annotation, text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("annotation", "text", "message"),
    [
        (int, "many", '$.value: expected integer, got "many"'),
        (int, "1.5", '$.value: expected integer, got "1.5"'),
        (int, "", '$.value: expected integer, got ""'),
        (float, "nan", '$.value: expected number, got "nan"'),
        (bool, "yes", '$.value: expected boolean, got "yes"'),
        (Color, "blue", '$.value: expected one of "red", "green", got "blue"'),
        (Literal["a", "b"], "c", '$.value: expected one of "a", "b", got "c"'),
        (Annotated[int, Ge(0)], "-1", "$.value: expected a number >= 0, got -1"),
        (Annotated[str, MaxLen(3)], "abcd", '$.value: expected at most 3 characters, got "abcd"'),
        (list[int], "[1, 'x']", "$.value: expected array, got \"[1, 'x']\""),
        (list[int], '[1, "x"]', '$.value[1]: expected integer, got "x"'),
        (date, "tomorrow", '$.value: expected an ISO 8601 date, got "tomorrow"'),
    ],
)
def test_text_that_does_not_fit_is_refused_with_its_path(annotation: Any, text: str, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        convert(annotation, text)
    assert str(info.value) == message


def test_plain_strings_need_no_converter() -> None:
    def fn(a: str, b: Annotated[str, "described"], c: str = "x", d: int = 1) -> None: ...

    assert list(string_converters(inspect_function(fn))) == ["d"]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (Color, ("red", "green")),
        (Level, ("1", "2")),
        (Literal["a", "b"], ("a", "b")),
        (Literal["only"], ("only",)),
        (bool, ("true", "false")),
        (int, None),
        (str, None),
        (Optional[Color], None),
    ],
)
def test_choices(annotation: Any, expected: tuple[str, ...] | None) -> None:
    def fn(value: Any) -> None: ...

    fn.__annotations__ = {"value": annotation}
    schema = inspect_function(fn).input_schema
    assert choices(schema["properties"]["value"], schema.get("$defs", {})) == expected
