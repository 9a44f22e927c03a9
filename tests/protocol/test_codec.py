from __future__ import annotations

import pytest

from tooldeck.protocol import codec
from tooldeck.protocol.errors import PARSE_ERROR, ParseError


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
