"""Tests for schema/convert.py: JSON values -> declared Python types, and the orjson default hook."""

import collections.abc as cabc
import dataclasses
import datetime as dt
import decimal
import pathlib
import typing
import uuid
from typing import Annotated, Any, Literal, NamedTuple, Optional, TypedDict

import orjson
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from samples import Color, Level
from tooldeck.protocol.errors import ConversionError, SchemaError, TooldeckError
from tooldeck.schema.convert import converter_for
from tooldeck.schema.jsonvalue import json_default, json_value


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


@dataclasses.dataclass
class Node:
    name: str
    children: list["Node"] = dataclasses.field(default_factory=list)
    color: Color = Color.RED


@dataclasses.dataclass
class Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("value must not be negative")


@dataclasses.dataclass
class Circle:
    radius: float


@dataclasses.dataclass
class Square:
    side: float


class Pair(NamedTuple):
    left: int
    right: dt.date | None = None


class Plain(TypedDict):
    name: str
    count: int


class Stamped(TypedDict, total=False):
    name: str
    when: dt.datetime
    children: list["Stamped"]


class Model(pydantic.BaseModel):
    name: str
    at: dt.date


class UserId(str):
    pass


@pytest.mark.parametrize(
    "tp",
    [
        str,
        bool,
        None,
        type(None),
        Any,
        object,
        dict,
        list,
        dict[str, Any],
        dict[str, list[str]],
        list[dict[str, str]],
        cabc.Sequence[str],
        cabc.Mapping[str, bool],
        Optional[str],
        bool | str | None,
        Literal["a", "b"],
        Annotated[str, "described"],
        Annotated[object, {"type": "object"}],
        typing.TypeVar("T"),
    ],
    ids=repr,
)
def test_json_native_types_need_no_converter(tp: Any) -> None:
    assert converter_for(tp) is None


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (int, 10.0, 10),
        (int, 7, 7),
        (Optional[int], 1e1, 10),
        (int | str | None, 3.0, 3),
        (Annotated[int, "described"], 2.0, 2),
        (dict[str, list[int]], {"a": [1.0, 2]}, {"a": [1, 2]}),
        (cabc.Mapping[str, int], {"a": 4.0}, {"a": 4}),
        (Plain, {"name": "n", "count": 5.0}, {"name": "n", "count": 5}),
    ],
    ids=repr,
)
def test_whole_number_floats_become_the_declared_int(tp: Any, value: Any, expected: Any) -> None:
    # 10, 10.0 and 1e1 are one integer to JSON Schema: the function gets the int it declared, not a float.
    converted = converter_for(tp)(value)  # type: ignore[misc]
    assert converted == expected
    assert repr(converted) == repr(expected)


