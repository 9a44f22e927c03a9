"""Tests for schema/generate.py: type hints -> JSON Schema 2020-12, and reading a tool function."""

import collections.abc as cabc
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import pathlib
import sys
import types
import typing
import uuid
from typing import Annotated, Any, Literal, NamedTuple, NotRequired, Optional, Required, TypedDict, Union

import annotated_types as at
import jsonschema
import jsonschema_rs
import orjson
import pydantic
import pytest

from samples import Color, Level
from tooldeck.protocol.errors import ConversionError, SchemaError
from tooldeck.schema.generate import FunctionShape, inspect_function, type_schema


def check_schema(schema: dict[str, Any]) -> None:
    """Every schema tooldeck produces must be valid 2020-12 for both validators and must encode as JSON."""
    assert jsonschema_rs.meta.is_valid(schema), schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert orjson.loads(orjson.dumps(schema)) == schema


def schema_of(tp: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    defs: dict[str, Any] = {}
    schema = type_schema(tp, defs)
    check_schema({**schema, "$defs": defs} if defs else schema)
    return schema, defs


# -- types used below --------------------------------------------------------------------------------------------


class Mixed(enum.Enum):
    """Values of more than one JSON type."""

    ONE = 1
    TWO = "two"


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Horizontal position.
        y: Vertical position.
    """

    x: float
    y: float = 0.0
    label: str | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    cached: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass
class Node:
    name: str
    children: list["Node"] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Forest:
    trees: list[Node]
    biggest: Node | None = None


class Movie(TypedDict, total=False):
    title: Required[str]
    year: int
    rating: NotRequired[float]


class Book(TypedDict):
    title: str
    isbn: NotRequired[str]


class Pair(NamedTuple):
    left: int
    right: str = "r"


class Address(pydantic.BaseModel):
    street: str
    city: str = "Paris"


class Person(pydantic.BaseModel):
    """Someone."""

    name: str = pydantic.Field(description="Full name")
    address: Address | None = None


class Category(pydantic.BaseModel):
    name: str
    parent: "Category | None" = None


class NotAModel:
    pass


T = typing.TypeVar("T")


@dataclasses.dataclass
class Box(typing.Generic[T]):
    item: T


def _second_point() -> type:
    @dataclasses.dataclass
    class Point:  # same __name__ as the module-level Point, different class
        z: int

    return Point


# -- type_schema: scalars and structures ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (object, {}),
        (dt.datetime, {"type": "string", "format": "date-time"}),
        (dt.date, {"type": "string", "format": "date"}),
        (dt.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (pathlib.Path, {"type": "string"}),
        (pathlib.PurePosixPath, {"type": "string"}),
        (decimal.Decimal, {"type": "number"}),
        (bytes, {"type": "string", "contentEncoding": "base64"}),
        (Optional[int], {"type": ["integer", "null"]}),
        (int | None, {"type": ["integer", "null"]}),
        (Union[int, str, None], {"type": ["integer", "string", "null"]}),
        (int | Any, {}),
        (Optional[dt.date], {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Literal["only"], {"const": "only", "type": "string"}),
        (Literal[1, 2.5], {"enum": [1, 2.5], "type": "number"}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Literal[None], {"const": None, "type": "null"}),
        (Literal[Color.RED], {"const": "red", "type": "string"}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
        (cabc.Sequence[int], {"type": "array", "items": {"type": "integer"}}),
        (cabc.Iterable[str], {"type": "array", "items": {"type": "string"}}),
        (list[Any], {"type": "array"}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (
            tuple[int, str],
            {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2, "maxItems": 2},
        ),
        (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
        (tuple[()], {"type": "array", "maxItems": 0}),
        (tuple, {"type": "array"}),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            cabc.Mapping[str, list[str]],
            {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        ),
        (
            dict[Literal["a", "b"], int],
            {
                "type": "object",
                "propertyNames": {"enum": ["a", "b"], "type": "string"},
                "additionalProperties": {"type": "integer"},
            },
        ),
        (
            dict[int, str],
            {"type": "object", "propertyNames": {"pattern": "^-?[0-9]+$"}, "additionalProperties": {"type": "string"}},
        ),
        (typing.TypeVar("T"), {}),
        (typing.TypeVar("N", bound=int), {"type": "integer"}),
    ],
    ids=repr,
)
def test_type_schema(tp: Any, expected: dict[str, Any]) -> None:
    schema, defs = schema_of(tp)
    assert schema == expected
    assert defs == {}


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (Annotated[int, "How many"], {"type": "integer", "description": "How many"}),
        (Annotated[int, at.Ge(0), at.Lt(10)], {"type": "integer", "minimum": 0, "exclusiveMaximum": 10}),
        (Annotated[float, at.Gt(0), at.Le(1.5)], {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5}),
        (Annotated[int, at.Interval(ge=1, lt=5)], {"type": "integer", "minimum": 1, "exclusiveMaximum": 5}),
        (Annotated[int, at.MultipleOf(3)], {"type": "integer", "multipleOf": 3}),
        (Annotated[str, at.MinLen(1), at.MaxLen(5)], {"type": "string", "minLength": 1, "maxLength": 5}),
        (Annotated[str, at.Len(2, 4)], {"type": "string", "minLength": 2, "maxLength": 4}),
        (
            Annotated[list[int], at.Len(1, 3)],
            {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        ),
        (
            Annotated[dict[str, int], at.MaxLen(2)],
            {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2},
        ),
        (Annotated[Any, at.MinLen(1)], {"minLength": 1, "minItems": 1, "minProperties": 1}),
        (Annotated[int | None, at.Ge(0)], {"type": ["integer", "null"], "minimum": 0}),
        (
            Annotated[list[str] | None, at.MaxLen(2)],
            {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "maxItems": 2},
        ),
        (
            Annotated[str, pydantic.Field(pattern=r"^\d+$", description="digits", title="Code", examples=["12"])],
            {"type": "string", "pattern": r"^\d+$", "description": "digits", "title": "Code", "examples": ["12"]},
        ),
        (Annotated[int, pydantic.Field(ge=1, le=9)], {"type": "integer", "minimum": 1, "maximum": 9}),
        (Annotated[str, {"format": "email"}], {"type": "string", "format": "email"}),
        (Annotated[NotAModel, {"type": "object"}], {"type": "object"}),
        (Annotated[Annotated[int, "inner"], "outer"], {"type": "integer", "description": "outer"}),
        (typing.NewType("UserId", int), {"type": "integer"}),
    ],
    ids=repr,
)
def test_annotated_metadata(tp: Any, expected: dict[str, Any]) -> None:
    schema, _ = schema_of(tp)
    assert schema == expected


def test_enum_is_a_definition() -> None:
    schema, defs = schema_of(Color)
    assert schema == {"$ref": "#/$defs/Color"}
    assert defs == {"Color": {"type": "string", "enum": ["red", "green"]}}


@pytest.mark.parametrize(
    ("tp", "definition"),
    [
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Mixed, {"enum": [1, "two"], "description": "Values of more than one JSON type."}),
    ],
)
def test_enum_definitions(tp: type, definition: dict[str, Any]) -> None:
    _, defs = schema_of(tp)
    assert defs == {tp.__name__: definition}


def test_optional_enum_keeps_the_reference() -> None:
    schema, defs = schema_of(Optional[Color])
    assert schema == {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]}
    assert list(defs) == ["Color"]


def test_dataclass() -> None:
    schema, defs = schema_of(Point)
    assert schema == {"$ref": "#/$defs/Point"}
    assert defs == {
        "Point": {
            "type": "object",
            "description": "A point on the plane.",
            "properties": {
                "x": {"type": "number", "description": "Horizontal position."},
                "y": {"type": "number", "description": "Vertical position.", "default": 0.0},
                "label": {"type": ["string", "null"], "default": None},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["x"],
        }
    }


def test_recursive_dataclass() -> None:
    schema, defs = schema_of(Forest)
    assert schema == {"$ref": "#/$defs/Forest"}
    assert defs == {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        },
        "Forest": {
            "type": "object",
            "properties": {
                "trees": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                "biggest": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}], "default": None},
            },
            "required": ["trees"],
        },
    }
    validator = jsonschema_rs.validator_for({**schema, "$defs": defs})
    assert validator.is_valid({"trees": [{"name": "oak", "children": [{"name": "twig"}]}]})
    assert not validator.is_valid({"trees": [{"name": "oak", "children": [{"name": 3}]}]})


@pytest.mark.parametrize(
    ("tp", "definition"),
    [
        (
            Movie,
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}, "rating": {"type": "number"}},
                "required": ["title"],
            },
        ),
        (
            Book,
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "isbn": {"type": "string"}},
                "required": ["title"],
            },
        ),
        (
            Pair,
            {
                "type": "object",
                "properties": {"left": {"type": "integer"}, "right": {"type": "string", "default": "r"}},
                "required": ["left"],
            },
        ),
    ],
)
def test_typeddict_and_namedtuple(tp: type, definition: dict[str, Any]) -> None:
    schema, defs = schema_of(tp)
    assert schema == {"$ref": f"#/$defs/{tp.__name__}"}
    assert defs == {tp.__name__: definition}


def test_same_class_reuses_its_definition_across_calls() -> None:
    defs: dict[str, Any] = {}
    assert type_schema(Point, defs) == type_schema(Point, defs) == {"$ref": "#/$defs/Point"}
    assert list(defs) == ["Point"]


def test_different_classes_with_one_name_get_a_suffix() -> None:
    defs: dict[str, Any] = {}
    first = type_schema(Point, defs)
    second = type_schema(_second_point(), defs)
    assert first == {"$ref": "#/$defs/Point"}
    assert second == {"$ref": "#/$defs/Point2"}
    assert defs["Point2"] == {"type": "object", "properties": {"z": {"type": "integer"}}, "required": ["z"]}
    check_schema({"$defs": defs})


def test_pydantic_model_definitions_are_merged() -> None:
    schema, defs = schema_of(Person)
    assert schema == {"$ref": "#/$defs/Person"}
    assert defs == {
        "Address": {
            "type": "object",
            "title": "Address",
            "properties": {
                "street": {"type": "string", "title": "Street"},
                "city": {"type": "string", "title": "City", "default": "Paris"},
            },
            "required": ["street"],
        },
        "Person": {
            "type": "object",
            "title": "Person",
            "description": "Someone.",
            "properties": {
                "name": {"type": "string", "title": "Name", "description": "Full name"},
                "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
            },
            "required": ["name"],
        },
    }


def test_recursive_pydantic_model() -> None:
    schema, defs = schema_of(Category)
    assert schema == {"$ref": "#/$defs/Category"}
    assert defs["Category"]["properties"]["parent"] == {
        "anyOf": [{"$ref": "#/$defs/Category"}, {"type": "null"}],
        "default": None,
    }


def test_pydantic_definition_clashing_with_a_dataclass_is_renamed() -> None:
    @dataclasses.dataclass
    class Address:
        line: str

    defs: dict[str, Any] = {}
    type_schema(Address, defs)
    schema = type_schema(Person, defs)
    assert schema == {"$ref": "#/$defs/Person"}
    assert defs["Address"]["properties"] == {"line": {"type": "string"}}
    assert defs["Person"]["properties"]["address"]["anyOf"][0] == {"$ref": "#/$defs/Address2"}
    assert defs["Address2"]["properties"]["street"] == {"type": "string", "title": "Street"}
    check_schema({"$defs": defs})


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (NotAModel, "cannot build a JSON Schema for type NotAModel: NotAModel is a plain class"),
        (cabc.Callable[[int], int], "cannot be passed as JSON"),
        (list[NotAModel], "NotAModel is a plain class"),
        (dict[float, int], "dict keys are strings in JSON"),
        (Literal[b"x"], "Literal value b'x' cannot be written in JSON"),
        (Annotated[int, at.Gt(dt.date(2020, 1, 1))], "is not a number JSON Schema can check"),
        (complex, "complex cannot be passed as JSON"),
        (cabc.Callable, "Callable cannot be passed as JSON"),
        (cabc.Awaitable[int], "Awaitable[int] cannot be passed as JSON"),
        (Box[int], "is not supported; use a concrete (non-generic) class"),
        (Color.RED, "Color.RED: 'red'> is not a type"),
    ],
    ids=repr,
)
def test_unsupported_types(tp: Any, message: str) -> None:
    with pytest.raises(SchemaError, match="cannot build a JSON Schema") as info:
        type_schema(tp, {})
    assert message in str(info.value)


def test_unsupported_field_names_the_field() -> None:
    @dataclasses.dataclass
    class Holder:
        thing: NotAModel

    with pytest.raises(SchemaError) as info:
        type_schema(Holder, {})
    assert str(info.value) == (
        "cannot build a JSON Schema for type "
        "test_unsupported_field_names_the_field.<locals>.Holder, field "
        "test_unsupported_field_names_the_field.<locals>.Holder.thing: NotAModel is a plain class; use a dataclass, "
        "TypedDict, NamedTuple or pydantic model, or describe it with Annotated[..., {<JSON Schema>}]"
    )


def test_unparametrized_generic_dataclass_accepts_anything_for_its_type_variable() -> None:
    _, defs = schema_of(Box)
    assert defs == {"Box": {"type": "object", "properties": {"item": {}}, "required": ["item"]}}


# -- inspect_function: input schema --------------------------------------------------------------------------------


class Context:
    """Stands in for tooldeck's request context."""


class Image:
    """Stands in for an unstructured content class."""


def test_input_schema_for_plain_parameters() -> None:
    def search(query: str, limit: int = 10, exact: bool = False, tags: list[str] | None = None) -> None:
        """Search the catalogue.

        Args:
            query: What to look for.
            limit: At most this many results.
        """

    shape = inspect_function(search)
    assert shape == FunctionShape(
        description="Search the catalogue.",
        parameters=("query", "limit", "exact", "tags"),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "description": "At most this many results.", "default": 10},
                "exact": {"type": "boolean", "default": False},
                "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            },
            "required": ["query"],
        },
        injected={},
        converters={"limit": shape.converters["limit"]},
        output_schema=None,
        wraps_output=False,
    )
    check_schema(shape.input_schema)
    assert shape.converters["limit"](1e1) == 10 and type(shape.converters["limit"](1e1)) is int  # JSON 1e1 is 10


