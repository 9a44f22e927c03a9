"""The measurements, each on a running server (or spawns of one), each checking every reply it times."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from . import process
from .stdio import INITIALIZE_PARAMS, StdioServer

now = time.perf_counter_ns


@dataclass(frozen=True)
class Plan:
    """How many of everything; `QUICK` is a smoke run that finishes in seconds per server."""

    spawns: int = 15
    warmup: int = 500
    calls: int = 3000
    inflight_calls: int = 5000
    inflight: int = 32
    sleep_ms: int = 50
    sleep_rounds: int = 3
    list_tools: int = 1000
    list_warmup: int = 20
    list_calls: int = 200
    rounds: int = 16  # HTTP rows and the task row: measured in this many interleaved rounds
    block_s: float = 0.3  # HTTP: how long each server's block of calls lasts in a round (sequential, then clients)
    clients: int = 32  # HTTP: sessions, each on its own connection, calling one at a time


FULL = Plan()
QUICK = Plan(
    spawns=3,
    warmup=50,
    calls=300,
    inflight_calls=500,
    sleep_rounds=1,
    list_warmup=3,
    list_calls=20,
    rounds=2,
    block_s=0.05,
)


def percentile(samples: list[int], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def call_bytes(request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": tool, "arguments": arguments}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}) + b"\n"


def text_ok(reply: dict[str, Any], request_id: int, text: str) -> bool:
    """A correct tools/call reply: our id, a result that is not an error, and the text in its first content block."""
    result = reply.get("result")
    if reply.get("id") != request_id or not isinstance(result, dict) or result.get("isError"):
        return False
    content = result.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and content[0].get("type") == "text"
        and content[0].get("text") == text
    )


def start_time(spawn: Any, count: int) -> dict[str, Any]:
    """Spawn, write initialize at once, time until its reply line arrives; one untimed spawn first warms caches."""
    init = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}) + b"\n"
    samples = []
    errors = 0
    for attempt in range(count + 1):
        started = now()
        with spawn() as server:
            server.write(init)
            reply, _ = server.read_reply()
            elapsed = now() - started
        errors += reply.get("id") != 1 or "result" not in reply
        if attempt:
            samples.append(elapsed)
    ms = [s / 1e6 for s in samples]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "samples_ms": ms, "errors": errors}


def sequential(server: StdioServer, tool: str, plan: Plan) -> dict[str, Any]:
    """One call at a time: latency percentiles, calls/s, and the server's CPU time per call."""
    errors = 0
    for _ in range(plan.warmup):
        server.next_id += 1
        server.write(call_bytes(server.next_id, tool, {"text": "warm-up"}))
        errors += not text_ok(server.read_reply()[0], server.next_id, "warm-up")
    requests = []
    for i in range(plan.calls):
        server.next_id += 1
        text = f"hello {i}"
        requests.append((server.next_id, text, call_bytes(server.next_id, tool, {"text": text})))
    samples = []
    cpu_before = server.cpu_ns()
    started = now()
    for request_id, text, data in requests:
        t0 = now()
        server.write(data)
        reply, _ = server.read_reply()
        samples.append(now() - t0)
        errors += not text_ok(reply, request_id, text)
    wall = now() - started
    return {**summarize(samples, wall, plan.calls, cpu_before, server.cpu_ns()), "errors": errors}


def summarize(
    samples: list[int], wall_ns: int, count: int, cpu_before: CpuSample, cpu_after: CpuSample, unit: str = "call"
) -> dict[str, Any]:
    """Latency percentiles, rate and server CPU of ``count`` timed operations (``unit``: what one is called)."""
    cpu_ns, cpu_source = cpu_delta(cpu_before, cpu_after)
    return {
        f"{unit}s": count,
        "p50_us": percentile(samples, 0.50) / 1e3,
        "p99_us": percentile(samples, 0.99) / 1e3,
        "mean_us": statistics.fmean(samples) / 1e3,
        f"{unit}s_per_s": count / (wall_ns / 1e9),
        f"cpu_us_per_{unit}": cpu_ns / count / 1e3,
        "cpu_source": cpu_source,
        f"cpu_ticks_us_per_{unit}": (cpu_after[0] - cpu_before[0]) / count / 1e3,
    }


CpuSample = tuple[int, int | None, frozenset[str]]  # see process.cpu_ns


def cpu_delta(before: CpuSample, after: CpuSample) -> tuple[int, str]:
    """schedstat's ns when the same threads were alive at both ends (a thread that exits takes its time with it),
    else the 10 ms-tick utime+stime of the whole process."""
    if before[1] is not None and after[1] is not None and before[2] == after[2]:
        return after[1] - before[1], "schedstat"
    return after[0] - before[0], "stat-ticks"


