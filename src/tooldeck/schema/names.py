"""What a Python value is, in the words of JSON Schema and with its article, for messages a user reads.

``a_type_name(3)`` is "an integer", never "a int": users meet JSON's names (string, number, object, array, null)
in schemas and on the wire, not Python's (str, float, dict, list, NoneType).
"""

from __future__ import annotations

import types
from typing import Any

# Python type -> its JSON Schema name. bool before int: True is an int to isinstance, a boolean to JSON.
_JSON_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (dict, "object"),
    (list, "array"),
    (tuple, "array"),
    (type(None), "null"),
)


_PLAIN = frozenset({name for _, name in _JSON_NAMES} | {"class", "function"})


def type_name(value: Any) -> str:
    """The JSON Schema name of ``value``'s type ("integer", "string", "null"), or its class name ("Path")."""
    for cls, name in _JSON_NAMES:
        if isinstance(value, cls):
            return name
    if isinstance(value, type):
        return "class"
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
        return "function"
    return type(value).__name__


def a_type_name(value: Any) -> str:
    """``type_name`` with its article: "an integer", "a string", "null", "a Path object", "a class"."""
    name = type_name(value)
    if name == "null":
        return name
    if name not in _PLAIN:
        name = f"{name} object"
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"
