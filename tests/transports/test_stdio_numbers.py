"""Numbers out of range over a real stdio pipe: the answer carries the request's id and names the number."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stdio_client import StdioServer


@pytest.fixture
def server() -> Iterator[StdioServer]:
    s = StdioServer("serve", "tests/transports/decks/noisy.py")
    s.initialize()
    yield s
    s.kill()


def test_an_id_past_64_bits_is_refused_with_that_id(server: StdioServer) -> None:
    server.write(b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}\n')
    reply = server.read()
    assert reply["id"] == 2**64
    assert reply["error"]["code"] == -32600
    assert "18446744073709551616 is outside the 64-bit integer range" in reply["error"]["message"]


def test_a_huge_argument_is_invalid_params_for_the_request_id(server: StdioServer) -> None:
    digits = b"1" + b"0" * 5000
    server.write(b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"add","arguments":{"a":'
                 + digits + b',"b":1}}}\n')  # fmt: skip
    reply = server.read()
    assert reply["id"] == "big"
    assert reply["error"]["code"] == -32602
    assert "at $.arguments.a is out of range" in reply["error"]["message"]
    assert server.request("ping", id="after")["result"] == {}  # the server keeps serving
