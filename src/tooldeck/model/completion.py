"""Argument completion (completion/complete) for prompts and resource templates: a completer per argument.

A completer is a fixed list of values, offered when they start with what the user typed (case-insensitively), or a
function ``(value, context) -> list[str]`` (or an awaitable of one) that decides for itself; ``context`` holds the
arguments already filled in. Resources and prompts both use this module, so it imports nothing else from either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ..protocol.errors import RegistrationError
from ..protocol.record import Record

MAX_VALUES = 100  # the spec's cap on completion.values

CompleteFunction = Callable[[str, dict[str, str]], "list[str] | Awaitable[list[str]]"]


class Completer(Record):
    """How one argument is completed: ``choices`` (a fixed list) or ``fn``; ``label`` names it in errors."""

    __slots__ = ("choices", "fn", "label")

    def __init__(
        self, *, choices: tuple[str, ...] | None = None, fn: CompleteFunction | None = None, label: str = "argument"
    ) -> None:
        if (choices is None) == (fn is None):
            raise ValueError("a Completer needs exactly one of choices= or fn=")
        self.choices = choices
        self.fn = fn
        self.label = label


def make_completers(spec: dict[str, Any] | None, allowed: Iterable[str], owner: str) -> dict[str, Completer]:
    """Completers from ``complete={"language": ["python", "go"], "file": find_files}``.

    ``allowed`` are the argument names that can be completed; ``owner`` names the prompt or template in errors.
    """
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise RegistrationError(
            f"{owner}: complete must be a dict mapping argument names to a list of values or a function, "
            f"got {type(spec).__name__}"
        )
    names = tuple(allowed)
    completers: dict[str, Completer] = {}
    for name, how in spec.items():
        if name not in names:
            known = ", ".join(names) or "none"
            raise RegistrationError(f"{owner}: complete names unknown argument {name!r} (arguments: {known})")
        label = f"{owner}, argument {name!r}"
        if isinstance(how, list | tuple):
            for index, value in enumerate(how):
                if not isinstance(value, str):
                    raise RegistrationError(f"{label}: completion values must be strings; [{index}] is {value!r}")
            completers[name] = Completer(choices=tuple(how), label=label)
        elif callable(how):
            completers[name] = Completer(fn=how, label=label)
        else:
            raise RegistrationError(
                f"{label}: complete takes a list of strings or a function (value, context) -> list[str], "
                f"got {type(how).__name__}"
            )
    return completers


async def complete(completer: Completer | None, value: str, context: dict[str, str] | None) -> dict[str, Any]:
    """The ``completion`` object of a CompleteResult: at most 100 ``values``, the ``total``, and ``hasMore``.

    No completer gives an empty completion. A function's result that is not a list of strings raises TypeError.
    """
    if completer is None:
        return {"values": [], "total": 0, "hasMore": False}
    if completer.choices is not None:
        typed = value.casefold()
        found = [choice for choice in completer.choices if choice.casefold().startswith(typed)]
    else:
        result: Any = completer.fn(value, dict(context or {}))  # type: ignore[misc]  # fn is set when choices is not
        if hasattr(result, "__await__"):
            result = await result
        found = _check(result, completer.label)
    return {"values": found[:MAX_VALUES], "total": len(found), "hasMore": len(found) > MAX_VALUES}


def _check(result: Any, label: str) -> list[str]:
    if not isinstance(result, list | tuple):
        raise TypeError(f"{label}: the completion function must return a list of strings, got {type(result).__name__}")
    for index, item in enumerate(result):
        if not isinstance(item, str):
            raise TypeError(f"{label}: the completion function returned a non-string at [{index}]: {item!r}")
    return list(result)
