"""Building a Tool from a Python function: schemas from type hints, description from the docstring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from ..model.content import CONTENT_TYPES
from ..model.metadata import check_name, check_scopes, check_security_level, is_async, normalize_icons
from ..protocol.errors import RegistrationError, SchemaError
from ..schema.generate import inspect_function
from .options import ToolOptions, check_options
from .tool import (
    Tool,
    check_ask_before_task,
    check_task_support,
    check_timeout,
    check_version,
    compile_schema,
    normalize_annotations,
)


def tool_from_function(
    fn: Callable[..., Any], *, injectable: tuple[type, ...] = (), **options: Unpack[ToolOptions]
) -> Tool:
    """Everything about ``fn`` as a tool, checked and compiled now so that calls do no schema work.

    ``output_schema``: None derives it from the return annotation, False turns structured output off, a dict
    replaces it (the tool must then return a value that matches it). ``input_schema``: advertise and enforce this
    schema, exactly as given, instead of one built from the signature; the validated arguments are passed as
    keyword arguments (so ``fn`` takes those names, or ``**kwargs``).
    """
    if not callable(fn):
        raise RegistrationError(f"a tool must be callable, got {type(fn).__name__}")
    check_options(dict(options), "tool")
    name = options.get("name")
    tool_name = check_name(name if name is not None else getattr(fn, "__name__", None))
    input_schema = options.get("input_schema")
    output_schema = options.get("output_schema")
    description = options.get("description")
    try:
        shape = inspect_function(
            fn, injectable=injectable, unstructured=CONTENT_TYPES, schema_given=input_schema is not None
        )
    except SchemaError as exc:
        raise RegistrationError(f"tool {tool_name!r}: {exc}") from None
    trusted = input_schema is None
    if input_schema is None:
        input_schema = dict(shape.input_schema)
        # Arguments the function cannot take are refused by the schema itself: advertised == enforced.
        input_schema.setdefault("additionalProperties", False)
    wraps = shape.wraps_output
    out = shape.output_schema
    if output_schema is False:
        out, wraps = None, False
    elif isinstance(output_schema, dict):
        out, wraps = output_schema, False
    elif output_schema is not None and output_schema is not True:
        raise RegistrationError(f"tool {tool_name!r}: output_schema must be a dict, True or False")
    return Tool(
        name=tool_name,
        fn=fn,
        is_async=is_async(fn),
        description=description if description is not None else shape.description,
        input_schema=input_schema,
        output_schema=out,
        wraps_output=wraps,
        input_validator=compile_schema(input_schema, tool_name, "inputSchema", trusted=trusted),
        output_validator=(
            compile_schema(out, tool_name, "outputSchema", trusted=out is shape.output_schema)
            if out is not None
            else None
        ),
        title=options.get("title"),
        annotations=normalize_annotations(options.get("annotations"), tool_name),
        icons=normalize_icons(options.get("icons"), f"tool {tool_name!r}"),
        task_support=check_task_support(options.get("task"), tool_name),
        meta=options.get("meta"),
        injected=dict(shape.injected),
        converters=dict(shape.converters) if trusted else {},
        immediate_response=options.get("immediate_response"),
        ask_before_task=check_ask_before_task(options.get("ask_before_task"), tool_name, options.get("task")),
        timeout=check_timeout(options.get("timeout"), f"tool {tool_name!r}"),
        version=check_version(options.get("version"), f"tool {tool_name!r}"),
        security_level=check_security_level(options.get("security_level"), f"tool {tool_name!r}"),
        scopes=check_scopes(options.get("scopes"), f"tool {tool_name!r}"),
    )
