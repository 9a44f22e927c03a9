"""A tool function's parameters and docstring, read without ``inspect`` when the tool is a plain function.

Importing inspect costs ~4 ms (it loads ast, dis and tokenize) and ``inspect.signature`` ~30 µs a call, while a plain
function carries everything needed in ``__code__``, ``__defaults__`` and ``__kwdefaults__``. Every other callable
(partials, methods, classes, callable instances, builtins, functions that override their signature) goes to inspect,
imported then.
"""

from __future__ import annotations

import types
from typing import Any

from tooldeck.schema.docstring import cleandoc
from tooldeck.schema.kinds import NO_DEFAULT

# Parameter kinds, named as inspect.Parameter's are, so that ``parameter.kind.name`` converts.
POSITIONAL_ONLY = "POSITIONAL_ONLY"
POSITIONAL_OR_KEYWORD = "POSITIONAL_OR_KEYWORD"
VAR_POSITIONAL = "VAR_POSITIONAL"
KEYWORD_ONLY = "KEYWORD_ONLY"
VAR_KEYWORD = "VAR_KEYWORD"

Parameter = tuple[str, str, Any]
"""``(name, kind, default)``; the default is ``kinds.NO_DEFAULT`` when there is none."""

_CO_VARARGS = 0x04  # inspect.CO_VARARGS
_CO_VARKEYWORDS = 0x08  # inspect.CO_VARKEYWORDS
# A function carrying one of these has asked inspect.signature to report something other than its own code
# (functools.wraps sets __wrapped__), so it is left to inspect.
_SIGNATURE_OVERRIDES = ("__wrapped__", "__signature__", "__text_signature__", "_partialmethod")


def read_parameters(fn: Any) -> list[Parameter]:
    """The parameters of ``fn`` in signature order, as ``inspect.signature`` reports them.

    Raises TypeError or ValueError, as ``inspect.signature`` does, when ``fn`` has no signature to read.
    """
    if type(fn) is types.FunctionType and not any(name in fn.__dict__ for name in _SIGNATURE_OVERRIDES):
        return _from_code(fn)
    import inspect

    empty = inspect.Parameter.empty
    return [
        (parameter.name, parameter.kind.name, NO_DEFAULT if parameter.default is empty else parameter.default)
        for parameter in inspect.signature(fn).parameters.values()
    ]


def _from_code(fn: types.FunctionType) -> list[Parameter]:
    """What ``inspect.signature`` reads from a function (see ``inspect._signature_from_function``), in its order:
    positional parameters, ``*args``, keyword-only parameters, ``**kwargs``."""
    code = fn.__code__
    names = code.co_varnames
    positional = names[: code.co_argcount]
    keyword_only = names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    defaults = fn.__defaults__ or ()
    # Defaults belong to the last positional parameters; sliced as inspect does, which stays right even when
    # __defaults__ has been replaced by a longer tuple.
    without_default = len(positional) - len(defaults)
    parameters: list[Parameter] = []
    for name in positional[:without_default]:
        parameters.append((name, _positional_kind(len(parameters), code), NO_DEFAULT))
    for offset, name in enumerate(positional[without_default:]):
        parameters.append((name, _positional_kind(len(parameters), code), defaults[offset]))
    next_name = code.co_argcount + code.co_kwonlyargcount  # *args and **kwargs are named after the keyword-only ones
    if code.co_flags & _CO_VARARGS:
        parameters.append((names[next_name], VAR_POSITIONAL, NO_DEFAULT))
        next_name += 1
    keyword_defaults = fn.__kwdefaults__ or {}
    for name in keyword_only:
        parameters.append((name, KEYWORD_ONLY, keyword_defaults.get(name, NO_DEFAULT)))
    if code.co_flags & _CO_VARKEYWORDS:
        parameters.append((names[next_name], VAR_KEYWORD, NO_DEFAULT))
    return parameters


def _positional_kind(index: int, code: types.CodeType) -> str:
    return POSITIONAL_ONLY if index < code.co_posonlyargcount else POSITIONAL_OR_KEYWORD


def read_docstring(obj: Any) -> str | None:
    """``inspect.getdoc(obj)``: the cleaned docstring, or one inherited from a base class when ``obj`` has none.

    A plain function either has its own docstring or, when it is not defined in a class, inherits none; only the
    remaining cases need inspect.
    """
    if type(obj) is types.FunctionType:
        doc = obj.__doc__
        if isinstance(doc, str):
            return cleandoc(doc)
        if doc is None and "." not in obj.__qualname__:
            return None
    import inspect

    return inspect.getdoc(obj)
