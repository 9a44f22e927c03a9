"""The per-request envelope of revision 2026-07-28, and the marks every modern result carries.

From 2026-07-28 there is no handshake: each request names its protocol version and the client's capabilities in
``params._meta`` (``io.modelcontextprotocol/protocolVersion`` and ``.../clientCapabilities``, both required;
``.../clientInfo`` and ``.../logLevel`` optional). ``claims_modern`` is how a request is told apart from a 2025-era
one (the protocolVersion key is present); ``read`` checks the envelope (-32602 naming what is missing or malformed),
``check_version`` the revision it names (-32022 with ``supported`` and ``requested``). ``complete`` stamps a result
with ``resultType: "complete"``, the server's identity in ``_meta`` and, where the method is cacheable, the cache
hints ``ttlMs``/``cacheScope``. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from . import versions
from .errors import InvalidParamsError, UnsupportedVersionError
from .record import Record

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"  # the extension that carries tasks from 2026-07-28 on
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # lowest first
_LOG_LEVELS = frozenset(LOG_LEVELS)
SCOPES = ("public", "private")


class Envelope(Record):
    """What one modern request says about itself: its revision, the client's capabilities, who the client says it
    is, and the lowest log level it wants (None: no logs at all for this request)."""

    __slots__ = ("client_capabilities", "client_info", "log_level", "version")

    def __init__(self, version: str, client_capabilities: dict[str, Any], client_info: dict[str, Any] | None = None,
                 log_level: str | None = None) -> None:  # fmt: skip
        self.version = version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.log_level = log_level


def claims_modern(params: Any) -> bool:
    """Whether a request's params claim the modern era: ``_meta`` is an object holding the protocolVersion key."""
    if type(params) is not dict:
        return False
    meta = params.get("_meta")
    return type(meta) is dict and PROTOCOL_VERSION in meta


def read(params: dict[str, Any]) -> Envelope:
    """The envelope of a request's params; -32602 naming each required key that is missing, or the one malformed."""
    meta = params.get("_meta")
    if type(meta) is not dict:
        raise InvalidParamsError(
            f'Invalid params: "_meta" must be an object with "{PROTOCOL_VERSION}" and "{CLIENT_CAPABILITIES}"'
        )
    version = meta.get(PROTOCOL_VERSION)
    capabilities = meta.get(CLIENT_CAPABILITIES)
    if type(version) is not str or not version or type(capabilities) is not dict:  # one test for the usual case
        if PROTOCOL_VERSION not in meta or CLIENT_CAPABILITIES not in meta:
            missing = [key for key in (PROTOCOL_VERSION, CLIENT_CAPABILITIES) if key not in meta]
            raise InvalidParamsError(f"Invalid params: _meta lacks {' and '.join(repr(k) for k in missing)}",
                                     {"missing": missing})  # fmt: skip
        if type(version) is not str or not version:
            raise InvalidParamsError(f'Invalid params: _meta "{PROTOCOL_VERSION}" must be a non-empty string')
        raise InvalidParamsError(f'Invalid params: _meta "{CLIENT_CAPABILITIES}" must be an object')
    info = meta.get(CLIENT_INFO)
    if info is not None and (type(info) is not dict or type(info.get("name")) is not str
                             or type(info.get("version")) is not str):  # fmt: skip
        raise InvalidParamsError(f'Invalid params: _meta "{CLIENT_INFO}" must be an object with string "name" '
                                 'and "version"')  # fmt: skip
    level = meta.get(LOG_LEVEL)
    if level is not None and (type(level) is not str or level not in _LOG_LEVELS):
        raise InvalidParamsError(f"Invalid params: unknown log level {level!r} in _meta; use one of "
                                 f"{', '.join(LOG_LEVELS)}")  # fmt: skip
    return Envelope(version, capabilities, info, level)


def check_version(version: str) -> None:
    """-32022 unless ``version`` is a modern revision tooldeck serves."""
    if version not in versions.MODERN_SET:
        raise UnsupportedVersionError(version, versions.MODERN)


def complete(result: dict[str, Any], server_info: dict[str, Any],
             hints: tuple[int, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """``result`` as a modern complete result (a new dict: results may be shared, cached answers)."""
    return stamp(dict(result), server_info, hints)


def stamp(result: dict[str, Any], server_info: dict[str, Any],
          hints: tuple[int, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """``complete``, in place: for a result made for one request alone (its ``_meta`` is replaced, not changed)."""
    result["resultType"] = "complete"
    meta = result.get("_meta")
    result["_meta"] = {**meta, SERVER_INFO: server_info} if type(meta) is dict else {SERVER_INFO: server_info}
    if hints is not None:
        result["ttlMs"], result["cacheScope"] = hints
    return result
