"""The Prompt record and building it from a Python function: arguments from the parameters, checked on every get.

Prompt arguments arrive as strings (the schema says so), so each parameter gets a converter from text to its
annotated type: ``count: int`` receives 3 for ``"3"``, ``tone: Literal["formal", "casual"]`` refuses ``"rude"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model.arguments import ArgumentError, StringConverter, choices, string_converters
from ..model.completion import Completer, make_completers
from ..model.metadata import check_name, check_scopes, check_security_level, is_async, normalize_icons
from ..protocol.errors import InvalidParamsError, RegistrationError, SchemaError
from ..protocol.paths import preview
from ..protocol.record import Record
from ..schema.generate import inspect_function


class Prompt(Record):
    """A registered prompt. ``fn`` is called with the converted arguments; ``wire`` is its prompts/list entry."""

    __slots__ = (
        "name", "title", "description", "arguments", "icons", "meta", "fn", "is_async", "converters", "completers",
        "injected", "parameters", "required", "wire", "security_level", "scopes",
    )  # fmt: skip

    def __init__(
        self,
        *,
        name: str,
        fn: Callable[..., Any],
        is_async: bool,
        title: str | None = None,
        description: str | None = None,
        arguments: list[dict[str, Any]] | None = None,
        icons: tuple[dict[str, Any], ...] | None = None,
        meta: dict[str, Any] | None = None,
        converters: dict[str, StringConverter] | None = None,
        completers: dict[str, Completer] | None = None,
        injected: dict[str, type] | None = None,
    ) -> None:
        self.name = name
        self.title = title
        self.description = description
        self.arguments = arguments or []
        self.icons = icons
        self.meta = meta
        self.fn = fn
        self.is_async = is_async
        self.converters = converters or {}
        self.completers = completers or {}
        self.injected = injected or {}
        self.parameters: frozenset[str] = frozenset(argument["name"] for argument in self.arguments)
        self.required: tuple[str, ...] = tuple(a["name"] for a in self.arguments if a["required"])
        self.wire = _wire(self)
        self.security_level: int | None = None  # set by prompt_from_function: None, the policy's default level
        self.scopes: tuple[str, ...] = ()


def prompt_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    icons: list[dict[str, Any]] | None = None,
    meta: dict[str, Any] | None = None,
    complete: dict[str, Any] | None = None,
    injectable: tuple[type, ...] = (),
    security_level: int | None = None,
    scopes: list[str] | None = None,
) -> Prompt:
    """Everything about ``fn`` as a prompt: its name (the function's unless given), description (the docstring's),
    and one argument per parameter (described by the docstring or ``Annotated``; required when it has no default).

    ``complete`` gives completers by argument name (see resources/completion.py); arguments typed as an Enum, a
    Literal or a bool complete to their values unless told otherwise.
    """
    if not callable(fn):
        raise RegistrationError(f"a prompt must be callable, got {type(fn).__name__}")
    prompt_name = check_name(name if name is not None else getattr(fn, "__name__", None), "prompt")
    owner = f"prompt {prompt_name!r}"
    try:
        shape = inspect_function(fn, injectable=injectable, output=False)
    except SchemaError as exc:
        raise RegistrationError(f"{owner}: {exc}") from None
    for field, value in (("title", title), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise RegistrationError(f"{owner}: {field} must be a string, got {type(value).__name__}")
    if meta is not None and (not isinstance(meta, dict) or not all(isinstance(key, str) for key in meta)):
        raise RegistrationError(f"{owner}: meta must be a dict with string keys")
    properties: dict[str, Any] = shape.input_schema.get("properties", {})
    defs: dict[str, Any] = shape.input_schema.get("$defs", {})
    required = shape.input_schema.get("required", [])
    arguments: list[dict[str, Any]] = []
    completers: dict[str, Completer] = {}
    for parameter in shape.parameters:
        schema = properties[parameter]
        argument: dict[str, Any] = {"name": parameter}
        for key in ("title", "description"):
            if isinstance(schema.get(key), str):
                argument[key] = schema[key]
        argument["required"] = parameter in required
        arguments.append(argument)
        values = choices(schema, defs)
        if values is not None:
            completers[parameter] = Completer(choices=values, label=f"{owner}, argument {parameter!r}")
    completers.update(make_completers(complete, shape.parameters, owner))
    prompt = Prompt(
        name=prompt_name,
        fn=fn,
        is_async=is_async(fn),
        title=title,
        description=description if description is not None else shape.description,
        arguments=arguments,
        icons=normalize_icons(icons, owner),
        meta=meta or None,
        converters=string_converters(shape),
        completers=completers,
        injected=dict(shape.injected),
    )
    prompt.security_level = check_security_level(security_level, owner)
    prompt.scopes = check_scopes(scopes, owner)
    return prompt


def check_arguments(prompt: Prompt, arguments: Any) -> dict[str, Any]:
    """The keyword arguments for ``prompt.fn`` from the ``arguments`` of prompts/get, converted to their types.

    Raises InvalidParamsError (-32602) naming the problem: not an object of strings, an unknown or missing
    argument, or a value that is not of its argument's type.
    """
    where = f"prompt {prompt.name!r}"
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidParamsError(
            f"Invalid arguments for {where}: expected an object mapping argument names to strings, "
            f"got {preview(arguments)}"
        )
    for name, value in arguments.items():
        if not isinstance(value, str):
            raise InvalidParamsError(
                f"Invalid arguments for {where}: argument values are strings; {name!r} is {preview(value)}"
            )
    unknown = [name for name in arguments if name not in prompt.parameters]
    if unknown:
        takes = ", ".join(a["name"] for a in prompt.arguments) or "no arguments"
        raise InvalidParamsError(f"Unknown argument {unknown[0]!r} for {where} (it takes: {takes})")
    missing = [name for name in prompt.required if name not in arguments]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise InvalidParamsError(f"Missing required argument{'s' if len(missing) > 1 else ''} {names} for {where}")
    converters = prompt.converters
    try:
        return {name: converters[name](text) if name in converters else text for name, text in arguments.items()}
    except ArgumentError as error:
        raise InvalidParamsError(f"Invalid arguments for {where}: {error}") from None


def _wire(prompt: Prompt) -> dict[str, Any]:
    """The Prompt object as prompts/list sends it."""
    wire: dict[str, Any] = {"name": prompt.name}
    if prompt.title is not None:
        wire["title"] = prompt.title
    if prompt.description is not None:
        wire["description"] = prompt.description
    if prompt.arguments:
        wire["arguments"] = prompt.arguments
    if prompt.icons:
        wire["icons"] = list(prompt.icons)
    if prompt.meta:
        wire["_meta"] = prompt.meta
    return wire