def test_no_parameters_means_an_empty_closed_object() -> None:
    def ping() -> None:
        pass

    shape = inspect_function(ping)
    assert shape.input_schema == {"type": "object", "additionalProperties": False}
    assert shape.parameters == ()
    assert shape.description is None


def test_shapes_compare_and_print_by_value() -> None:
    def ping() -> None:
        pass

    def echo(text: str) -> str:
        return text

    shape = inspect_function(ping)
    assert shape == inspect_function(ping)
    assert shape != inspect_function(echo)
    assert repr(shape) == (
        "FunctionShape(description=None, parameters=(), input_schema={'type': 'object', 'additionalProperties': False}, "
        "injected={}, converters={}, output_schema=None, wraps_output=False)"
    )


def test_only_injected_parameters_means_an_empty_closed_object() -> None:
    def whoami(ctx: Context) -> str:
        return ""

    shape = inspect_function(whoami, injectable=(Context,))
    assert shape.input_schema == {"type": "object", "additionalProperties": False}
    assert shape.injected == {"ctx": Context}


def test_missing_annotation_accepts_anything() -> None:
    def echo(value, note: str = "") -> None:  # type: ignore[no-untyped-def]
        pass

    shape = inspect_function(echo)
    assert shape.input_schema["properties"] == {"value": {}, "note": {"type": "string", "default": ""}}
    assert shape.input_schema["required"] == ["value"]


