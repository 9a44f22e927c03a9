"""`tooldeck serve --http` for real: uvicorn on a loopback port, driven by httpx, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from mcp_schema import WireChecker
from stdio_client import ROOT, TOOLDECK

NOISY = "tests/transports/decks/noisy.py"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "httpx-test", "version": "1"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [*TOOLDECK, "serve", NOISY, "--http", "--port", str(self.port), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server did not start: {self.proc.stderr.read().decode()}") from None  # type: ignore[union-attr]
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    yield running
    running.stop()


def sse_messages(lines: Iterator[str]) -> Iterator[Any]:
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "":
            if data and data != [""]:
                yield orjson.loads("\n".join(data))
            data = []


def test_a_session_over_real_http(server: Server) -> None:
    checker = WireChecker()

    def post(client: httpx.Client, message: Any, session: str | None = None) -> httpx.Response:
        checker.sent(message)
        headers = dict(HEADERS)
        if session:
            headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        return client.post(server.url, content=orjson.dumps(message), headers=headers)

    with httpx.Client(timeout=10) as client:
        init = post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        assert init.status_code == 200
        checker.received(init.json())
        session = init.headers["mcp-session-id"]
        assert post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session).status_code == 202
        call = post(client, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                             "params": {"name": "add", "arguments": {"a": 20, "b": 22}}}, session)  # fmt: skip
        checker.received(call.json())
        assert call.json()["result"]["structuredContent"] == {"result": 42}

        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "wait", "arguments": {"seconds": 0.05}, "_meta": {"progressToken": "w"}}}  # fmt: skip
        checker.sent(message)
        headers = HEADERS | {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        with client.stream("POST", server.url, content=orjson.dumps(message), headers=headers) as stream:
            assert stream.headers["content-type"] == "text/event-stream"
            messages = list(sse_messages(stream.iter_lines()))
        for m in messages:
            checker.received(m)
        assert [m.get("method") for m in messages] == ["notifications/progress", None]
        assert messages[-1]["result"]["structuredContent"] == {"result": "waited"}

        assert client.delete(server.url, headers={"mcp-session-id": session}).status_code == 200
        assert post(client, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session).status_code == 404


def test_sigterm_drains_requests_in_flight_and_ends_get_streams(server: Server) -> None:
    with httpx.Client(timeout=15) as client:
        init = client.post(server.url, content=orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                              "params": INIT}), headers=HEADERS)  # fmt: skip
        session = init.headers["mcp-session-id"]
        headers = HEADERS | {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        outcome: dict[str, Any] = {}

        def slow_call() -> None:
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "wait", "arguments": {"seconds": 1.0}}}  # fmt: skip
            with httpx.Client(timeout=15) as other:
                outcome["call"] = other.post(server.url, content=orjson.dumps(body), headers=headers)

        def listen() -> None:
            with (
                httpx.Client(timeout=15) as other,
                other.stream(
                    "GET", server.url, headers={"accept": "text/event-stream", "mcp-session-id": session}
                ) as stream,
            ):
                outcome["get_status"] = stream.status_code
                for _ in stream.iter_lines():
                    pass
                outcome["get_ended"] = time.monotonic()

        threads = [threading.Thread(target=slow_call), threading.Thread(target=listen)]
        for thread in threads:
            thread.start()
        time.sleep(0.3)  # both requests are in flight
        stopped = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(15)
        assert server.proc.wait(15) == 0
        assert outcome["call"].status_code == 200
        assert outcome["call"].json()["result"]["structuredContent"] == {"result": "waited"}
        assert outcome["get_status"] == 200
        assert outcome["get_ended"] - stopped < 3.0  # the GET stream was ended, not waited out


def test_bad_flags_and_ports_are_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*TOOLDECK, "serve", NOISY, "--http", "--port", str(port)], capture_output=True,
                              text=True, cwd=ROOT, timeout=30)  # fmt: skip
    assert done.returncode != 0
    assert "address already in use" in done.stderr and "Traceback" not in done.stderr, done.stderr
    done = subprocess.run([*TOOLDECK, "serve", NOISY, "--http", "--port", "99999"], capture_output=True, text=True,
                          cwd=ROOT, timeout=30)  # fmt: skip
    assert done.returncode == 2
    assert "must be a port number" in done.stderr


def test_deck_run_http_is_the_same_server() -> None:
    port = free_port()
    code = (
        "import sys; sys.path.insert(0, 'tests/transports/decks'); from noisy import deck; "
        f"deck.run(transport='http', port={port})"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                response = httpx.post(f"http://127.0.0.1:{port}/mcp", content=orjson.dumps(
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}), headers=HEADERS)  # fmt: skip
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        assert response.status_code == 200 and "mcp-session-id" in response.headers
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
