"""The Streamable HTTP measurements: start time, sequential echo on one session, many sessions at once."""

from __future__ import annotations

import selectors
import statistics
from collections.abc import Callable
from typing import Any

import orjson

from . import process
from .http import INITIALIZE, Connection, HttpServer, Response
from .measure import Plan, cpu_delta, now, percentile, summarize, switch_rates, text_ok
from .placement import yielding
from .process import ServerFailed

TOOLS = ("echo", "echo_sync")  # the HTTP call rows: each measured for the async and the sync echo


def call_body(request_id: int, text: str, tool: str = "echo") -> bytes:
    params = {"name": tool, "arguments": {"text": text}}
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


def sequential(
    server: HttpServer, connection: Connection, seconds: float, checker: Checker, tool: str = "echo"
) -> dict[str, Any]:
    """Calls of `tool` one at a time on one session and connection for `seconds`: latency samples, calls/s, CPU per
    call. Blocks are as long for every server, so each averages the machine's noise over the same span."""
    sock = connection.sock
    samples: list[int] = []
    deadline = now() + int(seconds * 1e9)
    cpu_before = server.cpu_ns()
    started = now()
    while True:
        connection.next_id += 1
        request_id, text = connection.next_id, f"hello {len(samples)}"
        data = connection.request(call_body(request_id, text, tool))
        t0 = now()
        sock.sendall(data)
        response = connection.read_response()
        t1 = now()
        samples.append(t1 - t0)
        checker.check(response, request_id, text)
        if t1 >= deadline:
            break
    wall = now() - started
    return {**summarize(samples, wall, len(samples), cpu_before, server.cpu_ns()), "samples": samples}


def warm_up(connection: Connection, calls: int, checker: Checker, tool: str = "echo") -> None:
    for _ in range(calls):
        connection.next_id += 1
        connection.post(call_body(connection.next_id, "warm-up", tool))
        checker.check(connection.read_response(), connection.next_id, "warm-up")


def open_clients(server: HttpServer, count: int) -> list[Connection]:
    """`count` sessions, each initialized on a keep-alive connection of its own."""
    connections = [server.connect() for _ in range(count)]
    for connection in connections:
        connection.initialize()
    return connections


