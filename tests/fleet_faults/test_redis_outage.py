"""Redis stopped for 5 s under load and started again (issue 22, item 10), against real processes: two
``tooldeck serve --http --backend redis://...`` over one Redis with persistence on, clients calling in a loop (2026
stateless calls, and 2025 session calls alternating between the two processes on every request). While Redis is
away every answer is 503 with ``Retry-After: 1`` and a -32000 error naming the server, within the engine's timeout;
never a 500, never a hang. Once Redis is back every client is served again within a few seconds, by the same
processes, and no process wrote a traceback. Over stdio, a deck with shared backends answers a JSON-RPC error
instead, and a deck of its own (no shared backend) is not affected at all."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eras import MODERN, modern
from fleet_faults.unreachable import Unreachable
from http_client import HttpClient, free_port
from redis_server import RedisServer
from stdio_client import ROOT, TOOLDECK, StdioServer

DECK = "tests/fleet_faults/outage_deck.py"
OUTAGE = 5.0  # seconds Redis is stopped
RECOVERY = 5.0  # seconds within which every client is served again once Redis is back
TIMEOUT = 2.0  # the engine's: a command fails within it


@dataclass
class Answer:
    client: str
    sent: float  # time.monotonic() when the request left
    took: float
    status: int
    served: bool  # answered with the call's result
    retry_after: str | None
    error: dict[str, object] | None


class Fleet:
    """The serving processes, each with its stderr in a file of its own."""

    def __init__(self, url: str, directory: Path, count: int) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.logs = [directory / f"serve-{n}.stderr" for n in range(count)]
        self.procs = []
        for port, log in zip(self.ports, self.logs, strict=True):
            with log.open("wb") as stderr:
                self.procs.append(subprocess.Popen([*TOOLDECK, "serve", DECK, "--http", "--port", str(port),
                                                    "--backend", url],
                                                   stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT))  # fmt: skip
        for port, proc, log in zip(self.ports, self.procs, self.logs, strict=True):
            deadline = time.monotonic() + 30
            while True:  # a port opened by another process: polled, there is no event to wait on
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
                    time.sleep(0.05)

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp" for port in self.ports]

    def stop(self) -> list[int]:
        """SIGTERM each process (a drain) and wait for it; their exit codes."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=30))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
        return codes


@pytest.fixture
def fleet(persistent_redis: RedisServer, tmp_path: Path) -> Iterator[Fleet]:
    serving = Fleet(persistent_redis.url, tmp_path, 2)
    try:
        yield serving
    finally:
        serving.stop()


class Client(threading.Thread):
    """Calls ``add`` in a loop until told to stop, keeping every answer; ``session``: a 2025 session made on the
    first process, each request sent to the other process than the one before."""

    def __init__(self, name: str, urls: list[str], *, session: bool) -> None:
        super().__init__(name=name, daemon=True)
        self.urls = urls
        self.uses_session = session
        self.answers: list[Answer] = []
        self.answered = threading.Condition()
        self.halt = threading.Event()

    def run(self) -> None:
        https = [HttpClient(url, timeout=TIMEOUT + 8) for url in self.urls]
        try:
            session = https[0].initialize() if self.uses_session else None
            n = 0
            while not self.halt.is_set():
                n += 1
                http = https[n % len(https)]
                params = {"name": "add", "arguments": {"a": n, "b": 1}}
                sent = time.monotonic()
                if session is None:
                    response = http.post(modern(n, "tools/call", params), version=MODERN,
                                         headers={"mcp-method": "tools/call", "mcp-name": "add"})  # fmt: skip
                else:
                    call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
                    response = http.post(call, session=session, version="2025-11-25")
                took = time.monotonic() - sent
                body = response.json() if response.content else {}
                result = body.get("result", {}).get("structuredContent")
                served = response.status_code == 200 and result == {"result": n + 1}
                with self.answered:
                    self.answers.append(Answer(self.name, sent, took, response.status_code, served,
                                               response.headers.get("retry-after"), body.get("error")))  # fmt: skip
                    self.answered.notify_all()
                if not served:
                    time.sleep(0.05)  # a client that honours Retry-After would wait longer; this one presses on
        finally:
            for http in https:
                http.client.close()

    def wait_for_success(self, after: float, timeout: float) -> float:
        """When the first request sent after ``after`` was answered 200; AssertionError past ``timeout``."""
        with self.answered:
            found = self.answered.wait_for(
                lambda: any(a.served and a.sent >= after for a in self.answers), timeout=timeout
            )
            assert found, f"{self.name}: not served within {timeout:g} s: {self.answers[-3:]}"
            return min(a.sent + a.took for a in self.answers if a.served and a.sent >= after)


