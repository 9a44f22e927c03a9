"""The Streamable HTTP measurements: start time, sequential echo on one session, many sessions at once; the same
with 2026-07-28 requests (no session) in the same rounds."""

from __future__ import annotations

import selectors
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from . import eras, process
from .http import INITIALIZE, Connection, HttpServer, Response
from .measure import Plan, cpu_delta, now, percentile, summarize, switch_rates
from .placement import yielding
from .process import ServerFailed


class Row(NamedTuple):
    """A pair of HTTP rows measured in every round: `tool` called one at a time, and by `plan.clients` clients."""

    key: str  # `http_{key}` and `http_{clients_key}` in the results
    clients_key: str
    tool: str
    modern: bool  # 2026-07-28 requests (no session) instead of a 2025-11-25 session's


ROWS = {
    "echo": Row("echo", "clients", "echo", modern=False),
    "echo_sync": Row("echo_sync", "clients_sync", "echo_sync", modern=False),
    "modern_echo": Row("modern_echo", "modern_clients", "echo", modern=True),
}


class Checker:
    """Counts wrong replies, keeps the first one for the report, and counts answers that came as SSE."""

    def __init__(self, modern: bool = False) -> None:
        self.reply_ok = eras.reply_check(modern)  # a modern reply must also carry resultType "complete"
        self.errors = 0
        self.sse_answers = 0
        self.first_error: str | None = None

    def check(self, response: Response, request_id: int, text: str) -> None:
        if response.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            self.sse_answers += 1
        reply = response.reply()
        if not self.reply_ok(reply, request_id, text):
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
        data = connection.call(request_id, text, tool)
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
        connection.sock.sendall(connection.call(connection.next_id, "warm-up", tool))
        checker.check(connection.read_response(), connection.next_id, "warm-up")


def open_clients(server: HttpServer, count: int, modern: bool = False) -> list[Connection]:
    """`count` sessions, each initialized on a keep-alive connection of its own (or `count` connections sending
    2026-07-28 requests, which have nothing to initialize)."""
    connections = [server.connect(modern=modern) for _ in range(count)]
    for connection in connections:
        if not modern:
            connection.initialize()
    return connections


def clients(
    server: HttpServer,
    connections: Sequence[Connection],
    seconds: float,
    checker: Checker,
    tool: str = "echo",
    timeout: float = 60.0,
    calls: int | None = None,
) -> dict[str, Any]:
    """Every connection does calls of `tool` one at a time, new calls going out for `seconds` (or, given `calls`,
    until that many were sent), then the last ones are awaited; one selector over all sockets."""
    pending: dict[Connection, tuple[int, str]] = {}
    sent = received = 0

    def send(connection: Connection) -> None:
        nonlocal sent
        connection.next_id += 1
        text = f"client {sent}"
        pending[connection] = (connection.next_id, text)
        connection.sock.sendall(connection.call(connection.next_id, text, tool))
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
            sending = now() < deadline if calls is None else sent < calls
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
    """What one row pair's blocks gathered over the rounds: sequential calls on one connection and calls from
    `plan.clients` clients, each with its checker; the connections are a 2025 session each, or modern ones."""

    def __init__(self, row: Row, connection: Connection, clients: list[Connection]) -> None:
        self.row = row
        self.tool = row.tool
        self.connection = connection
        self.clients = clients
        self.sequential_checker = Checker(row.modern)
        self.clients_checker = Checker(row.modern)
        self.sequential_rounds: list[dict[str, Any]] = []
        self.clients_rounds: list[dict[str, Any]] = []

    def results(self) -> dict[str, Any]:
        """Latency percentiles of every sequential call pooled, rates and CPU as medians of the rounds (each round
        is also kept, so ratios can be taken round by round)."""
        samples = [s for r in self.sequential_rounds for s in r.pop("samples")]
        echo = {
            "tool": self.tool,
            "modern": self.row.modern,
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
            "modern": self.row.modern,
            "clients": len(self.clients),
            "calls": sum(r["calls"] for r in self.clients_rounds),
            **medians(self.clients_rounds, ("calls_per_s", "cpu_us_per_call", "server_preempted_per_call")),
            "rounds": self.clients_rounds,
            **self.clients_checker.summary(),
        }
        return {f"http_{self.row.key}": echo, f"http_{self.row.clients_key}": clients_row}


