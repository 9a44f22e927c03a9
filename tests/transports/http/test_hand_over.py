"""A process of a fleet stopping (SIGTERM, as in a rolling restart) hands its clients over: it takes no new
connection, and each open connection carries one more request, served and answered with ``Connection: close``,
instead of being closed while idle under a request the client may have just sent."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import time
from pathlib import Path

from http_client import free_port, wait_for_port
from stdio_client import ROOT, TOOLDECK

DECK = "tests/transports/decks/workers_deck.py"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def post(connection: http.client.HTTPConnection, message: dict[str, object], session: str | None = None,
         ) -> http.client.HTTPResponse:  # fmt: skip
    headers = dict(HEADERS)
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    connection.request("POST", "/mcp", json.dumps(message), headers)
    return connection.getresponse()


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_stopping_process_of_a_fleet_answers_one_more_request_per_connection_then_closes_it(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    proc = subprocess.Popen([*TOOLDECK, "serve", DECK, "--http", "--port", str(port), "--backend", redis_url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        wait_for_port(port, proc)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
        answer = post(connection, init)
        session = answer.getheader("mcp-session-id")
        answer.read()
        assert answer.status == 200 and session
        post(connection, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session).read()
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not refuses_connections(port):  # it stops taking connections first
            assert time.monotonic() < deadline, "the stopping process still accepts connections"
            time.sleep(0.01)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
        answer = post(connection, call, session)  # the open connection is still served, once
        body = answer.read()
        assert answer.status == 200, body
        assert answer.getheader("connection") == "close"
        assert json.loads(body)["result"]["content"][0]["text"].split()[0] == str(proc.pid)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        stderr = proc.communicate(timeout=30)[1].decode()
    assert "Traceback" not in stderr, stderr
