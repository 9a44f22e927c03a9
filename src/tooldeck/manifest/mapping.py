"""A tool definition as MCP tools: each capability becomes the tool ``<id>.<capability>``.

name          <id>.<capability>
title         "<title or name>: <capability>" (a capability's own title wins)
description   the capability's, with "Returns: <return description>" after it
inputSchema   the parameters: string/number/boolean/object/array, any (no type); required; descriptions;
              additionalProperties false
outputSchema  return.schema; anything but an object schema is wrapped as {"result": ...}
_meta         tooldeck/definition, tooldeck/version, tooldeck/digest, tooldeck/securityLevel,
              tooldeck/scopes, tooldeck/category, tooldeck/tags
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.metadata import check_scopes, check_security_level, normalize_icons
from ..protocol.errors import RegistrationError
from ..schema.validate import Validator
from ..tools.tool import Tool, compile_schema, normalize_annotations
from .definition import Definition
from .handlers import bind

_TYPES = {"string", "number", "boolean", "object", "array"}  # and "any": no type at all


def definition_tools(
    definition: Definition,
    bindings: dict[str, Callable[..., Any]],
    injectable: tuple[type, ...] = (),
    previous: dict[str, Tool] | None = None,
) -> list[Tool]:
    """One Tool per capability, each bound to its handler; RegistrationError names every one that cannot be (a line
    each). ``previous``: the tools of the version being replaced, whose validators are reused where a schema did
    not change (an upgrade then costs its calls no compiling)."""
    tools, failures = [], []
    for index in range(len(definition.capabilities)):
        try:
            tools.append(_tool(definition, index, bindings, injectable, previous or {}))
        except RegistrationError as exc:
            failures.append(str(exc))
    if failures:
        raise RegistrationError("\n".join(failures))
    return tools


def _tool(
    definition: Definition,
    index: int,
    bindings: dict[str, Callable[..., Any]],
    injectable: tuple[type, ...],
    previous: dict[str, Tool],
) -> Tool:
    document = definition.document
    capability = definition.capabilities[index]
    name = f"{definition.id}.{capability['name']}"
    owner = f"{definition.source or definition.id}: $.capabilities[{index}]"
    before = previous.get(name)
    input_schema = input_schema_of(capability.get("parameters", ()))
    output_schema, wraps = output_schema_of(capability.get("return", {}).get("schema"))
    output_validator = (
        _validator(output_schema, name, "outputSchema", before, "output") if output_schema is not None else None
    )
    handler = bind(definition, index, bindings, injectable, (output_validator, wraps) if output_validator else None)
    annotations = {**document.get("annotations", {}), **capability.get("annotations", {})} or None
    level = capability.get("securityLevel", document.get("securityLevel"))
    scopes = capability.get("scopes", document.get("scopes"))
    return Tool(
        name=name,
        fn=handler.fn,
        is_async=handler.is_async,
        description=description_of(capability),
        input_schema=input_schema,
        output_schema=output_schema,
        wraps_output=wraps,
        input_validator=_validator(input_schema, name, "inputSchema", before, "input"),
        output_validator=output_validator,
        title=capability.get("title") or f"{document.get('title') or document['name']}: {capability['name']}",
        annotations=normalize_annotations(annotations, name),
        icons=normalize_icons(capability.get("icons", document.get("icons")), owner),
        task_support=capability.get("task", document.get("task", "forbidden")),
        meta=_meta(definition),
        injected=handler.injected,
        version=definition.version,
        security_level=check_security_level(level, owner),
        scopes=check_scopes(scopes, owner),
        definition=definition,
    )


def _validator(schema: dict[str, Any], name: str, which: str, before: Tool | None, side: str) -> Validator:
    """The previous version's validator when the schema is the same, else a new one compiled at first use (trusted:
    check_document has compiled the return schema once already, and parameters build valid schemas)."""
    if before is not None and getattr(before, f"{side}_schema") == schema:
        validator: Validator = getattr(before, f"{side}_validator")
        return validator
    return compile_schema(schema, name, which, trusted=True)


def input_schema_of(parameters: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for parameter in parameters:
        schema: dict[str, Any] = {"type": parameter["type"]} if parameter["type"] in _TYPES else {}
        if "description" in parameter:
            schema["description"] = parameter["description"]
        properties[parameter["name"]] = schema
        if parameter.get("required", False):
            required.append(parameter["name"])
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def output_schema_of(schema: Any) -> tuple[dict[str, Any] | None, bool]:
    """The outputSchema for a return schema, and whether results are wrapped as ``{"result": ...}``."""
    if schema is None:
        return None, False
    if isinstance(schema, dict) and schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def description_of(capability: dict[str, Any]) -> str:
    text: str = capability["description"]
    returns = capability.get("return", {}).get("description")
    return f"{text}\n\nReturns: {returns}" if returns else text


def _meta(definition: Definition) -> dict[str, Any]:
    meta: dict[str, Any] = {"tooldeck/definition": definition.id, "tooldeck/digest": f"sha256:{definition.digest}"}
    metadata = definition.document.get("metadata", {})
    if isinstance(metadata.get("category"), str):
        meta["tooldeck/category"] = metadata["category"]
    if isinstance(metadata.get("tags"), list):
        meta["tooldeck/tags"] = metadata["tags"]
    return meta
