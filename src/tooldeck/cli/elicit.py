"""Answering a server's form elicitation from the terminal: the message, then one prompt per field of the requested
schema (converted to the field's type), on stderr. ``tooldeck call`` offers elicitation only when stdin and stderr
are terminals: a confirmation a person has to give cannot come from a pipe.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

_YES = ("y", "yes", "true", "1")
_NO = ("n", "no", "false", "0")


def interactive() -> bool:
    """Whether a person can answer: stdin and stderr are both terminals."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def answer(params: dict[str, Any], read: Callable[[str], str] = input, out: TextIO | None = None) -> dict[str, Any]:
    """The ElicitResult for a form ``elicitation/create``: accept with the values typed, or decline at end of input
    (Ctrl-D). A value that does not fit its field is asked for again, saying what it takes."""
    from ..security.sanitise import clean_text  # the server's text reaches a terminal: no escape sequences

    out = out if out is not None else sys.stderr
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required", ()))
    print(f"\n{clean_text(str(params.get('message', '')))}", file=out)
    content: dict[str, Any] = {}
    try:
        for name, field in (schema.get("properties") or {}).items():
            field = field if isinstance(field, dict) else {}
            label = clean_text(str(field.get("title") or name))
            hint = _hint(field) + ("" if name in required else ", optional")
            while True:
                text = read(f"{label} ({hint}): ").strip()
                if not text:
                    if name in required:
                        print(f"  {label} is required", file=out)
                        continue
                    break
                value, problem = _convert(text, field)
                if problem is None:
                    content[name] = value
                    break
                print(f"  {problem}", file=out)
    except EOFError:
        print("", file=out)
        return {"action": "decline"}
    return {"action": "accept", "content": content}


def _hint(field: dict[str, Any]) -> str:
    options = field.get("enum") or [item.get("const") for item in field.get("oneOf", []) if isinstance(item, dict)]
    if options:
        return " | ".join(str(option) for option in options)
    return {"boolean": "y/n", "integer": "a whole number", "number": "a number"}.get(field.get("type", ""), "text")


def _convert(text: str, field: dict[str, Any]) -> tuple[Any, str | None]:
    kind = field.get("type")
    options = field.get("enum") or [item.get("const") for item in field.get("oneOf", []) if isinstance(item, dict)]
    if options:
        return (text, None) if text in options else (None, f"one of: {', '.join(map(str, options))}")
    if kind == "boolean":
        lowered = text.lower()
        return (lowered in _YES, None) if lowered in _YES + _NO else (None, "answer y or n")
    if kind in ("integer", "number"):
        try:
            value: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            return None, f"{'a whole number' if kind == 'integer' else 'a number'}, like 3"
        return value, None
    return text, None
