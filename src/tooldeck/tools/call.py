"""The tool-specific steps of a tools/call: validate and convert the arguments; word an unexpected failure.

Everything that goes wrong here is a tool execution error (``isError: true``), never a JSON-RPC error: arguments
that fail the inputSchema (SEP-1303), and any exception of the tool's own (masked by default: the model sees a
reference, the log gets the traceback). The rest of the call is the server's pipeline (``server/pipeline.py``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..protocol.errors import ConversionError, ToolError
from .tool import Tool

log = logging.getLogger("tooldeck.tools")


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments for ``tool.fn``: validated against the inputSchema and converted to the declared types.

    Raises ``ToolError`` naming every problem (``$.a: expected number, got "x"``).
    """
    if not tool.input_validator.is_valid(arguments):
        problems = "; ".join(tool.input_validator.errors(arguments))
        raise ToolError(f"Invalid arguments for tool {tool.name!r}: {problems}")
    if not tool.converters:
        return arguments
    kwargs = dict(arguments)
    for key, convert in tool.converters.items():
        if key in kwargs:
            try:
                kwargs[key] = convert(kwargs[key])
            except ConversionError as exc:  # names the path itself: "$.when: expected an ISO 8601 date..."
                raise ToolError(f"Invalid arguments for tool {tool.name!r}: {exc}") from None
            except (TypeError, ValueError) as exc:
                raise ToolError(f"Invalid arguments for tool {tool.name!r}: $.{key}: {exc}") from None
    return kwargs


def describe_failure(what: str, exc: BaseException, mask_errors: bool) -> str:
    """Log an unexpected exception raised by user code; the text the client gets (masked: only a log reference)."""
    if not mask_errors:
        log.error("%s raised", what, exc_info=exc)
        return f"Error executing {what}: {type(exc).__name__}: {exc}"
    ref = os.urandom(4).hex()
    log.error("%s raised (ref %s)", what, ref, exc_info=exc)
    return f"{what[0].upper()}{what[1:]} failed with an internal error (ref {ref}); details are in the server log."