def test_annotated_description_wins_over_the_docstring() -> None:
    def f(a: Annotated[int, "from Annotated"], b: int) -> None:
        """Do it.

        Args:
            a: from the docstring
            b: only in the docstring
        """

    properties = inspect_function(f).input_schema["properties"]
    assert properties == {
        "a": {"type": "integer", "description": "from Annotated"},
        "b": {"type": "integer", "description": "only in the docstring"},
    }


def test_defs_at_the_root_shared_by_parameters() -> None:
    def plot(start: Point, end: Point, color: Color = Color.RED) -> None:
        pass

    schema = inspect_function(plot).input_schema
    check_schema(schema)
    assert schema["properties"] == {
        "start": {"$ref": "#/$defs/Point"},
        "end": {"$ref": "#/$defs/Point"},
        "color": {"$ref": "#/$defs/Color", "default": "red"},
    }
    assert sorted(schema["$defs"]) == ["Color", "Point"]


@pytest.mark.parametrize(
    ("default", "expected"),
    [
        (None, {"default": None}),
        ((1, 2), {"default": [1, 2]}),
        (Color.GREEN, {"default": "green"}),
        (dt.date(2024, 5, 1), {"default": "2024-05-01"}),
        (Pair(1, "x"), {"default": {"left": 1, "right": "x"}}),
        (object(), {}),  # cannot be written as JSON: left out
        ({1: "a"}, {}),
    ],
    ids=repr,
)
def test_defaults_are_json(default: Any, expected: dict[str, Any]) -> None:
    def f(value: Any = default) -> None:
        pass

    schema = inspect_function(f).input_schema
    assert schema["properties"]["value"] == expected
    assert "required" not in schema
    check_schema(schema)


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (Context, Context),
        (Optional[Context], Context),
        (Annotated[Context, "the context"], Context),
        (Annotated[Context | None, "x"], Context),
    ],
    ids=repr,
)
def test_injected_parameters_leave_the_schema(annotation: Any, expected: type) -> None:
    class SubContext(Context):
        pass

    def f(query: str, ctx: annotation = None) -> None:  # type: ignore[valid-type,assignment]
        pass

    def g(ctx: SubContext, query: str) -> None:
        pass

    shape = inspect_function(f, injectable=(Context,))
    assert shape.injected == {"ctx": expected}
    assert shape.parameters == ("query",)
    assert list(shape.input_schema["properties"]) == ["query"]
    assert inspect_function(g, injectable=(Context,)).injected == {"ctx": SubContext}


