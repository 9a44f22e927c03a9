"""Runs every measurement on one server, in order, keeping what was measured if a later step fails.

The stdio and HTTP parts run one after the other; a failure in one is reported and the other still runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from . import measure, measure_http
from .http import HttpServer
from .process import ServerFailed
from .servers import ROOT, ServerSpec
from .stdio import StdioServer

TRANSPORTS = ("stdio", "http")


def spawn(spec: ServerSpec, cpus: set[int] | None, extra_tools: int = 0, tasks: bool = False) -> StdioServer:
    return StdioServer(spec.argv, measure.server_env(extra_tools, tasks), cwd=str(ROOT), cpus=cpus)


def spawn_http(spec: ServerSpec, cpus: set[int] | None) -> HttpServer:
    return HttpServer(spec.http_argv, measure.server_env(), cwd=str(ROOT), cpus=cpus)


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
) -> dict[str, Any]:
    result: dict[str, Any] = {"versions": spec.versions(), "error": None}
    failures = []
    for transport in transports:
        step = Step(spec.name, transport, log)
        failure = None
        try:
            PARTS[transport](spec, plan, cpus, result, step)
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
) -> None:
    """The HTTP call rows of every server, measured in interleaved rounds (see `measure_http.interleaved`)."""
    subjects: list[measure_http.Subject] = []
    servers: list[HttpServer] = []

    def failed(name: str, exc: Exception, server: HttpServer) -> None:
        failure = f"http rounds: {exc}{server.stderr_tail()}"
        log(f"[{name}] FAILED at {failure[:2000]}")
        result = results[name]
        result["error"] = "; ".join(filter(None, (result["error"], failure)))

    try:
        for spec in specs:
            log(f"[{spec.name}] http spawn, initialize, {plan.clients} sessions, warm-up")
            server = spawn_http(spec, cpus)
            servers.append(server)
            try:
                subjects.append(measure_http.Subject(spec.name, server, plan))
            except (ServerFailed, OSError) as exc:
                failed(spec.name, exc, server)
        measure_http.interleaved(subjects, plan, log, lambda s, exc: failed(s.name, exc, s.server))
        for subject in subjects:
            if subject.rounds_done == plan.rounds:  # it did not fail on the way
                results[subject.name].update(subject.results())
                results[subject.name]["http_server_info"] = subject.server_info
    finally:
        for server in servers:
            server.close()
    for result in results.values():
        result["errors"] = count_errors(result)


def count_errors(result: dict[str, Any]) -> int:
    """Wrong replies over every measurement of one server."""
    return sum(part.get("errors", 0) for part in result.values() if isinstance(part, dict))


PARTS = {"stdio": run_stdio, "http": run_http}
