"""The values of the headers a 2026-07-28 client mirrors from its request body (SEP-2243): the Base64 sentinel
``=?base64?...?=`` of ``Mcp-Name`` and ``Mcp-Param-*``, and the ``Mcp-Param-{Name}`` headers of a tools/call, one
per ``x-mcp-header`` parameter of the tool (``tools/headers.py`` lists them when the tool is registered).

A parameter whose value is in the arguments and not null needs its header, equal to the value: strings literally,
integers numerically (``42`` = ``42.0``), booleans as ``true``/``false``. A parameter that is absent or null needs
no header (one sent anyway must still be well-formed). Other ``Mcp-Param-*`` headers are not looked at. Every
refusal is a ``HeaderMismatchError`` (-32020, HTTP 400) naming the header and what was wrong with it.
"""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal
from typing import Any

from ...protocol.errors import HeaderMismatchError
from ...protocol.paths import format_path
from ...tools.headers import MirroredParam
from .responses import Headers

OWS = " \t"
SENTINEL = ("=?base64?", "?=")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")  # a JSON number


def decode(raw: bytes, name: str) -> str:
    """A mirrored header's value: without its surrounding whitespace, and decoded when it uses the Base64 sentinel
    (the form for values a header cannot carry as they are)."""
    value = raw.decode("latin-1").strip(OWS)
    if value.startswith(SENTINEL[0]) and value.endswith(SENTINEL[1]) and len(value) >= 11:
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise HeaderMismatchError(f"Header mismatch: {name} is not valid Base64 of UTF-8 text between "
                                      "=?base64? and ?=") from None  # fmt: skip
    if not value.isascii() or not value.isprintable():
        raise HeaderMismatchError(f"Header mismatch: {name} has characters a header may not carry; send the value "
                                  "in the Base64 form =?base64?...?=")  # fmt: skip
    return value


def check_params(params: tuple[MirroredParam, ...], arguments: Any, headers: Headers) -> None:
    """Raise the -32020 of the first ``Mcp-Param-*`` header that is missing, malformed or not equal to its argument."""
    for param in params:
        value = arguments
        for key in param.path:
            value = value.get(key) if type(value) is dict else None
        raw = headers.get(param.key)
        if value is None or type(value) in (dict, list):  # absent or null: no header is expected; an object or
            if raw is not None:  # array cannot be mirrored (the inputSchema refuses it when the tool is called)
                decode(raw, param.header)
            continue
        where = "params" + format_path(("arguments", *param.path))[1:]
        if raw is None:
            raise HeaderMismatchError(f"Header mismatch: the {param.header} header is required, as {where} is "
                                      "present (the tool declares it with x-mcp-header)")  # fmt: skip
        text = decode(raw, param.header)
        if not _equal(text, value):
            raise HeaderMismatchError(f"Header mismatch: {param.header} is {text!r} but {where} is "
                                      f"{_shown(value)}")  # fmt: skip


def _equal(text: str, value: Any) -> bool:
    kind = type(value)
    if kind is str:
        return text == value
    if kind is bool:
        return text == ("true" if value else "false")
    return _NUMBER.fullmatch(text) is not None and Decimal(text) == Decimal(value)  # int or float: 42 = 42.0


def _shown(value: Any) -> str:
    if type(value) is bool:
        return "true" if value else "false"
    return repr(value)
