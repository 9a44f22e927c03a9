"""The Streamable HTTP measurements: start time, sequential echo on one session, many sessions at once."""

from __future__ import annotations

import selectors
import statistics
from collections.abc import Callable
from typing import Any

import orjson

from .http import INITIALIZE, Connection, HttpServer, Response, post_bytes
from .measure import Plan, cpu_delta, now, summarize, text_ok
from .process import ServerFailed


def call_body(request_id: int, text: str) -> bytes:
    params = {"name": "echo", "arguments": {"text": text}}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


class Checker:
    """Counts wrong replies, keeps the first one for the report, and counts answers that came as SSE."""

    def __init__(self) -> None:
        self.errors = 0
        self.sse_answers = 0
        self.first_error: str | None = None

    def check(self, response: Response, request_id: int, text: str) -> None:
        if response.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            self.sse_answers += 1
        reply = response.reply()
        if not text_ok(reply, request_id, text):
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"id {request_id}: " + orjson.dumps(reply)[:300].decode()

    def summary(self) -> dict[str, Any]:
        return {"errors": self.errors, "first_error": self.first_error, "sse_answers": self.sse_answers}


def start_time(spawn: Callable[[], HttpServer], count: int) -> dict[str, Any]:
    """Spawn, connect as soon as the port listens, POST initialize, time until the whole 200 response is read;
    one untimed spawn first warms caches."""
    samples, errors = [], 0
    for attempt in range(count + 1):
        started = now()
        with spawn() as server:
            connection = server.connect()
            connection.post(INITIALIZE)
            response = connection.read_response()
            elapsed = now() - started
        reply = response.reply()
        errors += reply.get("id") != 1 or "result" not in reply or not response.headers.get(b"mcp-session-id")
        if attempt:
            samples.append(elapsed)
    ms = [s / 1e6 for s in samples]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "samples_ms": ms, "errors": errors}


def sequential(server: HttpServer, connection: Connection, plan: Plan) -> dict[str, Any]:
    """One echo call at a time on one session and connection: latency, calls/s, server CPU per call."""
    checker = Checker()
    for _ in range(plan.warmup):
        connection.next_id += 1
        connection.post(call_body(connection.next_id, "warm-up"))
        checker.check(connection.read_response(), connection.next_id, "warm-up")
    requests = []
    for i in range(plan.calls):
        connection.next_id += 1
        text = f"hello {i}"
        data = post_bytes(connection.port, call_body(connection.next_id, text), connection.session_id)
        requests.append((connection.next_id, text, data))
    sock = connection.sock
    samples = []
    cpu_before = server.cpu_ns()
    started = now()
    for request_id, text, data in requests:
        t0 = now()
        sock.sendall(data)
        response = connection.read_response()
        samples.append(now() - t0)
        checker.check(response, request_id, text)
    wall = now() - started
    return {**summarize(samples, wall, plan.calls, cpu_before, server.cpu_ns()), **checker.summary()}


def clients(server: HttpServer, plan: Plan, timeout: float = 60.0) -> dict[str, Any]:
    """`plan.clients` sessions, each on its own keep-alive connection doing echo calls one at a time, until
    `plan.client_calls` calls were answered in all; one selector over all sockets."""
    connections = [server.connect() for _ in range(plan.clients)]
    for connection in connections:
        connection.initialize()
    checker = Checker()
    pending: dict[Connection, tuple[int, str]] = {}
    sent = received = 0

    def send(connection: Connection) -> None:
        nonlocal sent
        connection.next_id += 1
        text = f"client {sent}"
        pending[connection] = (connection.next_id, text)
        connection.post(call_body(connection.next_id, text))
        sent += 1

    selector = selectors.DefaultSelector()
    for connection in connections:
        selector.register(connection.sock, selectors.EVENT_READ, connection)
    cpu_before = server.cpu_ns()
    started = now()
    try:
        for connection in connections[: plan.client_calls]:
            send(connection)
        while received < plan.client_calls:
            events = selector.select(timeout)
            if not events:
                raise ServerFailed(f"{len(pending)} calls unanswered after {timeout:g} s")
            for key, _ in events:
                connection = key.data
                for response in connection.receive(connection.sock.recv(1 << 16)):
                    expected = pending.pop(connection, None)
                    if expected is None:
                        raise ServerFailed(f"a response nobody asked for: {response.body[:200]!r}")
                    received += 1
                    checker.check(response, *expected)
                    if sent < plan.client_calls:
                        send(connection)
    finally:
        selector.close()
    wall = now() - started
    cpu_ns, cpu_source = cpu_delta(cpu_before, server.cpu_ns())
    return {
        "clients": plan.clients,
        "calls": plan.client_calls,
        "calls_per_s": plan.client_calls / (wall / 1e9),
        "wall_s": wall / 1e9,
        "cpu_us_per_call": cpu_ns / plan.client_calls / 1e3,
        "cpu_source": cpu_source,
        **checker.summary(),
    }
