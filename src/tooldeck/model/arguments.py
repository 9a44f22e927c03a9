"""String arguments -> the types a function declared, for URI template variables and prompt arguments.

Both arrive as text. A parameter's JSON Schema (from ``inspect_function``) says which JSON values it takes; the
text is read as the first of those it can be (``"42"`` -> 42 for an int, ``"true"`` -> True for a bool, ``"[1, 2]"``
-> a list), that value is checked against the schema (so ``Literal`` and ``Annotated[int, Ge(0)]`` hold), and then
converted as a tool argument would be (enums, datetimes, dataclasses). Plain ``str`` parameters skip all of it.

Resources and prompts both use this module, so it imports nothing else from either package.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from ..protocol.errors import ArgumentError, ConversionError
from ..schema.generate import FunctionShape
from ..schema.validate import Validator

StringConverter = Callable[[str], Any]

# Compiled on first use (re caches them), not at import.
_INTEGER = r"-?[0-9]+"
_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# Schema keywords that say nothing about which values are accepted.
_NOTES = frozenset({"type", "description", "title", "default", "examples", "deprecated"})


def string_converters(shape: FunctionShape) -> dict[str, StringConverter]:
    """A converter for each parameter whose text must become something else; plain ``str`` ones need none.

    A converter raises ArgumentError, e.g. ``$.count: expected integer, got "many"``.
    """
    properties: dict[str, Any] = shape.input_schema.get("properties", {})
    defs: dict[str, Any] = shape.input_schema.get("$defs", {})
    converters: dict[str, StringConverter] = {}
    for name in shape.parameters:
        schema = properties[name]
        convert = shape.converters.get(name)
        if convert is None and schema.get("type") == "string" and set(schema) <= _NOTES:
            continue
        converters[name] = _converter(name, schema, defs, convert)
    return converters


def choices(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[str, ...] | None:
    """The values a parameter can take, spelled as text, when the schema lists them (enums, Literal, bool)."""
    schema = _resolve(schema, defs)
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        return tuple(_spell(value) for value in values)
    if schema.get("type") == "boolean":
        return ("true", "false")
    return None


def _converter(
    name: str, schema: dict[str, Any], defs: dict[str, Any], convert: Callable[[Any], Any] | None
) -> StringConverter:
    types = _types(schema, defs)
    wrapper: dict[str, Any] = {"type": "object", "properties": {name: schema}}
    if defs:
        wrapper["$defs"] = defs
    validator = Validator(wrapper, trusted=True)  # compiled when first used

    def from_string(text: str) -> Any:
        candidates = _candidates(text, types)
        for candidate in candidates:
            if validator.is_valid({name: candidate}):
                break
        else:
            shown = candidates[-1] if candidates else text  # the reading closest to the declared type
            problems = validator.errors({name: shown})
            raise ArgumentError(problems[0] if problems else f"$.{name}: not a valid value: {text!r}")
        if convert is None:
            return candidate
        try:
            return convert(candidate)
        except ConversionError as error:
            raise ArgumentError(str(error)) from None

    return from_string


def _candidates(text: str, types: frozenset[str] | None) -> list[Any]:
    """The JSON values ``text`` can stand for, among the accepted ``types`` (None: any), most literal first."""
    accepts = (lambda kind: True) if types is None else types.__contains__
    out: list[Any] = []
    if accepts("string"):
        out.append(text)
    if accepts("null") and text == "null":
        out.append(None)
    if accepts("boolean") and text.lower() in ("true", "false"):
        out.append(text.lower() == "true")
    if (accepts("integer") or accepts("number")) and re.fullmatch(_INTEGER, text):
        out.append(int(text))
    elif accepts("number") and re.fullmatch(_NUMBER, text):
        out.append(float(text))
    if (accepts("object") or accepts("array")) and text[:1] in ("{", "["):
        try:
            out.append(orjson.loads(text))
        except orjson.JSONDecodeError:
            pass
    return out


def _types(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> frozenset[str] | None:
    """The JSON types a schema admits; None when it does not say (``Any``), which admits every reading."""
    schema = _resolve(schema, defs)
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(declared)
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema and depth < 8:
            union: set[str] = set()
            for member in schema[keyword]:
                member_types = _types(member, defs, depth + 1)
                if member_types is None:
                    return None
                union |= member_types
            return frozenset(union)
    if "enum" in schema or "const" in schema:
        values = schema["enum"] if "enum" in schema else [schema["const"]]
        return frozenset(_json_type(value) for value in values)
    return None


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    for _ in range(8):  # a chain of references is short; a cycle of bare references is not followed forever
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            break
        schema = defs.get(ref.removeprefix("#/$defs/"), {})
    return schema


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _spell(value: Any) -> str:
    """A value as the text that reads back as it: ``"red"`` -> red, ``True`` -> true, ``3`` -> 3."""
    return value if isinstance(value, str) else orjson.dumps(value).decode()
