"""Binding code to a definition's capabilities, checked at load so that no tool fails at call time for want of one.

A capability is bound, most specific first, by its own ``handler`` in the file or ``@deck.implements("id.cap")``,
else by the tool's ``handler`` or ``@deck.implements("id")`` (one function for every capability, called with
``capability=<name>``). A handler is a Python function (``"module:function"`` in the file) or a command
(``{"command": [...]}``, see command.py). A function's signature must fit the capability's parameters: it takes
each of them (or ``**kwargs``), and every parameter it requires is a required one.
"""

from __future__ import annotations

import functools
import importlib
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model.metadata import is_async
from ..protocol.errors import RegistrationError, SchemaError
from ..schema.generate import inspect_function
from ..schema.parameters import NO_DEFAULT, VAR_KEYWORD, read_parameters
from .definition import Definition

if TYPE_CHECKING:
    from ..schema.validate import Validator

CAPABILITY = "capability"  # the keyword a tool-wide handler receives the capability's name as


class Handler:
    """A capability's code, ready to be a Tool's ``fn``: called with the validated arguments as keywords (and the
    injected ones, like a Context)."""

    __slots__ = ("fn", "is_async", "injected")

    def __init__(self, fn: Callable[..., Any], is_async: bool, injected: dict[str, type]) -> None:
        self.fn = fn
        self.is_async = is_async
        self.injected = injected


def bind(
    definition: Definition,
    index: int,
    bindings: dict[str, Callable[..., Any]],
    injectable: tuple[type, ...],
    output: tuple[Validator, bool] | None = None,
) -> Handler:
    """The handler of capability ``index`` of ``definition``; RegistrationError (with the file and JSON path) if it
    has none or the one it has cannot serve it. ``output``: the tool's output validator and whether it wraps results,
    for a command to check its own output against (see command.py)."""
    document = definition.document
    capability = document["capabilities"][index]
    name = capability["name"]
    where = f"{definition.source or definition.id}: $.capabilities[{index}]"
    own = [h for h in (capability.get("handler"), bindings.get(f"{definition.id}.{name}")) if h is not None]
    shared = [h for h in (document.get("handler"), bindings.get(definition.id)) if h is not None]
    if len(own) > 1 or (not own and len(shared) > 1):
        which = f"{definition.id}.{name}" if own else definition.id
        raise RegistrationError(
            f"{where}: {which!r} has a handler in the file and one from @deck.implements({which!r}); keep one"
        )
    if own:
        handler, per_tool, location = own[0], False, f"{where}.handler"
    elif shared:
        handler, per_tool, location = shared[0], True, f"{definition.source or definition.id}: $.handler"
    else:
        raise RegistrationError(
            f'{where}: capability {name!r} has no handler: add "handler" to it (or to the tool), or bind a function '
            f"with @deck.implements({definition.id + '.' + name!r}) before loading the definition"
        )
    if isinstance(handler, dict):
        from .command import CommandHandler

        parameters = [parameter["name"] for parameter in capability.get("parameters", ())]
        command = CommandHandler(handler, base_dir=definition.base_dir, tool=definition.id, capability=name,
                                 where=location, parameters=parameters, files=definition.files, output=output,
                                 label=definition.label)  # fmt: skip
        return Handler(command, True, {})
    fn = _import(handler, definition.base_dir, location) if isinstance(handler, str) else handler
    label = getattr(fn, "__qualname__", None) or repr(fn)
    injected = _check_signature(fn, capability.get("parameters", ()), per_tool, injectable, where, label)
    if per_tool:
        fn = functools.partial(fn, **{CAPABILITY: name})
    return Handler(fn, is_async(fn), injected)


def _import(reference: str, base_dir: str, where: str) -> Callable[..., Any]:
    module_name, _, attribute = reference.partition(":")
    if base_dir not in sys.path:
        sys.path.insert(0, base_dir)  # a definition's modules live beside it, as a script's neighbours do
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise RegistrationError(
                f"{where}: handler {reference!r}: no module named {exc.name!r} (looked beside the definition, in "
                f"{base_dir}, and on sys.path)"
            ) from None
        raise RegistrationError(f"{where}: handler {reference!r}: importing it failed: {exc}") from None
    except Exception as exc:
        raise RegistrationError(
            f"{where}: handler {reference!r}: importing it failed: {type(exc).__name__}: {exc}"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise RegistrationError(f"{where}: handler {reference!r}: {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise RegistrationError(
            f"{where}: handler {reference!r} is not a function (its type is {type(target).__name__})"
        )
    return target


_signatures: weakref.WeakKeyDictionary[Any, tuple[tuple[type, ...], dict[str, type], list[Any]]] = (
    weakref.WeakKeyDictionary()
)


def _read(fn: Callable[..., Any], injectable: tuple[type, ...]) -> tuple[dict[str, type], list[Any]]:
    """The injected parameters and the signature of ``fn``, read once per function: one handler often serves many
    capabilities, and reading type hints is most of what loading a definition costs."""
    try:
        cached = _signatures.get(fn)
    except TypeError:  # not weakly referenceable (a builtin, say): read it every time
        cached = None
    if cached is not None and cached[0] == injectable:
        return dict(cached[1]), cached[2]
    injected = dict(inspect_function(fn, injectable=injectable, schema_given=True, output=False).injected)
    signature = read_parameters(fn)
    try:
        _signatures[fn] = (injectable, injected, signature)
    except TypeError:
        pass
    return dict(injected), signature


def _check_signature(
    fn: Callable[..., Any], parameters: Any, per_tool: bool, injectable: tuple[type, ...], place: str, label: str
) -> dict[str, type]:
    """The injected parameters of ``fn``, after checking that it can take the capability's arguments."""
    where = f"{place}: {label}"
    if not callable(fn):
        raise RegistrationError(f"{where}: a handler must be callable, got {type(fn).__name__}")
    try:
        injected, signature = _read(fn, injectable)
    except (SchemaError, TypeError, ValueError) as exc:
        # inspect_function's messages may start with the function's name already: say it once
        raise RegistrationError(f"{where}: {str(exc).removeprefix(f'{label}: ')}") from None
    declared = {p["name"]: bool(p.get("required", False)) for p in parameters}
    if per_tool and CAPABILITY in declared:
        raise RegistrationError(
            f"{where}: a tool-wide handler receives the capability's name as {CAPABILITY!r}, which is also a "
            f"parameter; give the capability a handler of its own"
        )
    takes_any = any(kind == VAR_KEYWORD for _, kind, _ in signature)
    # inspect_function has refused *args and positional-only parameters already: what is left is taken by name.
    takes = {name for name, kind, _ in signature if kind != VAR_KEYWORD}
    for name, kind, default in signature:
        if name in injected or kind == VAR_KEYWORD:
            continue
        if per_tool and name == CAPABILITY:
            continue
        if default is NO_DEFAULT and name not in declared:
            raise RegistrationError(f"{where}: requires {name!r}, which is not a parameter of the capability")
        if default is NO_DEFAULT and not declared[name]:
            raise RegistrationError(
                f"{where}: requires {name!r}, which the capability declares optional; give it a default"
            )
    if per_tool and CAPABILITY not in takes and not takes_any:
        raise RegistrationError(f"{where}: a tool-wide handler must take the capability's name as {CAPABILITY!r}")
    if not takes_any:
        missing = [name for name in declared if name not in takes]
        if missing:
            raise RegistrationError(
                f"{where}: does not take parameter {missing[0]!r} of the capability (add it, or **kwargs)"
            )
    return injected
