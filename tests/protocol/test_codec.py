from __future__ import annotations

import pytest

from tooldeck.protocol import codec
from tooldeck.protocol.errors import PARSE_ERROR, InvalidParamsError, InvalidRequestError, ParseError


def test_round_trip_is_compact_and_newline_free() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb"}}
    data = codec.encode(message)
    assert b"\n" not in data and b" " not in data
    assert codec.decode(data) == message
    assert codec.encode_line(message) == data + b"\n"


@pytest.mark.parametrize("data", [b"{", b"not json", b'{"a":1,}', b"\xff\xfe", b"[" * 2000 + b"]" * 2000])
def test_malformed_input_is_a_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError) as info:
        codec.decode(data)
    assert info.value.code == PARSE_ERROR


def test_unencodable_message_becomes_an_internal_error_for_its_id() -> None:
    data = codec.decode(codec.encode({"jsonrpc": "2.0", "id": 7, "result": {"x": object()}}))
    assert data["id"] == 7
    assert data["error"]["code"] == -32603


def test_fragments_are_spliced_verbatim() -> None:
    assert codec.encode({"tools": codec.Fragment(b'[{"name":"a"}]')}) == b'{"tools":[{"name":"a"}]}'


# --- numbers beyond 64 bits, NaN, lone surrogates ------------------------------------------------------------------


def test_an_id_past_64_bits_is_refused_with_that_id_echoed_exactly() -> None:
    with pytest.raises(InvalidRequestError) as info:
        codec.decode(b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}')
    assert info.value.request_id == 2**64  # type: ignore[attr-defined]
    assert "18446744073709551616 is outside the 64-bit integer range" in info.value.message
    reply = codec.encode({"jsonrpc": "2.0", "id": info.value.request_id, "error": info.value.to_error()})  # type: ignore[attr-defined]
    assert reply.startswith(b'{"jsonrpc":"2.0","id":18446744073709551616,')


def test_a_huge_number_in_params_is_invalid_params_naming_it_for_the_request_id() -> None:
    data = b'{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t","arguments":{"n":1' + b"0" * 5000
    with pytest.raises(InvalidParamsError) as info:
        codec.decode(data + b"}}}")
    assert info.value.request_id == "c"  # type: ignore[attr-defined]
    assert info.value.message.startswith("Invalid params: the number 100000000000...0000 (5001 chars) at $.arguments.n")


@pytest.mark.parametrize("literal", [b"1e400", b"-1e999"])
def test_a_float_past_a_double_is_invalid_params(literal: bytes) -> None:
    with pytest.raises(InvalidParamsError, match="is out of range"):
        codec.decode(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":' + literal + b"}}")


def test_a_notification_with_a_huge_number_is_read_with_null_there() -> None:
    # Notifications never get an answer, not even an error: the number is dropped instead.
    message = codec.decode(b'{"jsonrpc":"2.0","method":"n","params":{"v":1' + b"0" * 400 + b"}}")
    assert message == {"jsonrpc": "2.0", "method": "n", "params": {"v": None}}


@pytest.mark.parametrize("data", [b'{"a":NaN}', b"Infinity", b'{"a":-Infinity}'])
def test_nan_and_infinity_literals_are_not_json(data: bytes) -> None:
    with pytest.raises(ParseError):
        codec.decode(data)


def test_a_lone_surrogate_is_replaced_not_fatal() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a\ud800b"}]}}
    assert codec.decode(codec.encode(message))["result"]["content"][0]["text"] == "a\ufffdb"
    assert codec.encode_line(message).endswith(b"\n")


def test_ordinary_messages_take_the_fast_path_unchanged() -> None:
    data = b'{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}'
    assert codec.decode(data)["id"] == 2**63 - 1