def test_converters_only_for_parameters_that_need_them() -> None:
    def f(
        a: str,
        b: int,
        c: bool,
        d: dict[str, list[int]],
        e: Any,
        f: Book,
        g: float,
        h: dt.datetime,
        i: Point,
        j: Color | None = None,
        k: tuple[int, int] = (0, 0),
    ) -> None:
        pass

    shape = inspect_function(f)
    # b and d take integers, which may arrive as whole-number floats (1e1): they are converted to int.
    assert sorted(shape.converters) == ["b", "d", "g", "h", "i", "j", "k"]
    assert shape.converters["d"]({"x": [2.0]}) == {"x": [2]}
    assert shape.converters["h"]("2024-01-02T03:04:05Z") == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert shape.converters["i"]({"x": 1}) == Point(1.0)
    assert shape.converters["k"]([1, 2]) == (1, 2)


def test_all_json_native_function_has_no_converters() -> None:
    def f(a: str, b: bool, c: list[dict[str, Any]], d: bool | None = None, e: Literal["x", "y"] = "x") -> None:
        pass

    assert inspect_function(f).converters == {}


def test_converter_errors_carry_the_parameter_path() -> None:
    def f(when: dt.date, points: list[Point]) -> None:
        pass

    shape = inspect_function(f)
    with pytest.raises(ConversionError) as info:
        shape.converters["when"]("soon")
    assert str(info.value) == '$.when: expected an ISO 8601 date, got "soon"'
    with pytest.raises(ConversionError) as info:
        shape.converters["points"]([{"x": 1}, {"y": 2}])
    assert str(info.value) == "$.points[1]: missing required property 'x'"


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("def f(*args: int) -> None: pass", "*args is not supported; a tool takes named arguments"),
        ("def f(**kwargs: int) -> None: pass", "**kwargs is not supported; a tool takes named arguments"),
        ("def f(a: int, /) -> None: pass", "parameter 'a' is positional-only; a tool takes named arguments"),
    ],
)
def test_parameters_a_tool_cannot_take(declaration: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(declaration, namespace)
    with pytest.raises(SchemaError, match=r"^f: ") as info:
        inspect_function(namespace["f"])
    assert message in str(info.value)


def test_unsupported_parameter_type_names_the_parameter() -> None:
    def f(x: NotAModel) -> None:
        pass

    with pytest.raises(SchemaError) as info:
        inspect_function(f)
    assert str(info.value).startswith(
        "cannot build a JSON Schema for parameter 'x' (type NotAModel): NotAModel is a plain class"
    )


def test_unresolvable_annotation_names_the_function() -> None:
    def f(x: "Missing") -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(SchemaError) as info:
        inspect_function(f)
    assert str(info.value) == (
        "cannot resolve the type hints of test_unresolvable_annotation_names_the_function.<locals>.f: "
        "NameError: name 'Missing' is not defined"
    )


def test_callables_other_than_functions() -> None:
    class Tool:
        def __call__(self, a: int, when: dt.date | None = None) -> int:
            """Add things.

            Args:
                a: first
            """
            return a

    def add(a: int, b: int) -> int:
        return a + b

    instance = inspect_function(Tool())
    assert instance.parameters == ("a", "when")
    assert instance.description == "Add things."
    assert instance.input_schema["properties"]["a"] == {"type": "integer", "description": "first"}
    assert "when" in instance.converters
    partial = inspect_function(functools.partial(add, b=2))
    assert partial.parameters == ("a", "b")
    assert partial.input_schema["required"] == ["a"]
    assert partial.input_schema["properties"]["b"] == {"type": "integer", "default": 2}

    class Bound:
        def method(self, q: str) -> None:
            pass

    assert inspect_function(Bound().method).parameters == ("q",)


def test_class_as_a_tool_uses_its_constructor_and_class_docstring() -> None:
    class Greeter:
        """Greets people.

        Args:
            name: who to greet
        """

        def __init__(self, name: str, loud: bool = False) -> None:
            self.name = name

    shape = inspect_function(Greeter)
    assert shape.description == "Greets people."
    assert shape.input_schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "who to greet"},
            "loud": {"type": "boolean", "default": False},
        },
        "required": ["name"],
    }