def switch_rates(before: tuple[int, int], after: tuple[int, int], calls: int) -> dict[str, float]:
    """The server's context switches per call: how often it waited for work, how often it was preempted."""
    return {
        "server_waits_per_call": (after[0] - before[0]) / calls,
        "server_preempted_per_call": (after[1] - before[1]) / calls,
    }


def pipelined(server: StdioServer, plan: Plan, tool: str = "echo") -> dict[str, Any]:
    """Keep `plan.inflight` calls of `tool` outstanding: write ahead, read a reply, write the next; calls/s and the
    server's CPU per call, after `plan.warmup` untimed calls the same way (a server's worker threads are started by
    then, so the CPU time comes from schedstat). The client stays a normal process: over a pipe it preempts no
    server mid-burst (see the README's *CPU placement*)."""
    errors = burst(server, plan.inflight, plan.warmup, tool)
    switches_before = process.switches(server.pid)
    cpu_before = server.cpu_ns()
    started = now()
    errors += burst(server, plan.inflight, plan.inflight_calls, tool)
    wall = now() - started
    cpu_ns, cpu_source = cpu_delta(cpu_before, server.cpu_ns())
    return {
        "tool": tool,
        "calls": plan.inflight_calls,
        "inflight": plan.inflight,
        "calls_per_s": plan.inflight_calls / (wall / 1e9),
        "wall_s": wall / 1e9,
        "cpu_us_per_call": cpu_ns / plan.inflight_calls / 1e3,
        "cpu_source": cpu_source,
        **switch_rates(switches_before, process.switches(server.pid), plan.inflight_calls),
        "errors": errors,
    }


def burst(server: StdioServer, inflight: int, calls: int, tool: str) -> int:
    """`calls` calls of `tool`, `inflight` of them outstanding at a time; the number of wrong or missing replies."""
    pending: dict[int, str] = {}
    errors = sent = received = 0

    def send_one() -> None:
        nonlocal sent
        server.next_id += 1
        text = f"pipe {sent}"
        pending[server.next_id] = text
        server.write(call_bytes(server.next_id, tool, {"text": text}))
        sent += 1

    for _ in range(min(inflight, calls)):
        send_one()
    while received < calls:
        reply, _ = server.read_reply()
        received += 1
        request_id = reply.get("id")
        errors += not (request_id in pending and text_ok(reply, request_id, pending.pop(request_id)))
        if sent < calls:
            send_one()
    return errors + len(pending)


def concurrent_sleeps(server: StdioServer, plan: Plan) -> dict[str, Any]:
    """`plan.inflight` sleep calls written at once; wall time until the last reply (≈ one sleep if concurrent)."""
    expected = f"slept {plan.sleep_ms} ms"
    samples, errors = [], 0
    for _ in range(plan.sleep_rounds):
        ids = range(server.next_id + 1, server.next_id + 1 + plan.inflight)
        server.next_id += plan.inflight
        batch = b"".join(call_bytes(i, "sleep", {"ms": plan.sleep_ms}) for i in ids)
        started = now()
        server.write(batch)
        replies = [server.read_reply()[0] for _ in ids]
        samples.append((now() - started) / 1e6)
        by_id = {reply.get("id"): reply for reply in replies}
        errors += sum(not (i in by_id and text_ok(by_id[i], i, expected)) for i in ids)
    return {
        "median_ms": statistics.median(samples),
        "samples_ms": samples,
        "count": plan.inflight,
        "sleep_ms": plan.sleep_ms,
        "errors": errors,
    }


RELATED_TASK = "io.modelcontextprotocol/related-task"


class TaskRoundTrips:
    """A task-augmented call and its result, timed as one operation: `tools/call` with `"task": {}` (a
    CreateTaskResult), then `tasks/result` with its taskId (the CallToolResult, which must echo the text and carry
    the related-task `_meta`). Task status notifications in between are read and skipped."""

    def __init__(self, server: StdioServer, tool: str = "echo_task") -> None:
        self.server = server
        self.tool = tool
        self.errors = 0
        self.first_error: str | None = None

    def fail(self, what: str, reply: dict[str, Any]) -> None:
        self.errors += 1
        self.first_error = self.first_error or f"{what}: " + orjson.dumps(reply)[:300].decode()

    def create_bytes(self, text: str) -> tuple[bytes, int]:
        server = self.server
        server.next_id += 1
        params = {"name": self.tool, "arguments": {"text": text}, "task": {}}
        message = {"jsonrpc": "2.0", "id": server.next_id, "method": "tools/call", "params": params}
        return orjson.dumps(message) + b"\n", server.next_id

    def one(self, text: str, create: bytes, create_id: int) -> None:
        server = self.server
        server.write(create)
        created, _ = server.read_reply()
        task = created.get("result", {}).get("task") if created.get("id") == create_id else None
        task_id = task.get("taskId") if isinstance(task, dict) else None
        if type(task_id) is not str or task.get("status") not in ("working", "completed"):  # type: ignore[union-attr]
            self.fail("create", created)
            return
        server.next_id += 1
        message = {"jsonrpc": "2.0", "id": server.next_id, "method": "tasks/result", "params": {"taskId": task_id}}
        server.write(orjson.dumps(message) + b"\n")
        reply, _ = server.read_reply()
        result = reply.get("result") or {}
        ok = (
            text_ok(reply, server.next_id, text)
            and result.get("structuredContent") == {"result": text}
            and result.get("_meta", {}).get(RELATED_TASK) == {"taskId": task_id}
        )
        if not ok:
            self.fail("result", reply)

    def timed(self, text: str) -> int:
        """One round trip (request bytes built beforehand); its duration in ns."""
        data, create_id = self.create_bytes(text)
        t0 = now()
        self.one(text, data, create_id)
        return now() - t0


