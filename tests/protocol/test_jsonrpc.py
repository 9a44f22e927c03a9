from __future__ import annotations

from typing import Any

import pytest

from tooldeck.protocol import jsonrpc
from tooldeck.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, InvalidParamsError
from tooldeck.protocol.jsonrpc import Invalid, Notification, Request, Response


@pytest.mark.parametrize("request_id", ["abc", "", 0, 7, -3, 2**60])
def test_requests_accept_string_and_integer_ids(request_id: Any) -> None:
    message = jsonrpc.parse({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert message == Request(request_id, "ping", {})


@pytest.mark.parametrize("request_id", [None, 1.5, True, False, [], {}])
def test_requests_refuse_other_ids_without_echoing_them(request_id: Any) -> None:
    message = jsonrpc.parse({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert isinstance(message, Invalid)
    assert message.id is None
    assert message.error.code == INVALID_REQUEST
    assert '"id" must be a string or an integer' in message.error.message


def test_notification_has_no_id() -> None:
    assert jsonrpc.parse({"jsonrpc": "2.0", "method": "notifications/initialized"}) == Notification(
        "notifications/initialized", {}
    )


@pytest.mark.parametrize(
    ("obj", "text"),
    [
        ([], "got an array"),
        ("ping", "got str"),
        (3, "got int"),
        (None, "got NoneType"),
        ({"id": 1, "method": "ping"}, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, '"jsonrpc" must be "2.0"'),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, '"method" must be a string'),
        ({"jsonrpc": "2.0", "id": 1}, 'expected "method"'),
    ],
)
def test_invalid_envelopes(obj: Any, text: str) -> None:
    message = jsonrpc.parse(obj)
    assert isinstance(message, Invalid)
    assert message.error.code == INVALID_REQUEST
    assert text in message.error.message


def test_invalid_envelope_keeps_a_readable_id_for_correlation() -> None:
    message = jsonrpc.parse({"jsonrpc": "2.0", "id": 9, "method": 5})
    assert isinstance(message, Invalid)
    assert message.id == 9


@pytest.mark.parametrize("params", [[1, 2], "x", 3, None])
def test_params_must_be_an_object(params: Any) -> None:
    message = jsonrpc.parse({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params})
    assert isinstance(message, Invalid)
    assert message.id == 4
    assert message.error.code == INVALID_PARAMS


def test_responses_are_classified() -> None:
    assert jsonrpc.parse({"jsonrpc": "2.0", "id": 3, "result": {}}) == Response(3, result={})
    error = {"code": -1, "message": "user rejected"}
    assert jsonrpc.parse({"jsonrpc": "2.0", "id": "a", "error": error}) == Response("a", error=error)


@pytest.mark.parametrize(
    "obj",
    [
        {"jsonrpc": "2.0", "id": 3, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 3, "result": []},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": "x", "message": "y"}},
        {"jsonrpc": "2.0", "id": None, "result": {}},
    ],
)
def test_malformed_responses(obj: dict[str, Any]) -> None:
    assert isinstance(jsonrpc.parse(obj), Invalid)


def test_error_message_omits_an_unknown_id() -> None:
    err = InvalidParamsError("bad", {"field": "x"})
    assert jsonrpc.error(None, err) == {
        "jsonrpc": "2.0",
        "error": {"code": -32602, "message": "bad", "data": {"field": "x"}},
    }
    assert jsonrpc.error(5, err)["id"] == 5


def test_builders() -> None:
    assert jsonrpc.result(1, {}) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.notification("n", {"a": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}
    assert jsonrpc.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "method": "ping"}
