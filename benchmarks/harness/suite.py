"""Runs every measurement on one server, in order, keeping what was measured if a later step fails."""

from __future__ import annotations

from functools import partial
from typing import Any

from . import measure
from .servers import ROOT, ServerSpec
from .stdio import ServerFailed, StdioServer


def spawn(spec: ServerSpec, cpus: set[int] | None, extra_tools: int = 0) -> StdioServer:
    return StdioServer(spec.argv, measure.server_env(extra_tools), cwd=str(ROOT), cpus=cpus)


def run_server(spec: ServerSpec, plan: measure.Plan, cpus: set[int] | None, log: Any = print) -> dict[str, Any]:
    result: dict[str, Any] = {"command": list(spec.argv), "versions": spec.versions(), "error": None}
    step = "start"
    try:
        log(f"[{spec.name}] start time ({plan.spawns} spawns)")
        result["start"] = measure.start_time(partial(spawn, spec, cpus), plan.spawns)
        with spawn(spec, cpus) as server:
            step = "initialize"
            result["server_info"] = server.initialize().get("serverInfo")
            for tool in ("echo", "echo_sync"):
                step = f"sequential {tool}"
                log(f"[{spec.name}] {step}")
                result[tool] = measure.sequential(server, tool, plan)
            step = "pipelined echo"
            log(f"[{spec.name}] {plan.inflight} in flight")
            result["inflight"] = measure.pipelined(server, plan)
            result["memory"] = server.memory_kb()
            step = "concurrent sleeps"
            log(f"[{spec.name}] {plan.inflight} concurrent sleeps")
            result["sleeps"] = measure.concurrent_sleeps(server, plan)
            result["notifications"] = server.notifications
        with spawn(spec, cpus, plan.list_tools) as server:
            step = "tools/list"
            log(f"[{spec.name}] tools/list of {plan.list_tools + 3} tools")
            server.initialize()
            result["tools_list"] = measure.list_tools(server, plan)
    except (ServerFailed, OSError) as exc:
        result["error"] = f"{step}: {exc}"
        log(f"[{spec.name}] FAILED at {result['error'][:2000]}")
    except Exception as exc:  # a reply shaped so oddly that measuring it raised: report it, go on with the others
        result["error"] = f"{step}: {type(exc).__name__}: {exc}"
        log(f"[{spec.name}] FAILED at {result['error'][:2000]}")
    result["errors"] = sum(part.get("errors", 0) for part in result.values() if isinstance(part, dict))
    return result
