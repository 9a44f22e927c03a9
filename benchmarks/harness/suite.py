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
    result["errors"] = sum(part.get("errors", 0) for part in result.values() if isinstance(part, dict))
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
    result["http_command"] = list(spec.http_argv)
    mark(f"start time ({plan.spawns} spawns)")
    result["http_start"] = measure_http.start_time(partial(spawn_http, spec, cpus), plan.spawns)
    with spawn_http(spec, cpus) as server:
        mark("initialize")
        connection = server.connect()
        result["http_server_info"] = connection.initialize().get("serverInfo")
        mark("sequential echo")
        result["http_echo"] = measure_http.sequential(server, connection, plan)
        mark(f"{plan.clients} clients")
        result["http_clients"] = measure_http.clients(server, plan)
        result["http_memory"] = server.memory_kb()


PARTS = {"stdio": run_stdio, "http": run_http}
