"""Building a Tool from a Python function: schemas from type hints, description from the docstring."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.errors import RegistrationError, SchemaError
from ..schema.generate import inspect_function
from .content import CONTENT_TYPES
from .tool import (
    Tool,
    check_name,
    check_task_support,
    compile_schema,
    is_async,
    normalize_annotations,
    normalize_icons,
)


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: dict[str, Any] | None = None,
    icons: list[dict[str, Any]] | None = None,
    task: str | bool | None = None,
    meta: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | bool | None = None,
    input_schema: dict[str, Any] | None = None,
    immediate_response: str | None = None,
    injectable: tuple[type, ...] = (),
) -> Tool:
    """Everything about ``fn`` as a tool, checked and compiled now so that calls do no schema work.

    ``output_schema``: None derives it from the return annotation, False turns structured output off, a dict
    replaces it (the tool must then return a value that matches it). ``input_schema``: advertise and enforce this
    schema, exactly as given, instead of one built from the signature; the validated arguments are passed as
    keyword arguments (so ``fn`` takes those names, or ``**kwargs``).
    """
    if not callable(fn):
        raise RegistrationError(f"a tool must be callable, got {type(fn).__name__}")
    tool_name = check_name(name if name is not None else getattr(fn, "__name__", None))
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
        title=title,
        annotations=normalize_annotations(annotations, tool_name),
        icons=normalize_icons(icons, f"tool {tool_name!r}"),
        task_support=check_task_support(task, tool_name),
        meta=meta,
        injected=dict(shape.injected),
        converters=dict(shape.converters) if trusted else {},
        immediate_response=immediate_response,
    )
