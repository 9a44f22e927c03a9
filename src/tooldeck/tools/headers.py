"""``x-mcp-header``: the tool parameters a Streamable HTTP client mirrors into ``Mcp-Param-{Name}`` headers
(revision 2026-07-28, SEP-2243), checked and listed once, when the tool is registered.

The rules (digest §10.2): the annotation's value is a non-empty RFC 9110 token, unique case-insensitively within the
schema; it sits on a property of type string, integer or boolean (not number; ``null`` may be allowed beside it);
and that property is reached from the root through ``properties`` alone (nothing under ``items``, ``anyOf``,
``oneOf``, ``allOf``, ``not``, ``if``/``then``/``else``, ``$ref``'d ``$defs`` and the like). A client drops a tool
that breaks one, so tooldeck refuses to register it. What passes becomes a tuple of ``MirroredParam`` on the Tool,
so a call compares headers without looking at the schema again.
"""

from __future__ import annotations

import string
from typing import Any, NoReturn

from ..protocol.errors import RegistrationError
from ..protocol.paths import format_path
from ..protocol.record import Record

KEYWORD = "x-mcp-header"
PREFIX = "Mcp-Param-"
TYPES = ("string", "integer", "boolean")
_TCHAR = frozenset("!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits)  # RFC 9110 §5.6.2
# Where subschemas live, so that an annotation anywhere in the schema is found (and data such as ``default`` or
# ``enum`` values, or the property names under ``properties``, is not mistaken for one).
_ONE = ("additionalProperties", "unevaluatedProperties", "items", "additionalItems", "unevaluatedItems", "contains",
        "propertyNames", "not", "if", "then", "else", "contentSchema")  # fmt: skip
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")  # items as a list: the draft 4-7 tuple form
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")


class MirroredParam(Record):
    """One annotated parameter: its header (``Mcp-Param-Region``, and the lower-case bytes ASGI servers deliver),
    where its value is in ``arguments`` (property names from the root), and its JSON type."""

    __slots__ = ("header", "key", "path", "type")

    def __init__(self, name: str, path: tuple[str, ...], json_type: str) -> None:
        self.header = PREFIX + name
        self.key = self.header.lower().encode("ascii")
        self.path = path
        self.type = json_type


def mirrored_params(schema: dict[str, Any], tool: str) -> tuple[MirroredParam, ...]:
    """The ``x-mcp-header`` parameters of an inputSchema, in schema order; a RegistrationError naming the tool, the
    JSON path and the rule for the first annotation that breaks one."""
    found: list[tuple[MirroredParam, list[str | int]]] = []
    _walk(schema, [], (), found, tool)
    seen: dict[str, list[str | int]] = {}
    for param, where in found:
        name = param.header.lower()
        if name in seen:
            _refuse(tool, where, f"header name {param.header[len(PREFIX) :]!r} is already used at "
                                 f"{format_path(seen[name])} (header names are case-insensitive)")  # fmt: skip
        seen[name] = where
    return tuple(param for param, _ in found)


def _walk(node: Any, where: list[str | int], args: tuple[str, ...] | None, found: list[Any], tool: str) -> None:
    """``args``: the argument path of ``node`` while it is reached through ``properties`` alone, else None."""
    if type(node) is not dict:
        return
    if KEYWORD in node:
        found.append((_param(node, where, args, tool), [*where, KEYWORD]))
    for key, value in node.items():
        if key in _NAMED and type(value) is dict:
            for name, sub in value.items():
                inner = (*args, name) if key == "properties" and args is not None else None
                _walk(sub, [*where, key, name], inner, found, tool)
        elif key in _MANY and type(value) is list:
            for index, sub in enumerate(value):
                _walk(sub, [*where, key, index], None, found, tool)
        elif key in _ONE:
            _walk(value, [*where, key], None, found, tool)


def _param(node: dict[str, Any], where: list[str | int], args: tuple[str, ...] | None, tool: str) -> MirroredParam:
    at = [*where, KEYWORD]
    if not args:
        _refuse(tool, at, 'x-mcp-header is only allowed on a property reached from the root through "properties" '
                          "alone (not at the root, nor under items, anyOf, oneOf, allOf, not, if/then/else, $ref "
                          "or $defs)")  # fmt: skip
    name = node[KEYWORD]
    if type(name) is not str or not name or not all(c in _TCHAR for c in name):
        _refuse(tool, at, f"x-mcp-header must be a non-empty RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~, "
                          f"no spaces, CR or LF), got {name!r}")  # fmt: skip
    declared = node.get("type")
    kinds = [declared] if type(declared) is str else declared if type(declared) is list else []
    chosen = [kind for kind in kinds if kind in TYPES]
    if len(chosen) != 1 or any(kind not in TYPES and kind != "null" for kind in kinds):
        _refuse(tool, at, f'x-mcp-header is only allowed on a property of "type" string, integer or boolean (not '
                          f"number), and this one's type is {declared!r}")  # fmt: skip
    return MirroredParam(name, args, chosen[0])


def _refuse(tool: str, where: list[str | int], rule: str) -> NoReturn:
    raise RegistrationError(f"tool {tool!r}: inputSchema {format_path(where)}: {rule}")
