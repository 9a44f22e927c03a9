"""The warnings ``tooldeck inspect`` gives about tools as tools/list sends them: what many hosts cannot read.

Hosts hand a tool's inputSchema to a model provider, and several accept only a subset of JSON Schema: one ``type``
per schema (no ``["integer", "null"]``), no ``$ref``/``$defs``, no ``anyOf``/``oneOf`` in place of a parameter's
type. Such a parameter is dropped, rejected, or the whole server fails to load. The rules:

=====================  ========  =============================================================================
code                   severity  what
=====================  ========  =============================================================================
no-description         warning   the tool has no description: the model must guess from the name alone
long-description       warning   the description is longer than 1024 characters, the limit of OpenAI's tool
                                 API (``tools[i].function.description``): hosts on it fail to send the request
type-array             warning   ``"type"`` is a list, anywhere in the inputSchema
ref                    warning   ``$ref`` anywhere in the inputSchema (the definitions it needs in ``$defs``)
top-level-union        warning   a parameter is ``anyOf``/``oneOf`` instead of having a type
missing-type           warning   a parameter has no ``type`` (nor enum, const, a union or a reference)
param-no-description   info      a parameter has no description
=====================  ========  =============================================================================

Each finding names the tool and the JSON path inside the Tool object, like ``$.inputSchema.properties.a.type``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

LONG_DESCRIPTION = 1024

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


@dataclass(frozen=True)
class Finding:
    severity: str
    """``warning`` (a host may fail on it) or ``info`` (worth improving)."""
    code: str
    tool: str
    path: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"severity": self.severity, "code": self.code, "tool": self.tool, "path": self.path,
                "message": self.message}  # fmt: skip


def join(path: str, key: str | int) -> str:
    """``path`` extended by one member: ``.name``, or ``["odd name"]`` / ``[3]`` where a dot would be ambiguous."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    import json

    return f"{path}[{json.dumps(key)}]"


def lint_tools(tools: list[dict[str, Any]]) -> list[Finding]:
    """Every finding for ``tools`` (Tool objects as tools/list sends them), tool by tool, in schema order."""
    findings: list[Finding] = []
    for tool in tools:
        findings.extend(lint_tool(tool))
    return findings


def lint_tool(tool: dict[str, Any]) -> Iterator[Finding]:
    name = str(tool.get("name"))
    description = tool.get("description")
    if not isinstance(description, str) or not description.strip():
        yield Finding("warning", "no-description", name, "$.description",
                      "the tool has no description; write a docstring saying what it does and when to use it")  # fmt: skip
    elif len(description) > LONG_DESCRIPTION:
        yield Finding("warning", "long-description", name, "$.description",
                      f"the description is {len(description)} characters; hosts on OpenAI's tool API refuse more "
                      f"than {LONG_DESCRIPTION}: shorten it or move details into parameter descriptions")  # fmt: skip
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):  # parameter by parameter, so the findings read in the schema's order
        for param, sub in properties.items():
            path = join("$.inputSchema.properties", param)
            yield from _parameter(name, param, sub, path)
            yield from _walk(name, sub, path)
    yield from _walk(name, {k: v for k, v in schema.items() if k != "properties"}, "$.inputSchema")


def _parameter(tool: str, param: str, sub: Any, path: str) -> Iterator[Finding]:
    """What a host needs of each parameter: one type, and (as an info) a description."""
    if not isinstance(sub, dict):
        return
    union = next((k for k in ("anyOf", "oneOf") if k in sub), None)
    if union is not None and "type" not in sub:
        yield Finding("warning", "top-level-union", tool, join(path, union),
                      f"parameter {param!r} is {union} instead of one type; hosts that need a type per "
                      f"parameter drop or refuse it: give it one type (a default instead of None)")  # fmt: skip
    elif not any(k in sub for k in ("type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf")):
        yield Finding("warning", "missing-type", tool, path,
                      f'parameter {param!r} has no "type"; hosts cannot tell the model what to send: '
                      f"annotate it")  # fmt: skip
    if not isinstance(sub.get("description"), str) or not sub["description"].strip():
        yield Finding("info", "param-no-description", tool, path,
                      f"parameter {param!r} has no description (document it in the docstring's Args "
                      f"section, or with Annotated[..., 'what it is'])")  # fmt: skip


def _walk(tool: str, schema: Any, path: str) -> Iterator[Finding]:
    """Findings inside one schema and every schema nested in it (by keyword, so a property named "type" is a
    property, not a type)."""
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, list):
        if "null" in kind:
            hint = "hosts that read one type per schema drop or refuse it: make it a plain type with a default"
        else:
            hint = "hosts that read one type per schema drop or refuse it: use one type"
        yield Finding("warning", "type-array", tool, join(path, "type"), f"type is a list {_show(kind)}; {hint}")
    if "$ref" in schema:
        yield Finding("warning", "ref", tool, join(path, "$ref"),
                      f"$ref {schema['$ref']!r}: hosts that do not resolve references see an empty schema; "
                      f"inline the definition (a flat set of parameters)")  # fmt: skip
    for keyword in _SCHEMA_MAPS:
        members = schema.get(keyword)
        if isinstance(members, dict):
            for key, sub in members.items():
                yield from _walk(tool, sub, join(join(path, keyword), key))
    for keyword in _SCHEMA_LISTS:
        members = schema.get(keyword)
        if isinstance(members, list):
            for i, sub in enumerate(members):
                yield from _walk(tool, sub, join(join(path, keyword), i))
    for keyword in _SCHEMA_ONES:
        sub = schema.get(keyword)
        if isinstance(sub, list):  # draft-07 tuple items
            for i, item in enumerate(sub):
                yield from _walk(tool, item, join(join(path, keyword), i))
        elif isinstance(sub, dict):
            yield from _walk(tool, sub, join(path, keyword))


def _show(value: Any) -> str:
    import json

    return json.dumps(value)
