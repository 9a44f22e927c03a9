"""What the client commands put on the wire, seen by scripted servers in real processes and on real sockets: the
stdio handshake, a server's ping answered mid-request, pages followed; over HTTP the session id and protocol
version headers on every request after initialize, JSON answers, and the session DELETEd at the end."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from http_client import serve_http
from stdio_client import ROOT, TOOLDECK

# A stdio server that pings the client before it answers initialize, and lists its tools in two pages. It writes
# what it received to the file named by its first argument.
SCRIPTED = r"""
import json, sys
log = open(sys.argv[1], "w")
def send(message):
    sys.stdout.write(json.dumps(message) + "\n"); sys.stdout.flush()
def receive():
    message = json.loads(sys.stdin.readline()); log.write(json.dumps(message) + "\n"); log.flush(); return message
init = receive()
send({"jsonrpc": "2.0", "id": "ping-1", "method": "ping"})
pong = receive()
send({"jsonrpc": "2.0", "id": init["id"], "result": {"protocolVersion": "2025-11-25",
      "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}}})
receive()  # notifications/initialized
for page in range(2):
    request = receive()
    tools = [{"name": f"t{page}", "inputSchema": {"type": "object"}}]
    send({"jsonrpc": "2.0", "id": request["id"],
          "result": {"tools": tools, **({"nextCursor": "page-2"} if page == 0 else {})}})
sys.stdin.read()
"""


def test_stdio_handshake_ping_and_pages(tmp_path: Path) -> None:
    script, log = tmp_path / "server.py", tmp_path / "received.jsonl"
    script.write_text(SCRIPTED)
    done = subprocess.run(
        [*TOOLDECK, "tools", "--", sys.executable, str(script), str(log)], capture_output=True, text=True, cwd=ROOT,
        timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "t0()\nt1()\n", "")
    received = [orjson.loads(line) for line in log.read_text().splitlines()]
    assert received[0]["method"] == "initialize"
    assert received[0]["params"]["protocolVersion"] == "2025-11-25"
    assert received[1] == {"jsonrpc": "2.0", "id": "ping-1", "result": {}}
    assert received[2] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert [m["method"] for m in received[3:]] == ["tools/list", "tools/list"]
    assert received[4]["params"] == {"cursor": "page-2"}


class Recorder(BaseHTTPRequestHandler):
    """A Streamable HTTP server that answers with JSON and records every request."""

    seen: ClassVar[list[tuple[str, dict[str, str], Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        body = orjson.loads(self.rfile.read(length)) if length else None
        self.seen.append((self.command, {k.lower(): v for k, v in self.headers.items()}, body))
        return body

    def _reply(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = orjson.dumps(body) if body is not None else b""
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        message = self._record()
        if "id" not in message:
            self._reply(202)
        elif message["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "recorded", "version": "1"}}  # fmt: skip
            self._reply(200, {"jsonrpc": "2.0", "id": message["id"], "result": result}, {"mcp-session-id": "s-1"})
        else:
            tool = {"name": "echo", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
            result = {"tools": [tool]} if message["method"] == "tools/list" else {
                "content": [{"type": "text", "text": orjson.dumps(message["params"]["arguments"]).decode()}]}  # fmt: skip
            self._reply(200, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def do_DELETE(self) -> None:
        self._record()
        self._reply(200)


@pytest.fixture
def recorder() -> Iterator[str]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def test_http_headers_json_answers_and_delete(recorder: str) -> None:
    done = subprocess.run(
        [*TOOLDECK, "call", "--url", recorder, "--header", "X-Team: blue", "--token", "t0k", "echo", "n=5"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, '{"n":5}\n', "")
    methods = [(verb, body["method"] if body else None) for verb, _, body in Recorder.seen]
    assert methods == [
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("POST", "tools/list"),
        ("POST", "tools/call"),
        ("DELETE", None),
    ]
    for _, headers, _ in Recorder.seen:
        assert headers["authorization"] == "Bearer t0k" and headers["x-team"] == "blue"
    assert "application/json" in Recorder.seen[0][1]["accept"] and "text/event-stream" in Recorder.seen[0][1]["accept"]
    assert "mcp-session-id" not in Recorder.seen[0][1]
    for _, headers, _ in Recorder.seen[1:]:
        assert headers["mcp-session-id"] == "s-1"
        assert headers["mcp-protocol-version"] == "2025-06-18"  # the version the server chose


def test_http_against_a_json_response_server() -> None:
    with serve_http("tests/cli/decks/client_deck.py", "--json-response", "--task-store", "memory") as url:
        done = subprocess.run(
            [*TOOLDECK, "call", "--url", url, "build", "steps=2"], capture_output=True, text=True, cwd=ROOT, timeout=60
        )
    assert (done.returncode, done.stdout) == (0, "built in 2 steps\n"), done.stderr