FUTURE_MODULE = '''
from __future__ import annotations

import dataclasses
import datetime


@dataclasses.dataclass
class Event:
    name: str
    at: datetime.datetime
    follow_up: Event | None = None


def schedule(event: Event, repeat: int | None = None) -> list[Event]:
    """Schedule an event."""
    return [event]
'''


@pytest.fixture
def future_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("tooldeck_future_tools")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(FUTURE_MODULE, "tooldeck_future_tools.py", "exec"), module.__dict__)
    return module


def test_string_annotations_from_future_import(future_module: types.ModuleType) -> None:
    shape = inspect_function(future_module.schedule)
    assert shape.input_schema == {
        "type": "object",
        "properties": {
            "event": {"$ref": "#/$defs/Event"},
            "repeat": {"type": ["integer", "null"], "default": None},
        },
        "required": ["event"],
        "$defs": {
            "Event": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "at": {"type": "string", "format": "date-time"},
                    "follow_up": {"anyOf": [{"$ref": "#/$defs/Event"}, {"type": "null"}], "default": None},
                },
                "required": ["name", "at"],
            }
        },
    }
    event = shape.converters["event"]({"name": "a", "at": "2024-01-01T00:00:00", "follow_up": None})
    assert event == future_module.Event("a", dt.datetime(2024, 1, 1))
    assert shape.wraps_output is True
    check_schema(shape.input_schema)
    check_schema(shape.output_schema)  # type: ignore[arg-type]


