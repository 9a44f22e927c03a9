"""The stdio transport: line framing in-process, and the real ``tooldeck serve`` as a subprocess."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK, StdioServer, checked_replies, handshake
from tooldeck.protocol.errors import ProtocolError
from tooldeck.transports.stdio_lines import LineReader

NOISY = "tests/transports/decks/noisy.py"


# --- framing, in-process -------------------------------------------------------------------------------------------


class FakeSession:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.errors: list[ProtocolError] = []

    def receive(self, message: Any) -> None:
        self.messages.append(message)

    def receive_error(self, error: ProtocolError, request_id: Any = None) -> None:
        self.errors.append(error)


def reader(limit: int = 100) -> tuple[LineReader, FakeSession]:
    session = FakeSession()
    return LineReader(session, limit), session  # type: ignore[arg-type]


def held_bytes(line_reader: LineReader) -> int:
    """How much of an unfinished line the reader is holding (its private buffer; the one thing peeked at)."""
    return len(line_reader._partial)


@pytest.mark.parametrize(
    "chunks",
    [
        [b'{"a":1}\n{"b":2}\n'],
        [b'{"a"', b":1}\n", b'{"b":2}', b"\n"],
        [b'{"a":1}\r\n\n  \n{"b":2}\n'],
        [bytes([c]) for c in b'{"a":1}\n{"b":2}\n'],
    ],
)
def test_lines_are_reassembled_across_chunks(chunks: list[bytes]) -> None:
    line_reader, session = reader()
    for chunk in chunks:
        line_reader.data_received(chunk)
    assert session.messages == [{"a": 1}, {"b": 2}]
    assert session.errors == []


def test_a_partial_line_waits_for_its_newline() -> None:
    line_reader, session = reader()
    line_reader.data_received(b'{"a":1}')
    assert session.messages == []


@pytest.mark.parametrize("split", [1, 50, 150, 260])
def test_an_oversize_line_is_refused_once_and_discarded(split: int) -> None:
    line_reader, session = reader(limit=100)
    data = b'{"big":"' + b"x" * 300 + b'"}\n{"next":true}\n'
    line_reader.data_received(data[:split])
    line_reader.data_received(data[split:])
    assert len(session.errors) == 1
    assert session.errors[0].code == -32600
    assert "exceeds the 100-byte limit" in session.errors[0].message
    assert session.messages == [{"next": True}]
    assert held_bytes(line_reader) == 0


@pytest.mark.parametrize("chunk_size", [65536, 1_000_003])
def test_a_huge_line_is_never_buffered_while_it_streams_in(chunk_size: int) -> None:
    limit = 4 * 1024 * 1024
    line_reader, session = reader(limit=limit)
    total = 64 * 1024 * 1024
    chunk = b"x" * chunk_size
    line_reader.data_received(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"')
    most_held = sent = 0
    while sent < total:
        line_reader.data_received(chunk)
        sent += chunk_size
        most_held = max(most_held, held_bytes(line_reader))
        if sent > 2 * limit:  # refused as soon as it is known to be too long, not when its newline comes
            assert len(session.errors) == 1
    line_reader.data_received(b'"}}\n{"next":true}\n')
    assert most_held <= limit, f"held {most_held} bytes of a {total}-byte line (limit {limit})"
    assert [e.code for e in session.errors] == [-32600]
    assert session.messages == [{"next": True}]
    assert held_bytes(line_reader) == 0


def test_bad_json_is_a_parse_error_and_reading_continues() -> None:
    line_reader, session = reader()
    line_reader.data_received(b'nope\n{"ok":1}\n')
    assert [e.code for e in session.errors] == [-32700]
    assert session.messages == [{"ok": 1}]


# --- the real server ----------------------------------------------------------------------------------------------


@pytest.fixture
def noisy() -> Iterator[StdioServer]:
    with StdioServer("serve", NOISY) as server:
        yield server


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_whole_session_over_real_pipes(loop: str) -> None:
    with StdioServer("serve", NOISY, env={"TOOLDECK_LOOP": loop}) as noisy:
        whole_session(noisy)


def whole_session(noisy: StdioServer) -> None:
    reply = noisy.initialize()
    assert reply["result"]["serverInfo"] == {"name": "noisy", "version": "0.0.1"}
    tools = noisy.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == ["shout", "wait", "add"]
    assert noisy.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}})["result"][
        "structuredContent"
    ] == {"result": 42}
    shout = noisy.request("tools/call", {"name": "shout", "arguments": {"text": "hey"}})
    assert shout["result"]["content"] == [{"type": "text", "text": "HEY"}]
    noisy.close_stdin()
    assert noisy.wait() == 0
    assert noisy.rest_of_stdout() == b""
    stderr = noisy.proc.stderr.read().decode()  # type: ignore[union-attr]
    for noise in (
        "a banner printed at import time",
        "debug output from a tool",
        "raw bytes on fd 1",
        "a child process writing to stdout",
    ):
        assert noise in stderr
    assert all(line.startswith(b"{") for line in noisy.lines)


def test_malformed_input_never_kills_the_server(noisy: StdioServer) -> None:
    noisy.initialize()
    cases: list[tuple[bytes, int]] = [
        (b"this is not json", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700),
        (b"[1, 2, 3]", -32600),
        (b"[]", -32600),
        (b'"just a string"', -32600),
        (b"42", -32600),
        (b"null", -32600),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "oops"}', -32602),
        (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": ["x"]}}', -32602),
        (b"[" * 5000 + b"]" * 5000, -32700),
        (b'{"a":' * 3000 + b"1" + b"}" * 3000, -32700),
        (b"\xff\xfe\xfd", -32700),
    ]
    for data, code in cases:
        noisy.write(data + b"\n")
        reply = noisy.read()
        assert reply["error"]["code"] == code, (data[:40], reply)
    result = noisy.request("tools/call", {"name": "add", "arguments": {"a": "x", "b": 1}}, id="typed")
    assert result["result"]["isError"] is True
    assert noisy.request("ping", id="alive")["result"] == {}


def test_a_real_server_refuses_a_huge_line_and_carries_on() -> None:
    with StdioServer("serve", NOISY, "--max-message-bytes", "65536") as server:
        server.initialize()
        big = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": "big",
                "method": "tools/call",
                "params": {"name": "shout", "arguments": {"text": "x" * 5_000_000}},
            }
        )
        server.write(big + b"\n")
        reply = server.read()
        assert reply["error"]["code"] == -32600
        assert "exceeds the 65536-byte limit" in reply["error"]["message"]
        assert "id" not in reply
        assert server.request("ping", id="after")["result"] == {}


def test_default_limit_refuses_a_5_mib_line(noisy: StdioServer) -> None:
    noisy.initialize()
    noisy.write(b'{"x":"' + b"y" * (5 * 1024 * 1024) + b'"}\n')
    assert "exceeds the 4194304-byte limit" in noisy.read()["error"]["message"]
    assert noisy.request("ping", id="after")["result"] == {}


# --- numbers out of range: the answer carries the request's id and names the number -------------------------------


def test_an_id_past_64_bits_is_refused_with_that_id(noisy: StdioServer) -> None:
    noisy.initialize()
    noisy.write(b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}\n')
    reply = noisy.read()
    assert reply["id"] == 2**64
    assert reply["error"]["code"] == -32600
    assert "18446744073709551616 is outside the 64-bit integer range" in reply["error"]["message"]


def test_a_huge_argument_is_invalid_params_for_the_request_id(noisy: StdioServer) -> None:
    noisy.initialize()
    digits = b"1" + b"0" * 5000
    noisy.write(b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"add","arguments":{"a":'
                 + digits + b',"b":1}}}\n')  # fmt: skip
    reply = noisy.read()
    assert reply["id"] == "big"
    assert reply["error"]["code"] == -32602
    assert "at $.arguments.a is out of range" in reply["error"]["message"]
    assert noisy.request("ping", id="after")["result"] == {}  # the server keeps serving


def start_a_slow_call(noisy: StdioServer) -> None:
    """Call a tool that waits a minute, and wait until it is running (its progress notification arrived)."""
    noisy.initialize()
    noisy.send(
        {
            "jsonrpc": "2.0",
            "id": "slow",
            "method": "tools/call",
            "params": {"name": "wait", "arguments": {"seconds": 60}, "_meta": {"progressToken": "t"}},
        }
    )
    assert noisy.read()["method"] == "notifications/progress"


def test_eof_lets_work_in_flight_finish_within_the_drain_timeout_then_exits_cleanly() -> None:
    # The slow call waits a minute: longer than the drain time-out (1 s), so it is cancelled and gets no response.
    with StdioServer("serve", "tests/transports/decks/noisy.py", "--drain-timeout", "1") as server:
        start_a_slow_call(server)
        server.close_stdin()
        assert server.wait(timeout=10) == 0
        assert server.rest_of_stdout() == b""  # no response for the cancelled call
        assert b"still running after 1 s are cancelled" in server.proc.stderr.read()  # type: ignore[union-attr]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_the_server_cleanly(noisy: StdioServer, sig: int) -> None:
    start_a_slow_call(noisy)
    noisy.proc.send_signal(sig)
    assert noisy.wait(timeout=10) == 0
    assert b"Traceback" not in noisy.proc.stderr.read()  # type: ignore[union-attr]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_during_the_handshake_phase_also_exit_cleanly(noisy: StdioServer, sig: int) -> None:
    noisy.initialize()  # answered without an event loop; the server now waits in a blocking read
    noisy.proc.send_signal(sig)
    assert noisy.wait(timeout=10) == 0
    assert b"Traceback" not in noisy.proc.stderr.read()  # type: ignore[union-attr]


def test_stdin_and_stdout_may_be_regular_files() -> None:
    sent = [*handshake("2025-06-18"), {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    # (a tools/call would be cancelled by the EOF that follows at once: EOF means "shut down")
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout:
        stdin.write(b"".join(orjson.dumps(line) + b"\n" for line in sent))
        stdin.seek(0)
        done = subprocess.run(
            [*TOOLDECK, "serve", NOISY], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, timeout=30
        )
        assert done.returncode == 0, done.stderr
        stdout.seek(0)
        replies = checked_replies(stdout.read().splitlines(), sent)
    assert [r["id"] for r in replies] == ["init", 2]
    assert [t["name"] for t in replies[1]["result"]["tools"]] == ["shout", "wait", "add"]


def test_the_demo_deck_is_served_without_a_target() -> None:
    with StdioServer("serve") as server:
        assert server.initialize()["result"]["serverInfo"]["name"] == "tooldeck-demo"
        names = [t["name"] for t in server.request("tools/list")["result"]["tools"]]
        assert {"calculate", "convert_units", "count_primes"} <= set(names)
        server.send(
            {
                "jsonrpc": "2.0",
                "id": "p",
                "method": "tools/call",
                "params": {"name": "count_primes", "arguments": {"limit": 600000}, "_meta": {"progressToken": 1}},
            }
        )
        messages = []
        while True:
            message = server.read()
            messages.append(message)
            if message.get("id") == "p":
                break
        progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
        assert len(progress) >= 2 and progress == sorted(set(progress))
        assert messages[-1]["result"]["structuredContent"] == {"limit": 600000, "count": 49098, "largest": 599999}


def test_python_dash_m_entry_point_matches_the_script() -> None:
    done = subprocess.run([sys.executable, "-m", "tooldeck", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0
    assert "serve" in done.stdout and "call" in done.stdout
