"""JSON paths (``$.items[2].name``) and compact value previews, shared by validation and conversion messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

PREVIEW_CHARS = 60


def format_path(parts: Iterable[str | int]) -> str:
    """``["items", 2, "odd key"]`` -> ``$.items[2]["odd key"]``; the empty path is ``$``."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isascii() and part.isidentifier():  # [A-Za-z_][A-Za-z0-9_]*, without compiling a regex
            out.append(f".{part}")
        else:
            out.append(f"[{orjson.dumps(part).decode()}]")
    return "".join(out)


def find(
    value: Any, matches: Callable[[Any], bool], path: tuple[str | int, ...] = ()
) -> tuple[list[str | int], Any] | None:
    """The JSON path and the value of the first leaf in ``value`` (dicts, lists, tuples, dataclasses, depth first)
    that ``matches``, or None."""
    if matches(value):
        return list(path), value
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    elif hasattr(value, "__dataclass_fields__"):
        items = ((name, getattr(value, name, None)) for name in value.__dataclass_fields__)
    else:
        return None
    for key, item in items:
        found = find(item, matches, (*path, key))
        if found is not None:
            return found
    return None


def path_key(parts: Iterable[str | int]) -> tuple[tuple[int, int | str], ...]:
    """A sort key that orders paths by depth-first position, with array indices in numeric order."""
    return tuple((0, part) if isinstance(part, int) else (1, part) for part in parts)


def preview(value: Any) -> str:
    """The value as compact JSON, cut to about 60 characters; a value JSON cannot hold falls back to ``repr``."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    if len(text) > PREVIEW_CHARS:
        return text[: PREVIEW_CHARS - 3] + "..."
    return text
