"""JSON-RPC 2.0 envelopes as MCP profiles them: classifying what arrives, building what leaves.

MCP's rules on top of JSON-RPC 2.0: ids are strings or integers (never null, never fractional, never booleans);
``params`` and ``result`` are objects; notifications carry no id and get no reply; an error whose request id
could not be read omits ``id`` (the 2025-11-25 schema has no null id).
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidParamsError, InvalidRequestError, ProtocolError
from .record import Record

RequestId = str | int
JSONRPC = "2.0"
_EMPTY: dict[str, Any] = {}
_NO_ID = object()  # what parse finds for a message without "id"


class Request(Record):
    __slots__ = ("id", "method", "params")

    def __init__(self, id: RequestId, method: str, params: dict[str, Any]) -> None:
        self.id = id
        self.method = method
        self.params = params


class Notification(Record):
    __slots__ = ("method", "params")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params


class Response(Record):
    """A reply from the peer to a request we sent: exactly one of ``result`` / ``error`` is set."""

    __slots__ = ("id", "result", "error")

    def __init__(self, id: RequestId, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None):
        self.id = id
        self.result = result
        self.error = error


class Invalid(Record):
    """A message that cannot be processed; ``id`` is set when it could be read, so the error can be correlated.

    ``answer`` is False for a malformed notification: a notification never gets a reply, not even an error.
    """

    __slots__ = ("error", "id", "answer")

    def __init__(self, error: ProtocolError, id: RequestId | None = None, answer: bool = True) -> None:
        self.error = error
        self.id = id
        self.answer = answer


Message = Request | Notification | Response | Invalid


def is_request_id(value: Any) -> bool:
    t = type(value)
    return t is str or t is int  # bool is a subclass of int: excluded by the exact type check


def parse(obj: Any) -> Message:
    """Classify one decoded JSON value. Never raises: problems come back as ``Invalid``."""
    if type(obj) is not dict:
        kind = "an array" if isinstance(obj, list) else type(obj).__name__
        return Invalid(InvalidRequestError(f"Invalid request: expected a JSON-RPC object, got {kind}"))
    raw_id = obj.get("id", _NO_ID)
    has_id = raw_id is not _NO_ID
    id_type = type(raw_id)
    readable_id = raw_id if id_type is str or id_type is int else None  # is_request_id, inline: every message asks it
    if obj.get("jsonrpc") != JSONRPC:
        return Invalid(InvalidRequestError('Invalid request: "jsonrpc" must be "2.0"'), readable_id)
    method = obj.get("method")
    if method is None:
        return _parse_response(obj, readable_id)
    if type(method) is not str:
        return Invalid(InvalidRequestError('Invalid request: "method" must be a string'), readable_id)
    if has_id and readable_id is None:
        return Invalid(
            InvalidRequestError(f'Invalid request: "id" must be a string or an integer, got {_show(raw_id)}')
        )
    params = obj.get("params", _EMPTY)
    if type(params) is not dict:  # present but not an object: a missing "params" is _EMPTY
        error = InvalidParamsError(f'Invalid params: "params" of {method} must be an object')
        return Invalid(error, readable_id, answer=has_id)
    if has_id:
        return Request(readable_id, method, params)  # type: ignore[arg-type]
    return Notification(method, params)


def _parse_response(obj: dict[str, Any], readable_id: RequestId | None) -> Message:
    has_result = "result" in obj
    has_error = "error" in obj
    if has_result == has_error or readable_id is None:
        return Invalid(InvalidRequestError('Invalid request: expected "method", or "id" with "result" or "error"'))
    if has_result:
        result = obj["result"]
        if type(result) is not dict:
            return Invalid(InvalidRequestError('Invalid response: "result" must be an object'))
        return Response(readable_id, result=result)
    error = obj["error"]
    if type(error) is not dict or type(error.get("code")) is not int or type(error.get("message")) is not str:
        return Invalid(InvalidRequestError('Invalid response: "error" must be an object with "code" and "message"'))
    return Response(readable_id, error=error)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:60]


# --- building messages ------------------------------------------------------------------------------------------


def result(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error(request_id: RequestId | None, err: ProtocolError | dict[str, Any]) -> dict[str, Any]:
    body = err.to_error() if isinstance(err, ProtocolError) else err
    if request_id is None:
        return {"jsonrpc": JSONRPC, "error": body}
    return {"jsonrpc": JSONRPC, "id": request_id, "error": body}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    if params is None:
        return {"jsonrpc": JSONRPC, "method": method}
    return {"jsonrpc": JSONRPC, "method": method, "params": params}


def request(request_id: RequestId, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message
