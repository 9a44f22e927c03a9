"""Every exception tooldeck raises on purpose, and every JSON-RPC error code the server uses.

    TooldeckError                 root of everything tooldeck raises on purpose
    ├── ProtocolError             becomes a JSON-RPC error response; carries its own ``code``
    │   ├── ParseError            -32700  the bytes are not JSON
    │   ├── InvalidRequestError   -32600  JSON, but not a valid JSON-RPC request
    │   ├── MethodNotFoundError   -32601  unknown method, or a capability that was not negotiated
    │   ├── InvalidParamsError    -32602  params of the wrong shape; unknown tool; bad cursor
    │   │   └── UnknownCursorError        a tasks/list cursor that names no listed task
    │   ├── InternalError         -32603  the server failed
    │   ├── ResourceNotFoundError -32002  resources/read of an unknown URI (before 2026-07-28; -32602 from then on)
    │   ├── HeaderMismatchError   -32020  HTTP headers missing, malformed, or not equal to the body (2026-07-28)
    │   ├── UnsupportedVersionError  -32022  a request names a revision the server does not serve (2026-07-28)
    │   ├── UrlElicitationRequiredError  -32042  a tool needs the user to visit URLs first
    │   ├── TaskLimitError        -32000  the requestor has too many tasks running
    │   └── RefusedError          -32000  the caller may not do this (authorization, limits); ``http_status`` says
    │       │                             which HTTP status a transport that has one answers with
    │       ├── RateLimitRefusedError     (security/limits.py) a read or get over a rate limit: 429
    │       ├── BackendUnavailableError   (engine/errors.py) shared state (Redis) cannot be reached: 503, Retry-After
    │       └── MissingClientCapabilityError  -32021  the request needs a client capability it did not declare: 400
    ├── ToolError                 raised by a tool: becomes a result with ``isError: true``
    │   ├── ClientRequestError    a request to the client (elicitation, sampling) failed, was refused or timed out
    │   ├── RateLimitedError      (security/limits.py) a tools/call over a rate limit, with ``retry_after``
    │   └── AuditUnavailableError (security/audit_chain.py) a call refused because its audit record cannot be
    │                                 written (``http_status`` 503 where there is no isError result)
    ├── RegistrationError         a tool (or other item) cannot be registered as given
    ├── SchemaError               a type or JSON Schema that tooldeck cannot use
    ├── ConversionError           a JSON value that passed the schema but cannot become the declared Python type
    ├── ArgumentError             a string argument (URI variable, prompt argument) that is not of its type
    ├── ContentError              a content block built with values the protocol does not allow
    ├── TaskStoreError            a task store cannot be opened, or is used after ``close()``
    ├── NodeUnreachableError      (server/nodes.py) another process of the fleet did not answer in time
    ├── HttpError                 an HTTP request refused before it reached the protocol (status, code, message)
    ├── TargetError               the command line cannot load what it was pointed at
    ├── DefinitionError           (manifest/problems.py)   tool definition files with problems (file, JSON path)
    ├── ManagerError              (manifest/manager.py) a tool manager operation that cannot be done
    ├── PolicyError               (security/policy.py) a policy file that cannot be used (file:line)
    └── AuditError                (security/audit_chain.py) an audit trail that cannot be continued or written

A ``ProtocolError`` knows its code, so no table maps exceptions to codes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .paths import format_path

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042
# 2026-07-28's own codes (-32020..-32099 are reserved for MCP from that revision on).
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# Implementation-defined codes (JSON-RPC reserves -32000..-32099 for servers).
SERVER_ERROR = -32000  # the server cannot take this now: busy, shutting down, too many tasks, refused
SESSION_NOT_FOUND = -32001  # no code is specified; the TypeScript SDK's, so clients that look at it understand


_cleaner: Callable[[str], str] | None = None


def set_message_cleaner(cleaner: Callable[[str], str] | None) -> None:
    """How error messages are made safe to show (the server sets the output sanitiser's ``clean_error``)."""
    global _cleaner
    _cleaner = cleaner


class TooldeckError(Exception):
    """Root of the exceptions tooldeck raises on purpose."""


class ProtocolError(TooldeckError):
    """An error that is answered with a JSON-RPC error object."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, data: Any = None, *, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if code is not None:
            self.code = code
        # The id of the request this answers, when it was read before the error was found (a number out of range).
        self.request_id: Any = None

    def to_error(self) -> dict[str, Any]:
        """The wire ``error`` member; a message that is not plain printable text goes through the message cleaner
        (it may echo what a client or a tool wrote: escape sequences, bidi controls)."""
        message = self.message
        if _cleaner is not None and not message.isprintable():
            message = _cleaner(message)
        error: dict[str, Any] = {"code": self.code, "message": message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(ProtocolError):
    code = PARSE_ERROR


class InvalidRequestError(ProtocolError):
    code = INVALID_REQUEST


class MethodNotFoundError(ProtocolError):
    code = METHOD_NOT_FOUND


class InvalidParamsError(ProtocolError):
    code = INVALID_PARAMS


class InternalError(ProtocolError):
    code = INTERNAL_ERROR


class ResourceNotFoundError(ProtocolError):
    code = RESOURCE_NOT_FOUND


class HeaderMismatchError(ProtocolError):
    """-32020: an HTTP header the revision requires is missing, malformed, or differs from the body (HTTP 400)."""

    code = HEADER_MISMATCH


class UnsupportedVersionError(ProtocolError):
    """-32022: the request's protocol version is not one the server serves; ``data`` names both (HTTP 400)."""

    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: str, supported: tuple[str, ...] | list[str]) -> None:
        shown = requested if isinstance(requested, str) else repr(requested)
        super().__init__(f"Unsupported protocol version {shown!r} (supported: {', '.join(supported)})",
                         {"supported": list(supported), "requested": requested})  # fmt: skip