class Subject:
    """One server in the interleaved rounds: its process, and for each of `rows` (keys of `ROWS`) a connection for
    sequential calls and `plan.clients` more. The 2025 rows share one session and its clients; the modern rows
    have connections of their own, which send the envelope and no session id."""

    def __init__(
        self, name: str, server: HttpServer, plan: Plan, rows: tuple[str, ...] = ("echo", "echo_sync")
    ) -> None:
        self.name = name
        self.server = server
        self.server_info: Any = None
        self.modern_server_info: Any = None
        self.rows: dict[str, Rows] = {}
        session: tuple[Connection, list[Connection]] | None = None
        for key in rows:
            row = ROWS[key]
            if row.modern:
                connection = server.connect(modern=True)
                self.rows[key] = Rows(row, connection, open_clients(server, plan.clients, modern=True))
                continue
            if session is None:
                connection = server.connect()
                self.server_info = connection.initialize().get("serverInfo")
                session = connection, open_clients(server, plan.clients)
            self.rows[key] = Rows(row, *session)
        for rows_ in self.rows.values():
            warm_up(rows_.connection, plan.warmup, rows_.sequential_checker, rows_.tool)
            if rows_.row.modern and self.modern_server_info is None:
                self.modern_server_info = self.modern_identity(rows_.connection)

    @staticmethod
    def modern_identity(connection: Connection) -> Any:
        """The serverInfo in the `_meta` of a modern tools/list result (None if the server sends none)."""
        connection.next_id += 1
        connection.post(eras.message(connection.next_id, "tools/list", modern=True))
        result = connection.read_response().reply().get("result")
        return ((result.get("_meta") or {}) if isinstance(result, dict) else {}).get(eras.SERVER_INFO)

    @property
    def rounds_done(self) -> int:
        return min(len(rows.clients_rounds) for rows in self.rows.values())

    def round(self, plan: Plan) -> None:
        """For each row pair in turn (echo, echo_sync, modern echo), a block of sequential calls and a block of
        32-client calls."""
        reopened: set[int] = set()
        for rows in self.rows.values():
            for connection in (rows.connection, *rows.clients):
                if id(connection) not in reopened:  # the 2025 rows share their connections
                    reopened.add(id(connection))
                    connection.reconnect()
                    warm_up(connection, 1, rows.sequential_checker)  # accepted before the timing starts
        for rows in self.rows.values():
            checker = rows.sequential_checker
            rows.sequential_rounds.append(sequential(self.server, rows.connection, plan.block_s, checker, rows.tool))
            with yielding():  # the client must not preempt the server mid-burst (README: "A client that yields")
                rows.clients_rounds.append(
                    clients(self.server, rows.clients, plan.block_s, rows.clients_checker, rows.tool)
                )

    def results(self) -> dict[str, Any]:
        """The rows: `http_echo` and `http_clients` for echo, `http_echo_sync` and `http_clients_sync` for echo_sync,
        `http_modern_echo` and `http_modern_clients` for echo called with 2026-07-28 requests."""
        found: dict[str, Any] = {"http_memory": self.server.memory_kb()}
        for rows in self.rows.values():
            found.update(rows.results())
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


ECHO_ROWS = (("http_echo", "2025 session call, sequential", False),
             ("http_modern_echo", "2026-07-28 stateless call, sequential", True),
             ("http_clients", "2025 session call, 32 clients", False),
             ("http_modern_clients", "2026-07-28 stateless call, 32 clients", True))  # fmt: skip


def side_by_side(subjects: list[Subject], plan: Plan) -> tuple[list[dict[str, Any]], str]:
    """``interleaved`` rounds of ``subjects`` (each server closed after): their results in order, or none and what
    failed (with the server's last words) — what a benchmark comparing two servers of the same deck needs."""
    failures: list[str] = []

    def failed(subject: Subject, exc: Exception) -> None:
        failures.append(f"{subject.name}: {exc}{subject.server.stderr_tail()}")

    try:
        interleaved(subjects, plan, lambda line: print(line, file=sys.stderr, flush=True), failed)
        if failures:
            return [], "\n".join(failures)
        return [subject.results() for subject in subjects], ""
    finally:
        for subject in subjects:
            subject.server.close()
