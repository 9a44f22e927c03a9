"""The JSON codec for wire messages: orjson on the fast path, exact and forgiving where orjson cannot be.

Decoding: orjson reads integers up to 64 bits and turns a larger integer literal into a float (or refuses it, past
a double's range). A message that orjson refuses, or whose ``id`` came out as a float, is read again exactly (the
standard library, once, on that rare path), so the answer can carry the request's real id and name the number that
is out of range: -32600 for an id outside the 64-bit range, -32602 for such a number in ``params``.

Encoding: a message that orjson cannot encode (a lone surrogate in a tool's text, an integer past 64 bits) is
encoded exactly instead, lone surrogates replaced by U+FFFD, rather than failing the whole response.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from .errors import INTERNAL_ERROR, InvalidParamsError, InvalidRequestError, ParseError, ProtocolError
from .paths import find, format_path

Fragment = orjson.Fragment  # pre-encoded JSON spliced into a message without re-encoding
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what a client's 64-bit integer can hold (signed or unsigned)
_DIGITS = 40  # longer integer literals are kept as text: they are out of range anyway, and str -> int is quadratic


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text; malformed input (including nesting past 1024 levels) raises ``ParseError``.

    A request with a number out of range raises a ``ProtocolError`` whose ``request_id`` is the request's id.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return _decode_exactly(data, str(exc))
    if type(obj) is dict and type(obj.get("id")) is float:  # an integer id too large for 64 bits, or a float
        return _decode_exactly(data, None)
    return obj


def encode(message: Any) -> bytes:
    """Serialise one message compactly (no newlines). A message that cannot be encoded becomes an error reply."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return _encode_exactly(message)


def encode_line(message: Any) -> bytes:
    """``encode`` plus the newline that frames a message on stdio."""
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return _encode_exactly(message) + b"\n"


# --- the rare paths ---------------------------------------------------------------------------------------------


class _Number:
    """A number literal that no 64-bit integer or finite double holds, kept as its text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text if len(self.text) <= 24 else f"{self.text[:12]}...{self.text[-4:]} ({len(self.text)} chars)"


def _is_number(value: Any) -> bool:
    return type(value) is _Number


def _int(text: str) -> Any:
    if len(text) > _DIGITS:
        return _Number(text)
    value = int(text)
    return value if _INT_MIN <= value <= _INT_MAX else _Number(text)


def _float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _Number(text)


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _decode_exactly(data: Any, orjson_error: str | None) -> Any:
    import json

    try:
        text = bytes(data).decode() if not isinstance(data, str) else data
        obj = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except (ValueError, RecursionError):
        raise ParseError(f"Parse error: {orjson_error or 'not JSON'}") from None
    found = find(obj, _is_number)
    if type(obj) is not dict:
        if found is not None:
            raise ParseError(f"Parse error: the number {found[1]!r} at {format_path(found[0])} is out of range")
        return obj
    raw_id = obj.get("id")
    if type(raw_id) is _Number or (type(raw_id) is int and not _INT_MIN <= raw_id <= _INT_MAX):
        error: ProtocolError = InvalidRequestError(
            f'Invalid request: "id" {raw_id!r} is outside the 64-bit integer range; use a smaller integer or a string'
        )
        # Echoed exactly (encode() falls back to the exact encoder for it); an absurdly long one is not echoed.
        echo: int | None = raw_id if type(raw_id) is int else None
        if isinstance(raw_id, _Number) and len(raw_id.text) <= 1000:
            echo = int(raw_id.text)
        error.request_id = echo
        raise error
    if found is None:
        return obj
    if "id" not in obj:  # a notification: it gets no answer, not even an error; its numbers become null
        return _without_numbers(obj)
    path, number = found
    error = InvalidParamsError(
        f"Invalid params: the number {number!r} at {format_path(path[1:]) if path[:1] == ['params'] else format_path(path)}"
        " is out of range (JSON numbers must fit a 64-bit integer or a double)"
    )
    error.request_id = raw_id
    raise error


def _without_numbers(value: Any) -> Any:
    if type(value) is _Number:
        return None
    if type(value) is dict:
        return {k: _without_numbers(v) for k, v in value.items()}
    if type(value) is list:
        return [_without_numbers(v) for v in value]
    return value


def _encode_exactly(message: Any) -> bytes:
    import json

    try:
        text = json.dumps(_repaired(message), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8", "replace")
    except (TypeError, ValueError) as exc:
        # Only reachable through a bug that put a non-JSON value in a message; keep the connection alive.
        error: dict[str, Any] = {
            "jsonrpc": "2.0",
            "error": {"code": INTERNAL_ERROR, "message": f"Internal error: the response could not be encoded ({exc})"},
        }
        if isinstance(message, dict) and "id" in message:
            error["id"] = message["id"]
        return orjson.dumps(error)


def _repaired(value: Any) -> Any:
    """``value`` with lone surrogates replaced (U+FFFD), so that it can be encoded as UTF-8."""
    if type(value) is str:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _has_surrogate(value) else value
    if type(value) is dict:
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    if type(value) is list or type(value) is tuple:
        return [_repaired(v) for v in value]
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
