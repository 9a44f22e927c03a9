"""Runs every measurement on one server, in order, keeping what was measured if a later step fails.

The stdio and HTTP parts run one after the other; a failure in one is reported and the other still runs. `rows`
picks what is measured: "all", or "modern" (only the 2026-07-28 rows and the 2025 rows they are compared with).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from . import eras, measure, measure_http
from .http import HttpServer
from .process import ServerFailed
from .servers import ROOT, ServerSpec
from .stdio import StdioServer

TRANSPORTS = ("stdio", "http")
ROW_SETS = ("all", "modern")


def spawn(spec: ServerSpec, cpus: set[int] | None, extra_tools: int = 0, tasks: bool = False) -> StdioServer:
    return StdioServer(spec.argv, spec.env(measure.server_env(extra_tools, tasks)), cwd=str(ROOT), cpus=cpus)


def spawn_http(spec: ServerSpec, cpus: set[int] | None) -> HttpServer:
    return HttpServer(spec.http_argv, spec.env(measure.server_env()), cwd=str(ROOT), cpus=cpus)


class Step:
    """Names the step about to run: logs it, and remembers it so a failure can say where it happened."""

    def __init__(self, server: str, transport: str, log: Callable[[str], None]) -> None:
        self.prefix = f"[{server}] {transport}"
        self.log = log
        self.name = "start"

    def __call__(self, name: str) -> None:
        self.name = name
        self.log(f"{self.prefix} {name}")


def run_server(
    spec: ServerSpec,
    plan: measure.Plan,
    cpus: set[int] | None,
    transports: tuple[str, ...] = TRANSPORTS,
    log: Callable[[str], None] = print,
    rows: str = "all",
) -> dict[str, Any]:
    result: dict[str, Any] = {"versions": spec.versions(), "error": None}
    failures = []
    for transport in transports:
        step = Step(spec.name, transport, log)
        failure = None
        try:
            if rows == "all":
                PARTS[transport](spec, plan, cpus, result, step)
            if transport == "stdio" and spec.modern:
                run_stdio_modern(spec, plan, cpus, result, step)
        except (ServerFailed, OSError) as exc:
            failure = f"{transport} {step.name}: {exc}"
        except Exception as exc:  # a reply shaped so oddly that measuring it raised: report it, go on
            failure = f"{transport} {step.name}: {type(exc).__name__}: {exc}"
        if failure is not None:
            failures.append(failure)
            log(f"[{spec.name}] FAILED at {failure[:2000]}")
    result["error"] = "; ".join(failures) or None
    result["errors"] = count_errors(result)
    return result


def run_stdio(spec: ServerSpec, plan: measure.Plan, cpus: set[int] | None, result: dict[str, Any], mark: Step) -> None:
    result["command"] = list(spec.argv)
    mark(f"start time ({plan.spawns} spawns)")
    result["start"] = measure.start_time(partial(spawn, spec, cpus), plan.spawns)
    with spawn(spec, cpus) as server:
        mark("initialize")
        result["server_info"] = server.initialize().get("serverInfo")
        for tool in ("echo", "echo_sync"):
            mark(f"sequential {tool}")
            result[tool] = measure.sequential(server, tool, plan)
        mark(f"{plan.inflight} in flight")
        result["inflight"] = measure.pipelined(server, plan)
        mark(f"{plan.inflight} in flight, echo_sync")
        result["inflight_sync"] = measure.pipelined(server, plan, "echo_sync")
        result["memory"] = server.memory_kb()
        mark(f"{plan.inflight} concurrent sleeps")
        result["sleeps"] = measure.concurrent_sleeps(server, plan)
        result["notifications"] = server.notifications
    with spawn(spec, cpus, plan.list_tools) as server:
        mark(f"tools/list of {plan.list_tools + 3} tools")
        server.initialize()
        result["tools_list"] = measure.list_tools(server, plan)
    if spec.tasks:
        with spawn(spec, cpus, tasks=True) as server:  # stdio: tasks in the in-memory store
            mark("task create + result, sequential")
            if "tasks" not in server.initialize().get("capabilities", {}):
                raise ServerFailed("BENCH_TASKS=1 but the server declares no tasks capability")
            result["task"] = measure.task_round_trips(server, plan)


def run_stdio_modern(
    spec: ServerSpec, plan: measure.Plan, cpus: set[int] | None, result: dict[str, Any], mark: Step
) -> None:
    """The 2026-07-28 rows over stdio, each against a 2025 session of the same server in the same rounds: two
    processes for tools/call echo, two with `plan.list_tools` more tools for tools/list."""
    with spawn(spec, cpus) as session, spawn(spec, cpus) as modern:
        mark(f"2025 session vs 2026-07-28 echo, sequential ({plan.rounds} rounds)")
        result.update(eras.echo_rows(session, modern, plan))
    with spawn(spec, cpus, plan.list_tools) as session, spawn(spec, cpus, plan.list_tools) as modern:
        mark(f"2025 session vs 2026-07-28 tools/list of {plan.list_tools + 3} tools ({plan.rounds} rounds)")
        result.update(eras.list_rows(session, modern, plan))


def run_http(spec: ServerSpec, plan: measure.Plan, cpus: set[int] | None, result: dict[str, Any], mark: Step) -> None:
    """Start time, server by server; the per-call rows come from `run_http_rounds`, with all servers up at once."""
    result["http_command"] = list(spec.http_argv)
    mark(f"start time ({plan.spawns} spawns)")
    result["http_start"] = measure_http.start_time(partial(spawn_http, spec, cpus), plan.spawns)


def run_http_rounds(
    specs: list[ServerSpec],
    plan: measure.Plan,
    cpus: set[int] | None,
    results: dict[str, dict[str, Any]],
    log: Callable[[str], None] = print,
    rows: str = "all",
) -> None:
    """The HTTP call rows of every server, measured in interleaved rounds (see `measure_http.interleaved`); with
    `rows` "modern", only echo with 2025 sessions and with 2026-07-28 requests, on the servers that serve both."""
    subjects: list[measure_http.Subject] = []
    servers: list[HttpServer] = []

    def failed(name: str, exc: Exception, server: HttpServer) -> None:
        failure = f"http rounds: {exc}{server.stderr_tail()}"
        log(f"[{name}] FAILED at {failure[:2000]}")
        result = results[name]
        result["error"] = "; ".join(filter(None, (result["error"], failure)))

    try:
        for spec in specs:
            keys = http_rows(spec, rows)
            if not keys:
                continue
            log(f"[{spec.name}] http spawn, initialize, {plan.clients} sessions, warm-up: {', '.join(keys)}")
            server = spawn_http(spec, cpus)
            servers.append(server)
            try:
                subjects.append(measure_http.Subject(spec.name, server, plan, keys))
            except (ServerFailed, OSError) as exc:
                failed(spec.name, exc, server)
        measure_http.interleaved(subjects, plan, log, lambda s, exc: failed(s.name, exc, s.server))
        for subject in subjects:
            if subject.rounds_done == plan.rounds:  # it did not fail on the way
                results[subject.name].update(subject.results())
                results[subject.name]["http_server_info"] = subject.server_info
                if subject.modern_server_info is not None:
                    results[subject.name]["http_modern_server_info"] = subject.modern_server_info
    finally:
        for server in servers:
            server.close()
    for result in results.values():
        result["errors"] = count_errors(result)


def http_rows(spec: ServerSpec, rows: str) -> tuple[str, ...]:
    """The keys of `measure_http.ROWS` a server is measured with."""
    if rows == "modern":
        return ("echo", "modern_echo") if spec.modern else ()
    return ("echo", "echo_sync", "modern_echo") if spec.modern else ("echo", "echo_sync")


def count_errors(result: dict[str, Any]) -> int:
    """Wrong replies over every measurement of one server."""
    return sum(part.get("errors", 0) for part in result.values() if isinstance(part, dict))


PARTS = {"stdio": run_stdio, "http": run_http}