# -- inspect_function: output schema --------------------------------------------------------------------------------


def _returning(annotation: Any) -> cabc.Callable[[], Any]:
    def f() -> None:
        pass

    f.__annotations__["return"] = annotation
    return f


def _wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}


@pytest.mark.parametrize(
    ("annotation", "expected", "wraps"),
    [
        (str, _wrapped({"type": "string"}), True),
        (int, _wrapped({"type": "integer"}), True),
        (list[int], _wrapped({"type": "array", "items": {"type": "integer"}}), True),
        (Literal["a", "b"], _wrapped({"enum": ["a", "b"], "type": "string"}), True),
        (Any, _wrapped({}), True),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}, False),
        (dict, {"type": "object"}, False),
        (
            Book,
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "isbn": {"type": "string"}},
                "required": ["title"],
            },
            False,
        ),
        (
            Pair,
            {
                "type": "object",
                "properties": {"left": {"type": "integer"}, "right": {"type": "string", "default": "r"}},
                "required": ["left"],
            },
            False,
        ),
        (
            Color,
            {**_wrapped({"$ref": "#/$defs/Color"}), "$defs": {"Color": {"type": "string", "enum": ["red", "green"]}}},
            True,
        ),
    ],
    ids=repr,
)
def test_output_schema(annotation: Any, expected: dict[str, Any], wraps: bool) -> None:
    shape = inspect_function(_returning(annotation))
    assert shape.output_schema == expected
    assert shape.wraps_output is wraps
    check_schema(shape.output_schema)  # type: ignore[arg-type]


