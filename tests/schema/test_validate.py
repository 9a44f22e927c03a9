"""Tests for schema/validate.py: compiled validators, dialects, and the wording of failures."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck.protocol.errors import SchemaError
from tooldeck.schema.validate import MAX_ERRORS, Validator

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
        "role": {"enum": ["admin", "user"]},
        "kind": {"const": "person"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "uniqueItems": True},
        "nickname": {"type": ["string", "null"]},
        "odd key": {"type": "boolean"},
        "meta": {"type": "object", "minProperties": 1, "maxProperties": 1},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({"name": "ann", "age": 3}, []),
        ({"name": 3, "age": 1}, ["$.name: expected string, got 3"]),
        ({"name": "", "age": 1}, ['$.name: expected at least 1 character, got ""']),
        ({"name": "abcdefgh", "age": 1}, ['$.name: expected at most 5 characters, got "abcdefgh"']),
        ({"name": "a"}, ["$: missing required property 'age'"]),
        ({}, ["$: missing required property 'age'", "$: missing required property 'name'"]),
        ({"name": "a", "age": -1}, ["$.age: expected a number >= 0, got -1"]),
        ({"name": "a", "age": 200}, ["$.age: expected a number <= 150, got 200"]),
        ({"name": "a", "age": 1.5}, ["$.age: expected integer, got 1.5"]),
        ({"name": "a", "age": 1, "score": 0}, ["$.score: expected a number > 0, got 0"]),
        ({"name": "a", "age": 1, "score": 1}, ["$.score: expected a number < 1, got 1"]),
        ({"name": "a", "age": 1, "score": 0.3}, ["$.score: expected a multiple of 0.25, got 0.3"]),
        ({"name": "a", "age": 1, "role": "root"}, ['$.role: expected one of "admin", "user", got "root"']),
        ({"name": "a", "age": 1, "kind": "robot"}, ['$.kind: expected "person", got "robot"']),
        ({"name": "a", "age": 1, "code": "ab"}, ["$.code: expected a string matching '^[A-Z]{3}$', got \"ab\""]),
        ({"name": "a", "age": 1, "tags": []}, ["$.tags: expected at least 1 item, got 0"]),
        ({"name": "a", "age": 1, "tags": ["a", "b", "c"]}, ["$.tags: expected at most 2 items, got 3"]),
        ({"name": "a", "age": 1, "tags": ["a", "a"]}, ['$.tags: expected unique items, got ["a","a"]']),
        ({"name": "a", "age": 1, "tags": ["a", 2]}, ["$.tags[1]: expected string, got 2"]),
        ({"name": "a", "age": 1, "nickname": 5}, ["$.nickname: expected null or string, got 5"]),
        ({"name": "a", "age": 1, "odd key": "yes"}, ['$["odd key"]: expected boolean, got "yes"']),
        ({"name": "a", "age": 1, "meta": {}}, ["$.meta: expected at least 1 property, got 0"]),
        ({"name": "a", "age": 1, "meta": {"a": 1, "b": 2}}, ["$.meta: expected at most 1 property, got 2"]),
        ({"name": "a", "age": 1, "items": [{"name": "x"}, {}]}, ["$.items[1]: missing required property 'name'"]),
        ({"name": "a", "age": 1, "items": [{"name": 1}]}, ["$.items[0].name: expected string, got 1"]),
        ({"name": "a", "age": 1, "z": 1, "y": 2}, ["$: unexpected property 'y'", "$: unexpected property 'z'"]),
        ([], ["$: expected object, got []"]),
        (
            {"name": 1, "age": "x", "z": 0},
            ["$: unexpected property 'z'", '$.age: expected integer, got "x"', "$.name: expected string, got 1"],
        ),
    ],
    ids=repr,
)
def test_error_messages(instance: Any, expected: list[str]) -> None:
    validator = Validator(PERSON)
    assert validator.is_valid(instance) is (expected == [])
    assert validator.errors(instance) == expected


def test_format_is_a_note_in_2020_12_unless_asked() -> None:
    instance = {"name": "a", "age": 1, "email": "not an email"}
    assert Validator(PERSON).is_valid(instance)
    strict = Validator(PERSON, validate_formats=True)
    assert strict.errors(instance) == ['$.email: expected a string in email format, got "not an email"']


def test_errors_are_sorted_by_path_with_numeric_indices() -> None:
    validator = Validator({"type": "array", "items": {"type": "integer"}})
    instance = ["x"] * 12
    errors = validator.errors(instance)
    assert errors[:3] == [
        '$[0]: expected integer, got "x"',
        '$[1]: expected integer, got "x"',
        '$[2]: expected integer, got "x"',
    ]
    assert errors[-1] == '$[11]: expected integer, got "x"'


def test_errors_are_capped() -> None:
    validator = Validator({"type": "array", "items": {"type": "integer"}})
    errors = validator.errors(["x"] * 30)
    assert len(errors) == MAX_ERRORS + 1
    assert errors[-1] == "... and 10 more"


def test_long_values_are_shortened() -> None:
    validator = Validator({"type": "integer"})
    assert validator.errors("x" * 100) == ['$: expected integer, got "' + "x" * 56 + "..."]


OPTIONAL_REPORT = {
    "$defs": {
        "Report": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "pages": {"type": "integer", "minimum": 1}},
            "required": ["title"],
        },
        "Color": {"type": "string", "enum": ["red", "green"]},
    },
    "type": "object",
    "properties": {
        "report": {"anyOf": [{"$ref": "#/$defs/Report"}, {"type": "null"}]},
        "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
        "count": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "both": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        "shape": {
            "anyOf": [
                {"type": "object", "properties": {"radius": {"type": "number"}}, "required": ["radius"]},
                {"type": "object", "properties": {"side": {"type": "number"}}, "required": ["side"]},
            ]
        },
    },
}


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ({"report": 3}, ["$.report: expected object or null, got 3"]),
        ({"report": {"title": 3}}, ["$.report.title: expected string, got 3"]),
        ({"report": {"title": "t", "pages": 0}}, ["$.report.pages: expected a number >= 1, got 0"]),
        ({"color": "blue"}, ['$.color: expected one of "red", "green" or null, got "blue"']),
        ({"count": -1}, ["$.count: expected a number >= 0, got -1"]),
        ({"count": "x"}, ['$.count: expected integer or null, got "x"']),
        ({"either": 1.5}, ["$.either: expected string or integer, got 1.5"]),
        ({"both": 1}, ["$.both: matches more than one oneOf alternative, got 1"]),
        (
            {"shape": {}},
            [
                "$.shape: matches none of the 2 anyOf alternatives, got {}",
                "$.shape: missing required property 'radius'",
                "$.shape: missing required property 'side'",
            ],
        ),
    ],
    ids=repr,
)
def test_alternatives(instance: Any, expected: list[str]) -> None:
    validator = Validator(OPTIONAL_REPORT)
    assert validator.errors(instance) == expected
    assert not validator.is_valid(instance)


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        ({"type": "array", "contains": {"type": "integer"}}, ["a"],
         '$: expected an item matching the array\'s "contains" schema, got ["a"]'),
        ({"type": "array", "contains": {"type": "integer"}, "minContains": 2}, [1, "a"],
         '$: expected more items matching the array\'s "contains" schema, got [1,"a"]'),
        ({"type": "array", "contains": {"type": "integer"}, "maxContains": 1}, [1, 2],  # the library: "None of ..."
         '$: expected fewer items matching the array\'s "contains" schema, got [1,2]'),
        ({"not": {"type": "string"}}, "x", '$: expected a value that does not match {"type":"string"}, got "x"'),
    ],
)  # fmt: skip
def test_contains_and_not_are_worded_here(schema: dict[str, Any], instance: Any, expected: str) -> None:
    # The library's words were 'None of ["a"] are valid under the given schema' and '{...} is not allowed for "x"'.
    assert Validator(schema).errors(instance) == [expected]


def test_other_kinds_fall_back_to_the_library_message() -> None:
    validator = Validator({"type": "object", "propertyNames": {"maxLength": 2}})
    assert validator.errors({"abc": 1}) == ['$: "abc" is longer than 2 characters']


def test_false_schema() -> None:
    validator = Validator({"type": "array", "prefixItems": [{"type": "integer"}], "items": False})
    assert validator.errors([1, 2]) == ["$[1]: no value is allowed here, got 2"]


@pytest.mark.parametrize(
    ("uri", "dialect"),
    [
        (None, "2020-12"),
        ("https://json-schema.org/draft/2020-12/schema", "2020-12"),
        ("https://json-schema.org/draft/2019-09/schema", "2019-09"),
        ("http://json-schema.org/draft-07/schema#", "draft-07"),
        ("http://json-schema.org/draft-06/schema#", "draft-06"),
        ("http://json-schema.org/draft-04/schema#", "draft-04"),
    ],
)
def test_dialects(uri: str | None, dialect: str) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    if uri is not None:
        schema["$schema"] = uri
    validator = Validator(schema)
    assert validator.dialect == dialect
    assert validator.is_valid({"n": 1})
    assert validator.errors({"n": "1"}) == ['$.n: expected integer, got "1"']


def test_draft_04_semantics_are_used() -> None:
    # In draft-04 exclusiveMaximum is a boolean that modifies maximum; in 2020-12 that schema would be invalid.
    validator = Validator(
        {"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5, "exclusiveMaximum": True}
    )
    assert validator.is_valid(4)
    assert not validator.is_valid(5)


def test_unsupported_dialect() -> None:
    with pytest.raises(SchemaError) as info:
        Validator({"$schema": "https://example.com/my-dialect", "type": "string"})
    assert str(info.value) == (
        "unsupported JSON Schema dialect 'https://example.com/my-dialect' (supported: "
        "https://json-schema.org/draft/2020-12/schema, https://json-schema.org/draft/2019-09/schema, "
        "https://json-schema.org/draft-07/schema, https://json-schema.org/draft-06/schema, "
        "https://json-schema.org/draft-04/schema)"
    )


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "strin"}, 'invalid JSON Schema (2020-12): $.type: expected one of "array", "boolean", "integer", '),
        ({"minimum": "3"}, 'invalid JSON Schema (2020-12): $.minimum: expected number, got "3"'),
        ({"required": "name"}, 'invalid JSON Schema (2020-12): $.required: expected array, got "name"'),
        ({"properties": {"a": {"type": 1}}}, "invalid JSON Schema (2020-12): $.properties.a.type: expected one of "),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "exclusiveMinimum": True},
            "invalid JSON Schema (draft-07): $.exclusiveMinimum: expected number, got true",
        ),
        ({"$ref": "#/$defs/missing"}, "cannot compile JSON Schema: "),
        ({"$ref": "https://example.com/remote.json"}, "cannot compile JSON Schema: "),
        (["not", "an", "object"], 'a JSON Schema must be an object, got ["not","an","object"]'),
    ],
    ids=repr,
)
def test_invalid_schemas(schema: Any, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        Validator(schema)
    assert str(info.value).startswith(message)


def test_is_valid_is_the_compiled_method() -> None:
    validator = Validator({"type": "integer"})
    assert validator.is_valid.__self__ is validator._compiled  # type: ignore[attr-defined]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200)
@given(JSON)
def test_errors_agree_with_is_valid(instance: Any) -> None:
    """Random JSON never crashes the wording, and there are errors exactly when the instance is invalid."""
    for schema in (PERSON, OPTIONAL_REPORT):
        validator = Validator(schema)
        errors = validator.errors(instance)
        assert (errors == []) is validator.is_valid(instance)
        assert all(line.startswith("$") or line.startswith("... and ") for line in errors)