def test_redis_stopped_for_5_s_under_load_and_started_again(persistent_redis: RedisServer, fleet: Fleet) -> None:
    clients = [Client(f"stateless-{n}", fleet.urls, session=False) for n in range(3)]
    clients += [Client(f"session-{n}", fleet.urls, session=True) for n in range(3)]
    for client in clients:
        client.start()
    try:
        began = time.monotonic()
        for client in clients:
            client.wait_for_success(began, 20)  # every client is served before the outage
        persistent_redis.stop()
        stopped = time.monotonic()
        time.sleep(OUTAGE)  # the outage itself
        starting = time.monotonic()  # from here the server may answer (before start() has seen it ready)
        persistent_redis.start()
        restarted = time.monotonic()
        back = [client.wait_for_success(restarted, RECOVERY) for client in clients]
        for client in clients:  # and each keeps being served
            client.wait_for_success(max(back), RECOVERY)
    finally:
        for client in clients:
            client.halt.set()
        for client in clients:
            client.join(timeout=TIMEOUT + 10)
    assert all(not client.is_alive() for client in clients)
    assert all(proc.poll() is None for proc in fleet.procs)  # both processes lived through it

    answers = [answer for client in clients for answer in client.answers]
    message = Unreachable(persistent_redis.url)
    assert {answer.status for answer in answers} == {200, 503}  # never a 500, a 404 or anything else
    for answer in answers:
        assert answer.took < TIMEOUT + 1.0, answer  # never a hang beyond the engine's timeout
        assert answer.served == (answer.status == 200), answer  # a 200 is the call's result, never an error
        if answer.status == 503:
            assert answer.retry_after == "1", answer
            assert answer.error == {"code": -32000, "message": message, "data": {"tooldeck/retryAfter": 1.0}}, answer
    for client in clients:  # while Redis was away, each client was refused, and nothing it sent was served
        during = [a for a in client.answers if a.sent >= stopped + 0.1 and a.sent + a.took <= starting]
        assert len(during) >= 10 and {a.status for a in during} == {503}, (client.name, during[:3])
    assert max(back) - restarted < RECOVERY

    assert fleet.stop() == [0, 0]  # a clean drain after all that
    for log in fleet.logs:
        text = log.read_text()
        assert "Traceback" not in text and "Task exception" not in text and "ERROR" not in text, text[-3000:]
        assert "the bus lost" in text  # the outage was seen, and said in one line


def call_add(server: StdioServer, n: int) -> Any:
    return server.request("tools/call", {"name": "add", "arguments": {"a": n, "b": 1}}, id=n)


def test_over_stdio_a_call_that_needs_redis_is_a_json_rpc_error_while_it_is_away(private_redis: RedisServer) -> None:
    with StdioServer("serve", DECK, "--backend", private_redis.url) as shared, StdioServer("serve", DECK) as alone:
        for server in (shared, alone):
            server.initialize()
            assert call_add(server, 1)["result"]["structuredContent"] == {"result": 2}
        private_redis.stop()
        refused = call_add(shared, 2)
        message = Unreachable(private_redis.url)
        error = {"code": -32000, "message": message, "data": {"tooldeck/retryAfter": 1.0}}
        assert refused == {"jsonrpc": "2.0", "id": 2, "error": error}
        assert "result" in shared.request("tools/list", {}, id="l")  # what needs nothing shared is served
        assert call_add(alone, 3)["result"]["structuredContent"] == {"result": 4}  # a deck of its own: unaffected
        private_redis.start()
        deadline = time.monotonic() + RECOVERY
        n = 10
        while "result" not in (reply := call_add(shared, n)):
            assert reply["error"]["code"] == -32000 and time.monotonic() < deadline, reply
            n += 1
            time.sleep(0.05)  # another process's condition (the server's reconnection): polled
        assert reply["result"]["structuredContent"] == {"result": n + 1}
        for server in (shared, alone):
            server.close_stdin()
            assert server.wait(30) == 0
            stderr = server.stderr_so_far()
            assert "Traceback" not in stderr and "ERROR" not in stderr, stderr


def test_sigterm_while_redis_is_away_drains_cleanly(private_redis: RedisServer, tmp_path: Path) -> None:
    fleet = Fleet(private_redis.url, tmp_path, 1)
    try:
        with HttpClient(fleet.urls[0]) as http:
            session = http.initialize()  # a session this process holds as it stops (the store keeps it)
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            }
            assert http.post(call, session=session).status_code == 200
        private_redis.stop()
    finally:
        codes = fleet.stop()
    assert codes == [0]
    text = fleet.logs[0].read_text()
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
