"""Python type hints -> JSON Schema 2020-12: ``type_schema`` for one annotation, ``inspect_function`` for a tool.

``inspect_function`` reads a tool function once, at registration: its input schema, the parameters tooldeck injects,
the converters a call needs, and the output schema with whether results are wrapped as ``{"result": ...}``.

This module is on the server's start-up path, so neither it nor what it imports loads inspect, dataclasses, pathlib,
decimal, uuid or base64 (tests/schema/test_imports.py holds it to that).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from typing import Any

import orjson

from tooldeck.protocol.errors import ConversionError, SchemaError
from tooldeck.schema import kinds
from tooldeck.schema.builder import Mode, Schema, SchemaBuilder, set_default, type_repr
from tooldeck.schema.convert import Converter, converter_for
from tooldeck.schema.docstring import parse_docstring
from tooldeck.schema.parameters import POSITIONAL_ONLY, VAR_KEYWORD, VAR_POSITIONAL, read_docstring, read_parameters


def type_schema(tp: Any, defs: dict[str, Schema], *, mode: Mode = "validation") -> Schema:
    """The JSON Schema for values of ``tp``; named types are added to ``defs`` and referenced as ``#/$defs/Name``.

    ``mode="serialization"`` asks pydantic models for the schema of what they dump rather than what they accept.
    Raises SchemaError for a type JSON cannot carry.
    """
    return SchemaBuilder(defs, mode, f"type {type_repr(tp)}").schema(tp)


class FunctionShape:
    """What tooldeck needs to know about a tool function, computed once at registration; read-only by convention.

    A plain class rather than a dataclass: creating a frozen dataclass costs ~1 ms of import time.
    """

    __slots__ = ("description", "parameters", "input_schema", "injected", "converters", "output_schema", "wraps_output")

    description: str | None
    """The docstring without its parameter sections; None when there is no docstring."""
    parameters: tuple[str, ...]
    """The parameter names the client sees, in signature order."""
    input_schema: Schema
    injected: dict[str, type]
    """Parameters tooldeck passes itself (by keyword), with the class that matched."""
    converters: dict[str, Converter]
    """Only the parameters whose JSON value must be converted; raise ConversionError with a ``$.param`` path."""
    output_schema: Schema | None
    wraps_output: bool
    """True when the result is reported as ``{"result": value}`` because its own schema is not an object."""

    def __init__(
        self,
        *,
        description: str | None,
        parameters: tuple[str, ...],
        input_schema: Schema,
        injected: dict[str, type],
        converters: dict[str, Converter],
        output_schema: Schema | None,
        wraps_output: bool,
    ) -> None:
        self.description = description
        self.parameters = parameters
        self.input_schema = input_schema
        self.injected = injected
        self.converters = converters
        self.output_schema = output_schema
        self.wraps_output = wraps_output

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not FunctionShape:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # equal shapes may hold different (unhashable) dicts

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"FunctionShape({fields})"


def inspect_function(
    fn: Callable[..., Any],
    *,
    injectable: tuple[type, ...] = (),
    unstructured: tuple[type, ...] = (),
    schema_given: bool = False,
    output: bool = True,
) -> FunctionShape:
    """Read a tool function's signature, type hints and docstring.

    ``injectable`` classes (a context object, say) are left out of the schema and recorded in ``injected``.
    A return annotation that mentions an ``unstructured`` class (content blocks) gives no output schema.
    ``schema_given``: the caller brings its own input schema, so parameters are not turned into one (and a
    ``**kwargs`` catch-all is fine); the returned ``input_schema`` is then empty. ``output=False``: the return
    annotation is not described (resources and prompts return content, not structured output).
    """
    target = _hints_target(fn)
    label = getattr(target, "__qualname__", None) or repr(fn)
    try:
        parameters = read_parameters(fn)
    except (TypeError, ValueError) as error:
        raise SchemaError(f"cannot read the signature of {label}: {error}") from None
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as error:  # NameError for a forward reference that does not resolve, mostly
        raise SchemaError(f"cannot resolve the type hints of {label}: {type(error).__name__}: {error}") from None
    # A class used as a tool is documented on the class, not on the __init__ its hints come from.
    description, param_docs = parse_docstring(read_docstring(fn if isinstance(fn, type) else target))

    defs: dict[str, Schema] = {}
    builder = SchemaBuilder(defs, "validation", "")
    properties: dict[str, Schema] = {}
    required: list[str] = []
    injected: dict[str, type] = {}
    converters: dict[str, Converter] = {}
    for name, kind, default in parameters:
        annotation = hints.get(name, Any)
        match = _injectable_class(annotation, injectable)
        if match is not None:
            injected[name] = match
            continue
        if schema_given and kind != VAR_POSITIONAL and kind != POSITIONAL_ONLY:
            continue  # described by the caller's schema
        _check_kind(label, name, kind)
        builder.subject = f"parameter '{name}' (type {type_repr(annotation)})"
        schema = builder.schema(annotation)
        if "description" not in schema and name in param_docs:
            schema["description"] = param_docs[name]
        if default is kinds.NO_DEFAULT:
            required.append(name)
        else:
            set_default(schema, default)
        properties[name] = schema
        try:
            convert = converter_for(annotation)
        except SchemaError as error:
            raise SchemaError(f"parameter '{name}' (type {type_repr(annotation)}): {error}") from None
        if convert is not None:
            converters[name] = _at_parameter(name, convert)

    input_schema: Schema
    if schema_given:
        input_schema = {}
    elif properties:
        input_schema = {"type": "object", "properties": properties}
        if required:
            input_schema["required"] = required
        if defs:
            input_schema["$defs"] = defs
    else:
        input_schema = {"type": "object", "additionalProperties": False}
    output_schema, wraps_output = _output_schema(hints, unstructured) if output else (None, False)
    return FunctionShape(
        description=description,
        parameters=tuple(properties),
        input_schema=input_schema,
        injected=injected,
        converters=converters,
        output_schema=output_schema,
        wraps_output=wraps_output,
    )


def _hints_target(fn: Any) -> Any:
    """The object whose annotations, globals and docstring describe ``fn``."""
    if type(fn) is types.FunctionType:
        return fn  # the usual case, answered without importing inspect
    while isinstance(fn, functools.partial):
        fn = fn.func
    if isinstance(fn, type):
        return fn.__init__  # type: ignore[misc]  # a class used as a tool: its constructor takes the arguments
    import inspect

    if inspect.isroutine(fn) or not callable(fn):
        return fn
    return type(fn).__call__  # a callable instance


def _check_kind(label: str, name: str, kind: str) -> None:
    if kind == VAR_POSITIONAL:
        raise SchemaError(f"{label}: *{name} is not supported; a tool takes named arguments, so declare each one")
    if kind == VAR_KEYWORD:
        raise SchemaError(f"{label}: **{name} is not supported; a tool takes named arguments, so declare each one")
    if kind == POSITIONAL_ONLY:
        raise SchemaError(
            f"{label}: parameter '{name}' is positional-only; a tool takes named arguments, so remove the '/'"
        )


def _injectable_class(annotation: Any, injectable: tuple[type, ...]) -> type | None:
    """The ``injectable`` class an annotation names, looking inside Annotated and Optional/Union."""
    if not injectable:
        return None
    bare, _ = kinds.strip_annotated(annotation)
    if isinstance(bare, type) and issubclass(bare, injectable):
        return bare
    if kinds.is_union(bare):
        for arg in typing.get_args(bare):
            match = _injectable_class(arg, injectable)
            if match is not None:
                return match
    return None


def _mentions(tp: Any, classes: tuple[type, ...]) -> bool:
    """Whether an annotation involves one of ``classes`` anywhere (``list[Image]``, ``Image | str``, ...)."""
    if not classes:
        return False
    bare, _ = kinds.strip_annotated(tp)
    if isinstance(bare, type) and issubclass(bare, classes):
        return True
    if typing.get_origin(bare) is typing.Literal:
        return False
    return any(_mentions(arg, classes) for arg in typing.get_args(bare) if arg is not Ellipsis)


def _output_schema(hints: dict[str, Any], unstructured: tuple[type, ...]) -> tuple[Schema | None, bool]:
    if "return" not in hints:
        return None, False
    annotation = hints["return"]
    if kinds.strip_annotated(annotation)[0] in (None, kinds.NoneType) or _mentions(annotation, unstructured):
        return None, False
    defs: dict[str, Schema] = {}
    schema = SchemaBuilder(defs, "serialization", f"the return value (type {type_repr(annotation)})").schema(annotation)
    root = _inline_root_ref(schema, defs)
    if root.get("type") == "object":
        output = root
        wraps = False
    else:
        output = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        wraps = True
    if defs:
        output["$defs"] = defs
    return output, wraps


def _inline_root_ref(schema: Schema, defs: dict[str, Schema]) -> Schema:
    """``{"$ref": "#/$defs/Report"}`` -> the Report object itself, dropping the definition if nothing else uses it."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return schema
    name = ref.removeprefix("#/$defs/")
    target = defs.get(name)
    if target is None or target.get("type") != "object":
        return schema
    root = {**target, **{key: value for key, value in schema.items() if key != "$ref"}}
    if orjson.dumps(f"#/$defs/{name}") not in orjson.dumps([root, defs]):
        del defs[name]
    return root


def _at_parameter(name: str, convert: Converter) -> Converter:
    def convert_parameter(value: Any) -> Any:
        try:
            return convert(value)
        except ConversionError as error:
            error.path.insert(0, name)
            raise

    return convert_parameter