class UrlElicitationRequiredError(ProtocolError):
    """Raise in a tool to answer its call with -32042: the user must complete these URL elicitations first.

    ``elicitations``: URL-mode elicitation params, each ``{"mode": "url", "message", "url", "elicitationId"}``.
    """

    code = URL_ELICITATION_REQUIRED

    def __init__(self, elicitations: list[dict[str, Any]], message: str = "URL elicitation required") -> None:
        super().__init__(message, {"elicitations": elicitations})


class UnknownCursorError(InvalidParamsError, ValueError):
    """``list(after=...)`` names no live task of that owner (expired, purged, another owner's, never issued).

    It is an ``InvalidParamsError``, so if it reaches the client it is the -32602 the spec asks for (§7.8).
    """

    def __init__(self) -> None:
        super().__init__("Invalid cursor: the task it points at is no longer listed")


class TaskLimitError(ProtocolError):
    code = SERVER_ERROR


class RefusedError(ProtocolError):
    """The caller may not do this: raised by an authorization or limit step of the call pipeline.

    ``http_status`` (401, 403, 429, ...) is what an HTTP transport answers with, with ``headers`` (``(name,
    value)`` byte pairs: ``WWW-Authenticate`` for a step-up, ``Retry-After``); stdio sends the JSON-RPC error.
    """

    code = SERVER_ERROR

    def __init__(
        self,
        message: str,
        data: Any = None,
        *,
        code: int | None = None,
        http_status: int = 403,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message, data, code=code)
        self.http_status = http_status
        self.headers = headers or []


class MissingClientCapabilityError(RefusedError):
    """-32021: serving the request needs a client capability its ``clientCapabilities`` did not declare.

    ``required`` is a ClientCapabilities object (``{"sampling": {}}``), as the schema defines ``requiredCapabilities``;
    over HTTP the answer is 400.
    """

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        super().__init__(message, {"requiredCapabilities": required}, code=MISSING_CLIENT_CAPABILITY, http_status=400)


class ToolError(TooldeckError):
    """Raise inside a tool to fail the call with this message: the client gets ``isError: true``.

    Unlike any other exception, the message is never masked, so write it for the model that reads it.
    """


class ClientRequestError(ToolError):
    """A request the server sent to the client failed: not supported, refused, an error answer, or no answer in time.

    ``code`` is the client's JSON-RPC error code when it answered with one.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class RegistrationError(TooldeckError, ValueError):
    """A tool, resource or prompt cannot be registered as given."""


class SchemaError(TooldeckError, TypeError):
    """A Python type or a JSON Schema that tooldeck cannot turn into a valid schema or validator."""


class ConversionError(TooldeckError, ValueError):
    """A JSON value that passed the schema but cannot become the declared Python type.

    ``path`` locates the value (containers prepend their key as the error travels out), so ``str()`` reads like a
    validation message: ``$.when: expected an ISO 8601 date-time, got "tomorrow"``.
    """

    def __init__(self, reason: str, path: list[str | int] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str | int] = path if path is not None else []

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.reason}"


class ArgumentError(TooldeckError, ValueError):
    """A string argument that is not a value of its parameter's type; ``str()`` reads ``$.name: what was wrong``."""


class ContentError(TooldeckError, ValueError):
    """A content block built with values the protocol does not allow."""


class TaskStoreError(TooldeckError):
    """A task store cannot be opened, or is used after ``close()``."""


class HttpError(TooldeckError):
    """An HTTP request refused before anything was sent: its status, JSON-RPC error code, message and headers;
    ``session``, the key of the session it named, when that is known (for the audit trail)."""

    def __init__(self, status: int, code: int, message: str, headers: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.session: str | None = None


class TargetError(TooldeckError):
    """The command line could not load the deck it was pointed at."""