def test_output_object_is_inlined_and_unused_definition_dropped() -> None:
    shape = inspect_function(_returning(Person))
    assert shape.wraps_output is False
    output = shape.output_schema
    assert output is not None
    assert output["type"] == "object"
    assert output["title"] == "Person"
    assert list(output["$defs"]) == ["Address"]  # Person itself is the root now
    check_schema(output)


def test_recursive_output_object_keeps_its_definition() -> None:
    shape = inspect_function(_returning(Node))
    assert shape.output_schema == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "required": ["name"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
                "required": ["name"],
            }
        },
    }
    assert shape.wraps_output is False
    check_schema(shape.output_schema)  # type: ignore[arg-type]


def test_optional_object_output_is_wrapped() -> None:
    shape = inspect_function(_returning(Optional[Point]))
    assert shape.wraps_output is True
    assert shape.output_schema is not None
    assert shape.output_schema["properties"]["result"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
    assert list(shape.output_schema["$defs"]) == ["Point"]
    check_schema(shape.output_schema)


@pytest.mark.parametrize(
    "annotation", [None, type(None), Image, list[Image], Image | str, Annotated[Image, "x"]], ids=repr
)
def test_no_output_schema(annotation: Any) -> None:
    shape = inspect_function(_returning(annotation), unstructured=(Image,))
    assert shape.output_schema is None
    assert shape.wraps_output is False


def test_no_return_annotation_means_no_output_schema() -> None:
    def f():  # type: ignore[no-untyped-def]
        return 1

    assert inspect_function(f).output_schema is None


def test_output_uses_the_pydantic_serialization_schema() -> None:
    class Priced(pydantic.BaseModel):
        amount: int

        @pydantic.computed_field  # type: ignore[prop-decorator]
        @property
        def doubled(self) -> int:
            return self.amount * 2

    output = inspect_function(_returning(Priced)).output_schema
    assert output is not None
    assert "doubled" in output["properties"]
    assert "doubled" in output["required"]