def test_a_fractional_float_for_an_int_says_so() -> None:
    with pytest.raises(ConversionError, match=r"^\$: expected an integer, got 1.5$"):
        converter_for(int)(1.5)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (float, 3, 3.0),
        (float, 2.5, 2.5),
        (Color, "green", Color.GREEN),
        (Level, 2, Level.HIGH),
        (Literal[Color.RED, "other"], "red", Color.RED),
        (Literal[Color.RED, "other"], "other", "other"),
        (
            dt.datetime,
            "2024-03-01T12:30:00+02:00",
            dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        ),
        (dt.datetime, "2024-03-01T12:30:00Z", dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.UTC)),
        (dt.date, "2024-03-01", dt.date(2024, 3, 1)),
        (dt.time, "12:30:15", dt.time(12, 30, 15)),
        (uuid.UUID, "12345678-1234-5678-1234-567812345678", uuid.UUID("12345678-1234-5678-1234-567812345678")),
        (pathlib.Path, "/tmp/x", pathlib.Path("/tmp/x")),
        (pathlib.PurePosixPath, "a/b", pathlib.PurePosixPath("a/b")),
        (decimal.Decimal, 0.1, decimal.Decimal("0.1")),
        (decimal.Decimal, 7, decimal.Decimal(7)),
        (bytes, "aGVsbG8=", b"hello"),
        (bytearray, "aGk=", bytearray(b"hi")),
        (tuple[int, str], [1, "a"], (1, "a")),
        (tuple[float, ...], [1, 2], (1.0, 2.0)),
        (tuple, [1, "a"], (1, "a")),
        (tuple[()], [], ()),
        (set[str], ["a", "b", "a"], {"a", "b"}),
        (frozenset[Color], ["red"], frozenset({Color.RED})),
        (set, [1], {1}),
        (list[float], [1, 2.5], [1.0, 2.5]),
        (list[dt.date], ["2024-01-01"], [dt.date(2024, 1, 1)]),
        (dict[str, dt.date], {"a": "2024-01-01"}, {"a": dt.date(2024, 1, 1)}),
        (dict[Color, int], {"red": 1}, {Color.RED: 1}),
        (dict[int, str], {"1": "a", "-2": "b"}, {1: "a", -2: "b"}),
        (Point, {"x": 1}, Point(1.0, 0.0)),
        (Point, {"x": 1, "y": 2, "unknown": 3}, Point(1.0, 2.0)),
        (Node, {"name": "a", "children": [{"name": "b", "color": "green"}]}, Node("a", [Node("b", [], Color.GREEN)])),
        (Pair, {"left": 1}, Pair(1)),
        (Pair, {"left": 1, "right": "2024-01-01"}, Pair(1, dt.date(2024, 1, 1))),
        (
            Stamped,
            {"name": "a", "when": "2024-01-01T00:00:00", "children": [{"when": "2024-01-02T00:00:00"}], "extra": 1},
            {
                "name": "a",
                "when": dt.datetime(2024, 1, 1),
                "children": [{"when": dt.datetime(2024, 1, 2)}],
                "extra": 1,
            },
        ),
        (Model, {"name": "m", "at": "2024-01-01"}, Model(name="m", at=dt.date(2024, 1, 1))),
        (Optional[dt.date], None, None),
        (Optional[dt.date], "2024-01-01", dt.date(2024, 1, 1)),
        (float | None, 1, 1.0),
        (int | float, 1, 1),
        (int | float, 1.5, 1.5),
        (dt.date | str, "not a date", "not a date"),
        (str | dt.date, "2024-01-01", "2024-01-01"),
        (dt.date | str, "2024-01-01", dt.date(2024, 1, 1)),
        (Point | list[Point], [{"x": 1}], [Point(1.0)]),
        (Point | list[Point], {"x": 1}, Point(1.0)),
        (Circle | Square, {"side": 2}, Square(2.0)),
        (Circle | Square, {"radius": 1}, Circle(1.0)),
        (Annotated[dt.date, "when"], "2024-01-01", dt.date(2024, 1, 1)),
        (UserId, "u1", UserId("u1")),
    ],
    ids=repr,
)
def test_conversions(tp: Any, value: Any, expected: Any) -> None:
    convert = converter_for(tp)
    assert convert is not None
    result = convert(value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("tp", "value", "message"),
    [
        (dt.datetime, "tomorrow", '$: expected an ISO 8601 date-time, got "tomorrow"'),
        (list[dt.date], ["2024-01-01", "x"], '$[1]: expected an ISO 8601 date, got "x"'),
        (dict[str, uuid.UUID], {"odd key": "nope"}, '$["odd key"]: expected a UUID, got "nope"'),
        (Color, "blue", '$: expected one of "red", "green", got "blue"'),
        (bytes, "***", '$: expected base64-encoded data, got "***"'),
        (float, "1", '$: expected a number, got "1"'),
        (decimal.Decimal, True, "$: expected a number, got true"),
        (tuple[int, int], [1], "$: expected 2 items, got 1"),
        (Point, {"y": 1}, "$: missing required property 'x'"),
        (Point, [1], "$: expected an object, got [1]"),
        (
            Node,
            {"name": "a", "children": [{"name": "b", "color": "blue"}]},
            '$.children[0].color: expected one of "red", "green", got "blue"',
        ),
        (Checked, {"value": -1}, "$: invalid Checked: value must not be negative"),
        (Model, {"name": "m", "at": "x"}, "$.at: Input should be a valid date or datetime, input is too short"),
        (Model, {"at": "x"}, "$.name: Field required (and 1 more)"),
        (Optional[dt.date], 3, "$: expected a string or null, got 3"),
        (dt.date | float, [], "$: expected a string or a number, got []"),
        (dt.date | dt.time, "x", '$: expected an ISO 8601 date, got "x"'),
        (dict[int, str], {"a": "b"}, '$: expected an integer key, got "a"'),
        (set[Any], [[1]], "$: expected hashable items, got [[1]]"),
    ],
    ids=repr,
)
def test_conversion_errors(tp: Any, value: Any, message: str) -> None:
    convert = converter_for(tp)
    assert convert is not None
    with pytest.raises(ConversionError) as info:
        convert(value)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, TooldeckError)