def clients(
    server: HttpServer,
    connections: list[Connection],
    seconds: float,
    checker: Checker,
    tool: str = "echo",
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Every connection does calls of `tool` one at a time, new calls going out for `seconds`, then the last ones are
    awaited; one selector over all sockets."""
    pending: dict[Connection, tuple[int, str]] = {}
    sent = received = 0

    def send(connection: Connection) -> None:
        nonlocal sent
        connection.next_id += 1
        text = f"client {sent}"
        pending[connection] = (connection.next_id, text)
        connection.post(call_body(connection.next_id, text, tool))
        sent += 1

    selector = selectors.DefaultSelector()
    for connection in connections:
        selector.register(connection.sock, selectors.EVENT_READ, connection)
    switches_before = process.switches(server.pid)
    cpu_before = server.cpu_ns()
    started = now()
    deadline = started + int(seconds * 1e9)
    try:
        for connection in connections:
            send(connection)
        while pending:
            events = selector.select(timeout)
            if not events:
                raise ServerFailed(f"{len(pending)} calls unanswered after {timeout:g} s")
            sending = now() < deadline
            for key, _ in events:
                connection = key.data
                for response in connection.receive(connection.sock.recv(1 << 16)):
                    expected = pending.pop(connection, None)
                    if expected is None:
                        raise ServerFailed(f"a response nobody asked for: {response.body[:200]!r}")
                    received += 1
                    checker.check(response, *expected)
                    if sending:
                        send(connection)
    finally:
        selector.close()
    wall = now() - started
    cpu_ns, cpu_source = cpu_delta(cpu_before, server.cpu_ns())
    switches = switch_rates(switches_before, process.switches(server.pid), received)
    return {
        "clients": len(connections),
        "calls": received,
        "calls_per_s": received / (wall / 1e9),
        "wall_s": wall / 1e9,
        "cpu_us_per_call": cpu_ns / received / 1e3,
        "cpu_source": cpu_source,
        **switches,
    }


class Rows:
    """What one tool's blocks gathered over the rounds: sequential calls and 32-client calls, each with its checker."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.sequential_checker = Checker()
        self.clients_checker = Checker()
        self.sequential_rounds: list[dict[str, Any]] = []
        self.clients_rounds: list[dict[str, Any]] = []

    def results(self, clients_count: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Latency percentiles of every sequential call pooled, rates and CPU as medians of the rounds (each round
        is also kept, so ratios can be taken round by round)."""
        samples = [s for r in self.sequential_rounds for s in r.pop("samples")]
        echo = {
            "tool": self.tool,
            "calls": len(samples),
            "p50_us": percentile(samples, 0.50) / 1e3,
            "p99_us": percentile(samples, 0.99) / 1e3,
            "mean_us": statistics.fmean(samples) / 1e3,
            **medians(self.sequential_rounds, ("calls_per_s", "cpu_us_per_call")),
            "rounds": self.sequential_rounds,
            **self.sequential_checker.summary(),
        }
        clients_row = {
            "tool": self.tool,
            "clients": clients_count,
            "calls": sum(r["calls"] for r in self.clients_rounds),
            **medians(self.clients_rounds, ("calls_per_s", "cpu_us_per_call", "server_preempted_per_call")),
            "rounds": self.clients_rounds,
            **self.clients_checker.summary(),
        }
        return echo, clients_row


class Subject:
    """One server in the interleaved rounds: its process, a session for sequential calls, `plan.clients` more."""

    def __init__(self, name: str, server: HttpServer, plan: Plan) -> None:
        self.name = name
        self.server = server
        self.connection = server.connect()
        self.server_info = self.connection.initialize().get("serverInfo")
        self.clients = open_clients(server, plan.clients)
        self.rows = {tool: Rows(tool) for tool in TOOLS}
        for rows in self.rows.values():
            warm_up(self.connection, plan.warmup, rows.sequential_checker, rows.tool)

    @property
    def rounds_done(self) -> int:
        return min(len(rows.clients_rounds) for rows in self.rows.values())

    def round(self, plan: Plan) -> None:
        """A block of sequential calls and a block of 32-client calls, for echo and then for echo_sync."""
        first = self.rows["echo"].sequential_checker
        for connection in (self.connection, *self.clients):
            connection.reconnect()
            warm_up(connection, 1, first)  # the server accepts it before the timing starts
        for rows in self.rows.values():
            checker = rows.sequential_checker
            rows.sequential_rounds.append(sequential(self.server, self.connection, plan.block_s, checker, rows.tool))
            with yielding():  # the client must not preempt the server mid-burst (README: "A client that yields")
                rows.clients_rounds.append(
                    clients(self.server, self.clients, plan.block_s, rows.clients_checker, rows.tool)
                )

    def results(self) -> dict[str, Any]:
        """The rows: `http_echo` and `http_clients` for echo, `http_echo_sync` and `http_clients_sync` for echo_sync."""
        found: dict[str, Any] = {"http_memory": self.server.memory_kb()}
        for tool, rows in self.rows.items():
            suffix = "" if tool == "echo" else "_sync"
            found[f"http_echo{suffix}"], found[f"http_clients{suffix}"] = rows.results(len(self.clients))
        return found


def medians(rounds: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in rounds) for key in keys}


def interleaved(
    subjects: list[Subject], plan: Plan, log: Callable[[str], None], failed: Callable[[Subject, Exception], None]
) -> None:
    """`plan.rounds` rounds; in each, every server does its block of sequential calls and its block of 32-client
    calls, the order rotating from round to round. The servers are measured minutes apart no more: what the
    machine's load does to one round it does to all of them."""
    live = list(subjects)
    for number in range(plan.rounds):
        log(f"[http] round {number + 1}/{plan.rounds}: " + ", ".join(s.name for s in live))
        shift = number % len(live) if live else 0
        for subject in live[shift:] + live[:shift]:
            try:
                subject.round(plan)
            except (ServerFailed, OSError) as exc:
                failed(subject, exc)
                live.remove(subject)
