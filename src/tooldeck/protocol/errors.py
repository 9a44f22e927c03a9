"""The exceptions tooldeck raises, and the JSON-RPC error codes they carry.

    TooldeckError                 root of everything tooldeck raises on purpose
    ├── ProtocolError             becomes a JSON-RPC error response; carries its own ``code``
    │   ├── ParseError            -32700  the bytes are not JSON
    │   ├── InvalidRequestError   -32600  JSON, but not a valid JSON-RPC request
    │   ├── MethodNotFoundError   -32601  unknown method, or a capability that was not negotiated
    │   ├── InvalidParamsError    -32602  params of the wrong shape; unknown tool; bad cursor
    │   ├── InternalError         -32603  the server failed
    │   ├── ResourceNotFoundError -32002  resources/read of an unknown URI
    │   └── UrlElicitationRequiredError  -32042  a tool needs the user to visit URLs first
    ├── ToolError                 raised by a tool: becomes a result with ``isError: true``
    │   └── ClientRequestError    a request to the client (elicitation, sampling) failed, was refused or timed out
    ├── RegistrationError         a tool (or other item) cannot be registered as given
    ├── SchemaError               a type or JSON Schema that tooldeck cannot use
    └── TargetError               the command line cannot load what it was pointed at

A ``ProtocolError`` knows its code, so no table maps exceptions to codes.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042


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

    def to_error(self) -> dict[str, Any]:
        """The wire ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
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


class UrlElicitationRequiredError(ProtocolError):
    """Raise in a tool to answer its call with -32042: the user must complete these URL elicitations first.

    ``elicitations``: URL-mode elicitation params, each ``{"mode": "url", "message", "url", "elicitationId"}``.
    """

    code = URL_ELICITATION_REQUIRED

    def __init__(self, elicitations: list[dict[str, Any]], message: str = "URL elicitation required") -> None:
        super().__init__(message, {"elicitations": elicitations})


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


class TargetError(TooldeckError):
    """The command line could not load the deck it was pointed at."""