def task_round_trips(server: StdioServer, plan: Plan) -> dict[str, Any]:
    """Task round trips and plain echo calls on the same server, alternating one and one, so both see the machine
    in the same state; `plan.rounds` rounds of `plan.calls / rounds` pairs, each round giving a ratio of p50s."""
    trips = TaskRoundTrips(server)
    for _ in range(plan.warmup):
        trips.one("warm-up", *trips.create_bytes("warm-up"))
    per_round = max(plan.calls // plan.rounds, 1)
    rounds, task_samples, call_samples, call_errors = [], [], [], 0
    for _ in range(plan.rounds):
        tasks, calls = [], []
        cpu_before = server.cpu_ns()
        for i in range(per_round):
            text = f"hello {i}"
            tasks.append(trips.timed(text))
            server.next_id += 1
            data = call_bytes(server.next_id, "echo", {"text": text})
            t0 = now()
            server.write(data)
            reply, _ = server.read_reply()
            calls.append(now() - t0)
            call_errors += not text_ok(reply, server.next_id, text)
        cpu_ns, _ = cpu_delta(cpu_before, server.cpu_ns())
        task_samples += tasks
        call_samples += calls
        rounds.append({"p50_us": percentile(tasks, 0.5) / 1e3, "call_p50_us": percentile(calls, 0.5) / 1e3,
                       "cpu_us_per_pair": cpu_ns / per_round / 1e3})  # fmt: skip
    return {
        "round_trips": len(task_samples),
        "p50_us": percentile(task_samples, 0.50) / 1e3,
        "p99_us": percentile(task_samples, 0.99) / 1e3,
        "mean_us": statistics.fmean(task_samples) / 1e3,
        "call_p50_us": percentile(call_samples, 0.50) / 1e3,
        "cpu_us_per_round_trip_and_call": statistics.median(r["cpu_us_per_pair"] for r in rounds),
        "rounds": rounds,
        "notifications": server.notifications,  # since the spawn: notifications/tasks/status, one per task
        "errors": trips.errors + call_errors,
        "first_error": trips.first_error,
    }


def list_tools(server: StdioServer, plan: Plan) -> dict[str, Any]:
    """Full tools/list (following nextCursor if the server pages) of a deck with plan.list_tools extra tools."""
    wanted = plan.list_tools + 3

    def one_listing() -> tuple[int, int, int]:
        names: set[str] = set()
        size, pages, cursor = 0, 0, None
        while True:
            server.next_id += 1
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": server.next_id, "method": "tools/list"}
            if cursor is not None:
                message["params"] = {"cursor": cursor}
            server.send(message)
            reply, nbytes = server.read_reply()
            size, pages = size + nbytes, pages + 1
            result = reply.get("result") if reply.get("id") == server.next_id else None
            if not isinstance(result, dict):
                return len(names), size, pages
            names.update(tool.get("name") for tool in result.get("tools", ()))
            cursor = result.get("nextCursor")
            if cursor is None:
                return len(names), size, pages

    errors = 0
    for _ in range(plan.list_warmup):
        errors += one_listing()[0] != wanted
    samples = []
    for _ in range(plan.list_calls):
        t0 = now()
        count, size, pages = one_listing()
        samples.append(now() - t0)
        errors += count != wanted
    return {
        "tools": count,
        "bytes": size,
        "pages": pages,
        "calls": plan.list_calls,
        "p50_us": percentile(samples, 0.50) / 1e3,
        "p99_us": percentile(samples, 0.99) / 1e3,
        "errors": errors,
        **server.memory_kb(),
    }


def server_env(extra_tools: int = 0, tasks: bool = False) -> Mapping[str, str]:
    # PYTHONDONTWRITEBYTECODE is dropped: servers run as installed software does, with bytecode caching on
    # (pip compiles the peers' packages at install time; run.py compiles tooldeck's editable sources).
    dropped = ("BENCH_TOOLS", "BENCH_TASKS", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    if extra_tools:
        env["BENCH_TOOLS"] = str(extra_tools)
    if tasks:
        env["BENCH_TASKS"] = "1"  # the deck adds echo_task (task="optional") and so declares the tasks capability
    return env
