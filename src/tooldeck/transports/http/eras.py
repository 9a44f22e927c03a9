"""Both protocol eras on one Streamable HTTP endpoint: which era a POST belongs to, and the checks a 2026-07-28 POST
passes before it runs.

Classification is body-primary, as in the official TypeScript SDK: a request whose ``params._meta`` holds the
protocolVersion key is modern (served on its own, no session id); any other request is a 2025 one (initialize opens a
session, the rest name it), except that a modern ``MCP-Protocol-Version`` header without the envelope is -32602, and
an ``initialize`` under a modern header is -32020. A modern POST then climbs the ladder of the digest (§3.3): the
envelope (-32602), the mirrored headers ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` present and equal
to the body (-32020), the version served (-32022), the method known (-32601, HTTP 404), and for a tools/call of a tool
with ``x-mcp-header`` parameters their ``Mcp-Param-*`` headers (-32020, ``mirrored.py``). Every refusal has a JSON-RPC
body that echoes the request id, so a client of both eras can tell a modern server's refusal from a legacy one.
"""

from __future__ import annotations

from typing import Any

from ...protocol import envelope, versions
from ...protocol.envelope import Envelope
from ...protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatchError,
    HttpError,
)
from ...protocol.jsonrpc import Request
from ...server import stateless
from ...tools.registry import ToolRegistry
from .mirrored import OWS, SENTINEL, check_params, decode
from .responses import Headers

# The HTTP status of a modern request's JSON-RPC error (digest §10.3); any other error is answered with 200.
STATUS = {INVALID_PARAMS: 400, HEADER_MISMATCH: 400, UNSUPPORTED_PROTOCOL_VERSION: 400,
          MISSING_CLIENT_CAPABILITY: 400, METHOD_NOT_FOUND: 404}  # fmt: skip
# The body member Mcp-Name mirrors, by method (tasks/*: the tasks extension's routing header, SEP-2663).
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
         "tasks/update": "taskId", "tasks/cancel": "taskId"}  # fmt: skip


# The header forms admit's one pass takes as they stand: the served versions and the known methods, spelled exactly.
_SERVED = {version.encode(): version for version in versions.MODERN}
_KNOWN = {method.encode(): method for method in stateless.METHODS}


class UnclaimedModernError(HttpError):
    """A request without the 2026-07-28 envelope under a 2026-07-28 ``MCP-Protocol-Version`` header."""

    def __init__(self, version: str) -> None:
        super().__init__(400, INVALID_PARAMS, f'Invalid params: the MCP-Protocol-Version header says {version} but '
                                              f'the body has no "_meta" "{envelope.PROTOCOL_VERSION}" and '
                                              f'"{envelope.CLIENT_CAPABILITIES}"')  # fmt: skip


def modern_header(raw: bytes | None) -> str | None:
    """The modern revision an ``MCP-Protocol-Version`` header names, else None."""
    if raw is None:
        return None
    value = raw.decode("latin-1").strip(OWS)
    return value if versions.is_modern(value) else None


def initialize_problem(request: Request, headers: Headers) -> HeaderMismatchError | None:
    """-32020 for a 2025 initialize sent under a modern ``MCP-Protocol-Version`` header."""
    version = modern_header(headers.get(b"mcp-protocol-version"))
    if version is None:
        return None
    return HeaderMismatchError(f"Header mismatch: initialize is not part of {version}, but MCP-Protocol-Version "
                               f"names it; send initialize without that header or server/discover with the envelope")  # fmt: skip


def admit(request: Request, headers: Headers, tools: ToolRegistry | None = None) -> Envelope:
    """The envelope of a modern POST that passed the ladder; raises the ``ProtocolError`` of the first rung missed
    (its HTTP status is ``STATUS[code]``). ``tools``: where a tools/call finds its tool's ``Mcp-Param-*`` headers."""
    params = request.params
    env = envelope.read(params)
    method = request.method
    member = NAMED.get(method)
    value = None if member is None else params.get(member)
    # The usual case in one pass: each mirrored header is exactly the body's value as it stands,
    # the version is served and the method known. Anything else climbs the ladder rung by rung, for its error.
    if not (_SERVED.get(headers.get(b"mcp-protocol-version")) == env.version  # type: ignore[arg-type]
            and _KNOWN.get(headers.get(b"mcp-method")) == method  # type: ignore[arg-type]
            and (type(value) is not str or _plain_header(headers.get(b"mcp-name"), value))):  # fmt: skip
        _check_headers(request, env, headers)
        envelope.check_version(env.version)
        if method not in stateless.METHODS:
            raise stateless.refusal(method)
    if method == "tools/call" and tools is not None and type(value) is str:
        tool = tools.get(value)  # an unknown tool is the handler's -32602
        if tool is not None and tool.mirrored:  # most tools have none: one lookup is all they cost
            check_params(tool.mirrored, params.get("arguments"), headers)
    return env


def _check_headers(request: Request, env: Envelope, headers: Headers) -> None:
    method = request.method
    version, mirrored = headers.get(b"mcp-protocol-version"), headers.get(b"mcp-method")
    if (version is None or mirrored is None or version.decode("latin-1") != env.version
            or mirrored.decode("latin-1") != method):  # fmt: skip
        # Not exactly the body's values: say which header is missing or different (whitespace around one is fine).
        _expect(headers, b"mcp-protocol-version", "MCP-Protocol-Version", env.version, "the _meta protocolVersion")
        _expect(headers, b"mcp-method", "Mcp-Method", method, "the method")
    member = NAMED.get(method)
    if member is not None:
        value = request.params.get(member)
        if type(value) is str:  # absent or not a string: no header is expected (the handler refuses the body)
            _expect(headers, b"mcp-name", "Mcp-Name", value, f'"params.{member}"', encoded=True)


def _expect(headers: Headers, key: bytes, name: str, body: str, what: str, *, encoded: bool = False) -> None:
    raw = headers.get(key)
    if raw is None:
        raise HeaderMismatchError(f"Header mismatch: the {name} header is required (it mirrors {what})")
    value = raw.decode("latin-1")
    if value == body and _plain(value, encoded):  # the usual case: exactly the body's value, nothing to decode
        return
    value = decode(raw, name) if encoded else value.strip(OWS)
    if value != body:
        raise HeaderMismatchError(f"Header mismatch: {name} is {value!r} but {what} is {body!r}")


def _plain_header(raw: bytes | None, body: str) -> bool:
    """Whether an ``Mcp-Name`` header is exactly ``body``, needing no decoding (what ``_expect`` accepts at once)."""
    return raw is not None and raw.decode("latin-1") == body and _plain(body, True)


def _plain(value: str, encoded: bool) -> bool:
    """Whether a header equal to the body's value is that value as it stands (the slow path would find the same)."""
    if value != value.strip(OWS):
        return False
    return not encoded or (value.isascii() and value.isprintable() and not value.startswith(SENTINEL[0]))


def claims_modern_batch(batch: list[Any]) -> bool:
    """Whether a JSON-RPC batch holds a modern request (batches are not part of 2026-07-28: -32600)."""
    return any(type(item) is dict and envelope.claims_modern(item.get("params")) for item in batch)