def test_unknown_class_cannot_be_converted() -> None:
    class Opaque:
        pass

    with pytest.raises(SchemaError, match="cannot convert JSON values to .*Opaque"):
        converter_for(Opaque)
    assert converter_for(Annotated[Opaque, {"type": "object"}]) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({1, 3, 2}, b"[1,2,3]"),
        (frozenset({"b", "a"}), b'["a","b"]'),
        (decimal.Decimal("1.10"), b"1.10"),
        (decimal.Decimal("1E+3"), b"1E+3"),
        (pathlib.PurePosixPath("/a/b"), b'"/a/b"'),
        (b"hi", b'"aGk="'),
        (bytearray(b"hi"), b'"aGk="'),
        (Pair(1, dt.date(2024, 1, 2)), b'{"left":1,"right":"2024-01-02"}'),
        (Model(name="m", at=dt.date(2024, 1, 2)), b'{"name":"m","at":"2024-01-02"}'),
        ({"nested": [Point(1.0)], "tags": {"x"}}, b'{"nested":[{"x":1.0,"y":0.0}],"tags":["x"]}'),
    ],
    ids=repr,
)
def test_json_default(value: Any, expected: bytes) -> None:
    assert orjson.dumps(value, default=json_default) == expected


@pytest.mark.parametrize("value", [object(), decimal.Decimal("NaN"), decimal.Decimal("Infinity"), 1j])
def test_json_default_refuses_the_rest(value: Any) -> None:
    with pytest.raises(TypeError):
        json_default(value)


def test_json_value() -> None:
    assert json_value((1, Color.RED, dt.date(2024, 1, 1))) == (True, [1, "red", "2024-01-01"])
    assert json_value(object()) == (False, None)


@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(), st.dates())))
def test_round_trip_through_json(rows: list[tuple[int, str, dt.date]]) -> None:
    """Python value -> JSON (json_default) -> converter -> the same Python value."""
    tp = list[tuple[int, str, dt.date]]
    convert = converter_for(tp)
    assert convert is not None
    assert convert(orjson.loads(orjson.dumps(rows, default=json_default))) == rows


@given(st.sets(st.decimals(min_value=-(10**9), max_value=10**9, places=3)))
def test_decimal_round_trip(values: set[decimal.Decimal]) -> None:
    # Within float precision: orjson parses JSON numbers as floats, so 17+ significant digits would not survive.
    convert = converter_for(set[decimal.Decimal])
    assert convert is not None
    assert convert(orjson.loads(orjson.dumps(values, default=json_default))) == values


@given(st.binary())
def test_bytes_round_trip(data: bytes) -> None:
    convert = converter_for(bytes)
    assert convert is not None
    assert convert(orjson.loads(orjson.dumps(data, default=json_default))) == data
