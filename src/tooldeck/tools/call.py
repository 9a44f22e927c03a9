"""One tools/call after lookup: validate the arguments, convert them, invoke the tool, shape the result.

Everything that goes wrong here is a tool execution error (``isError: true``), never a JSON-RPC error: arguments
that fail the inputSchema (SEP-1303), a ``ToolError`` (its message is shown), and any other exception (masked by
default: the model sees a reference, the log gets the traceback).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol.errors import ConversionError, ToolError, UrlElicitationRequiredError
from .result import build_result, error_result
from .tool import Tool

log = logging.getLogger("tooldeck.tools")

SyncRunner = Callable[[Callable[[], Any]], Awaitable[Any]]


async def call_tool(
    tool: Tool,
    arguments: dict[str, Any],
    injected: dict[str, Any] | None,
    run_sync: SyncRunner,
    *,
    mask_errors: bool = True,
) -> dict[str, Any]:
    """The CallToolResult for one call. Cancellation (``CancelledError``) passes through untouched."""
    if not tool.input_validator.is_valid(arguments):
        problems = "; ".join(tool.input_validator.errors(arguments))
        return error_result(f"Invalid arguments for tool {tool.name!r}: {problems}")
    kwargs = arguments
    if tool.converters:
        kwargs = dict(arguments)
        for key, convert in tool.converters.items():
            if key in kwargs:
                try:
                    kwargs[key] = convert(kwargs[key])
                except ConversionError as exc:  # names the path itself: "$.when: expected an ISO 8601 date..."
                    return error_result(f"Invalid arguments for tool {tool.name!r}: {exc}")
                except (TypeError, ValueError) as exc:
                    return error_result(f"Invalid arguments for tool {tool.name!r}: $.{key}: {exc}")
    if injected:
        kwargs = {**kwargs, **injected}
    try:
        if tool.is_async:
            value = await tool.fn(**kwargs)
        else:
            value = await run_sync(functools.partial(tool.fn, **kwargs))
        return build_result(tool, value)
    except ToolError as exc:
        return error_result(str(exc) or f"Tool {tool.name!r} failed")
    except UrlElicitationRequiredError:
        raise  # answered as JSON-RPC error -32042: the one protocol error a tool may raise
    except Exception as exc:  # the tool's own bug or failure; BaseException (cancellation, exit) passes through
        return error_result(describe_failure(f"tool {tool.name!r}", exc, mask_errors))


def describe_failure(what: str, exc: BaseException, mask_errors: bool) -> str:
    """Log an unexpected exception raised by user code; the text the client gets (masked: only a log reference)."""
    if not mask_errors:
        log.error("%s raised", what, exc_info=exc)
        return f"Error executing {what}: {type(exc).__name__}: {exc}"
    ref = os.urandom(4).hex()
    log.error("%s raised (ref %s)", what, ref, exc_info=exc)
    return f"{what[0].upper()}{what[1:]} failed with an internal error (ref {ref}); details are in the server log."
