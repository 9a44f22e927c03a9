"""Input limits: how deep, how long and how large a call's arguments may be, checked before any validation runs.

A schema validator walks what it is given; these limits bound that walk (and the tool's own work) for arguments
that are well-formed JSON but hostile in size: a string of a hundred million characters, or a thousand nested
arrays. The check is one iterative walk (no recursion limit to hit) that stops at the first excess.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..protocol.errors import ToolError
from ..protocol.paths import format_path
from .sanitise import clean_error

PATH_CHARS = 120  # a path in a message is cut here: a hostile one may be as long as the arguments themselves

# Encoded size bounds per value, for skipping the exact count (orjson.dumps) when the walk proves it is not needed:
# a character encodes to at most 6 bytes (\u001f; a non-BMP character is 4 bytes for 1 code point), a number or a
# literal to at most 32 (orjson writes floats in at most 24 characters, ints in at most 20).
_SCALAR_BYTES = 32
_CHAR_BYTES = 6


class InputLimits:
    """``check(arguments)`` says which limit arguments exceed, or returns None.

    ``max_depth`` counts nested objects and arrays, the arguments object itself being level 1; ``max_string``
    counts the characters (code points) of each string, object keys included; ``max_bytes`` is the size of the
    arguments encoded as compact JSON. As a pipeline limiter (``deck.pipeline.limiters.append(limits)``), a call
    whose arguments exceed a limit is refused with a ``ToolError``: an isError result for a tool, an error response
    for a resource or a prompt.
    """

    __slots__ = ("max_depth", "max_string", "max_bytes")

    def __init__(self, max_depth: int = 32, max_string: int = 1_000_000, max_bytes: int = 4_194_304) -> None:
        for name, value in (("max_depth", max_depth), ("max_string", max_string), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"InputLimits.{name}: expected a positive integer, got {value!r}")
        self.max_depth = max_depth
        self.max_string = max_string
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"InputLimits(max_depth={self.max_depth}, max_string={self.max_string}, max_bytes={self.max_bytes})"

    def check(self, arguments: Any) -> str | None:
        """None if ``arguments`` are within every limit; otherwise what is exceeded, and where."""
        max_depth, max_string = self.max_depth, self.max_string
        bound = 0  # an upper bound of the encoded size
        # Each entry: (value, its level, the entry of its container, its key there); the path is rebuilt from the
        # chain only when a limit is exceeded.
        stack: list[tuple[Any, int, Any, Any]] = [(arguments, 1, None, None)]
        while stack:
            entry = stack.pop()
            value, level = entry[0], entry[1]
            kind = type(value)
            if kind is str:
                if len(value) > max_string:
                    return f"string at {_path(entry)} is {len(value):,} characters; the limit is {max_string:,}"
                bound += _CHAR_BYTES * len(value) + 2
            elif kind is dict or kind is list or kind is tuple:
                if level > max_depth:
                    return f"arguments nest deeper than {max_depth} levels at {_path(entry)}"
                bound += 2 + len(value)
                if kind is dict:
                    for key, item in value.items():
                        if type(key) is str:
                            if len(key) > max_string:
                                where = _path(entry)
                                return f"a key in {where} is {len(key):,} characters; the limit is {max_string:,}"
                            bound += _CHAR_BYTES * len(key) + 3
                        if type(item) in _LEAVES:
                            bound += _SCALAR_BYTES
                        else:
                            stack.append((item, level + 1, entry, key))
                else:
                    for index, item in enumerate(value):
                        if type(item) in _LEAVES:
                            bound += _SCALAR_BYTES
                        else:
                            stack.append((item, level + 1, entry, index))
            else:
                bound += _SCALAR_BYTES
        if bound <= self.max_bytes:
            return None
        try:
            size = len(orjson.dumps(arguments))
        except TypeError:  # not JSON: the schema check says what is wrong with it
            return None
        if size > self.max_bytes:
            return f"arguments are {size:,} bytes; the limit is {self.max_bytes:,}"
        return None

    def __call__(self, rctx: Any, call: Any) -> None:
        """The pipeline limiter step: refuse a call whose arguments exceed a limit."""
        problem = self.check(call.arguments)
        if problem is not None:
            raise ToolError(clean_error(f"Arguments for {call.kind} {call.name!r} refused: {problem}"))


_LEAVES = frozenset({int, float, bool, type(None)})


def _path(entry: tuple[Any, int, Any, Any]) -> str:
    parts: list[str | int] = []
    while entry[2] is not None:
        parts.append(entry[3])
        entry = entry[2]
    path = format_path(reversed(parts))
    return clean_error(path, PATH_CHARS)
