"""The JSON codec for wire messages: orjson, with the errors the protocol needs."""

from __future__ import annotations

from typing import Any

import orjson

from .errors import INTERNAL_ERROR, ParseError

Fragment = orjson.Fragment  # pre-encoded JSON spliced into a message without re-encoding


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text; malformed input (including nesting past 1024 levels) raises ``ParseError``."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None


def encode(message: Any) -> bytes:
    """Serialise one message compactly (no newlines). A message that cannot be encoded becomes an error reply."""
    try:
        return orjson.dumps(message)
    except TypeError as exc:
        # Only reachable through a bug that put a non-JSON value in a message; keep the connection alive.
        error: dict[str, Any] = {
            "jsonrpc": "2.0",
            "error": {"code": INTERNAL_ERROR, "message": f"Internal error: {exc}"},
        }
        if isinstance(message, dict) and "id" in message:
            error["id"] = message["id"]
        return orjson.dumps(error)


def encode_line(message: Any) -> bytes:
    """``encode`` plus the newline that frames a message on stdio."""
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return encode(message) + b"\n"
