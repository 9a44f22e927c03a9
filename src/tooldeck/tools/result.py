"""Turning what a tool returned into a CallToolResult, with structured output checked against the outputSchema.

A tool may return a ``str``, a content block, a list of them, a dict / dataclass / model, or a scalar. With an
outputSchema the result carries ``structuredContent`` (validated here before it leaves the server) and the same
value as text: JSON for objects and lists, the plain text for a wrapped scalar (``"hello"``, not ``{"result":...}``).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import orjson

from ..model.content import CONTENT_TYPES
from ..protocol.paths import find, format_path
from ..schema.jsonvalue import json_default
from .tool import Tool

log = logging.getLogger("tooldeck.tools")
_SCALARS = (str, int, float, bool, type(None))


# What auditors see of a 2026-07-28 round that stopped at a question: this very object (the audit outcome says
# "input_required"); the client gets the InputRequiredResult.
INPUT_REQUIRED: dict[str, Any] = {"content": [], "isError": False}

# What auditors see of a task-augmented call answered with its CreateTaskResult (the audit outcome says
# "task_created"): recorded before the answer leaves, so a process that dies before the task ends has recorded the
# call it answered; the task's work is recorded again when it ends, wherever it ends.
TASK_CREATED: dict[str, Any] = {"content": [], "isError": False}

# What auditors see of a call whose run was stopped before it ended (the audit outcome says "cancelled"): the client
# cancelled it, its task was cancelled, or its process stopped. Nobody is answered; the run began, so it is recorded.
CANCELLED: dict[str, Any] = {"content": [], "isError": False}


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def build_result(tool: Tool, value: Any) -> dict[str, Any]:
    if (
        type(value) is tool.plain_output
    ):  # the type its schema wraps and nothing more (the usual `-> str`): valid as it is
        text = value if type(value) is str else orjson.dumps(value).decode()
        return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": value}, "isError": False}
    if tool.output_validator is not None:
        return _structured(tool, value)
    return {"content": to_content(value), "isError": False}


def _structured(tool: Tool, value: Any) -> dict[str, Any]:
    returned = value
    if tool.wraps_output and type(value) in _SCALARS:
        structured: Any = {"result": value}  # fast path: already plain JSON, nothing to round-trip
        text = value if type(value) is str else orjson.dumps(value).decode()
    else:
        try:
            raw = orjson.dumps(value, default=json_default)
        except TypeError as exc:
            return _violation(tool, f"the return value cannot be encoded as JSON ({exc})")
        text = raw.decode()
        value = orjson.loads(raw)
        if tool.wraps_output:
            structured = {"result": value}
            if type(value) is str:
                text = value
        else:
            structured = value
    validator = tool.output_validator
    if not validator.is_valid(structured):  # type: ignore[union-attr]
        found = find(returned, _non_finite)
        if found is not None:  # JSON has no NaN or infinity: the encoder wrote null, so say what the tool produced
            path, number = found
            return _violation(tool, f"{format_path(path) if not tool.wraps_output else format_path(['result', *path])}:"
                                    f" {number!r} is not a JSON number (JSON has no NaN or infinity)")  # fmt: skip
        problems = "; ".join(validator.errors(structured))  # type: ignore[union-attr]
        return _violation(tool, problems)
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def _violation(tool: Tool, problems: str) -> dict[str, Any]:
    # The tool broke its own contract; the client must never see structuredContent that contradicts the schema.
    log.error("tool %r returned output that does not match its outputSchema: %s", tool.name, problems)
    return error_result(f"Tool {tool.name!r} returned output that does not match its outputSchema: {problems}")


def _non_finite(value: Any) -> bool:
    return type(value) is float and not math.isfinite(value)


def to_content(value: Any) -> list[dict[str, Any]]:
    """Unstructured content blocks for a return value (no outputSchema)."""
    if type(value) is str:
        return [{"type": "text", "text": value}]
    if value is None:
        return []
    if isinstance(value, CONTENT_TYPES):
        return [value.to_wire()]  # type: ignore[attr-defined]
    if isinstance(value, list | tuple) and any(isinstance(v, (str, *CONTENT_TYPES)) for v in value):
        return [block for item in value for block in to_content(item)]
    return [{"type": "text", "text": orjson.dumps(value, default=json_default).decode()}]
