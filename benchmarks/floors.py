"""The stdio floors side by side: the blocking floor (floor_server.py), the asyncio floor (asyncio_floor_server.py:
the same answers from uvloop's pipe transports, no task, one write per read) and tooldeck, measured in interleaved
rounds by the harness's own stdio measurements: start-up (spawn to initialize's reply), server CPU per call
sequentially and with 32 in flight, and RSS after the run.

What it is for: the stdio budgets of issue 24 are ratios to the blocking floor, which has no event loop. The asyncio
floor shows what an event loop costs by itself — its memory, its wake-ups, and importing it — so each budget can be
read against the least any asyncio server pays. One exception: tooldeck answers initialize before it imports asyncio
(the handshake is served with blocking reads), so the asyncio floor's start-up bounds an asyncio server's, not
tooldeck's; its RSS after the run, with the loop running, bounds both.

Usage: .venv/bin/python benchmarks/floors.py [--rounds R] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from harness import measure, placement  # noqa: E402
from harness.servers import SERVERS_DIR, SPECS, ServerSpec, project_python  # noqa: E402
from harness.suite import spawn  # noqa: E402

BUDGETS = {"start_ms": 1.5, "cpu_us": 3.0, "inflight_cpu_us": 1.5, "rss_mb": 1.3}  # issue 24, x the blocking floor
LABELS = {
    "start_ms": "start -> initialize reply (ms)",
    "cpu_us": "server CPU per call, sequential (µs)",
    "inflight_cpu_us": "server CPU per call, 32 in flight (µs)",
    "rss_mb": "RSS after the run (MB)",
}


def specs() -> list[ServerSpec]:
    by_name = {spec.name: spec for spec in SPECS}
    asyncio_floor = ServerSpec(
        "asyncio floor",
        (str(project_python()), str(SERVERS_DIR / "asyncio_floor_server.py")),
        (),
        project_python(),
        ("orjson", "uvloop"),
    )
    return [by_name["floor"], asyncio_floor, by_name["tooldeck"]]


def one_round(spec: ServerSpec, plan: measure.Plan, cpus: set[int] | None) -> dict[str, float]:
    start = measure.start_time(partial(spawn, spec, cpus), plan.spawns)
    with spawn(spec, cpus) as server:
        server.initialize()
        sequential = measure.sequential(server, "echo", plan)
        inflight = measure.pipelined(server, plan)
        rss = server.memory_kb()["rss_kb"] / 1024
    errors = start["errors"] + sequential.get("errors", 0) + inflight["errors"]
    if errors:
        raise SystemExit(f"{spec.name}: {errors} wrong replies")
    return {"start_ms": start["median_ms"], "cpu_us": sequential["cpu_us_per_call"],
            "inflight_cpu_us": inflight["cpu_us_per_call"], "rss_mb": rss}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="the harness's quick plan (a smoke run)")
    args = parser.parse_args()
    plan = replace(measure.QUICK if args.quick else measure.FULL, spawns=5 if args.quick else 9)
    cpus, layout = placement.pin("same")
    print(f"CPU placement: {layout}", file=sys.stderr)
    servers = specs()
    found: dict[str, list[dict[str, float]]] = {spec.name: [] for spec in servers}
    for number in range(args.rounds):
        for spec in servers if number % 2 == 0 else reversed(servers):
            print(f"[round {number + 1}/{args.rounds}] {spec.name}", file=sys.stderr, flush=True)
            found[spec.name].append(one_round(spec, plan, cpus))
    medians = {
        name: {key: statistics.median(r[key] for r in rounds) for key in LABELS} for name, rounds in found.items()
    }
    floor = medians["floor"]
    print(f"{'medians of ' + str(args.rounds) + ' rounds':40} {'floor':>8} {'asyncio floor':>14} {'tooldeck':>9}   "
          f"{'asyncio floor/floor':>19} {'tooldeck/floor':>14} {'budget':>7}")  # fmt: skip
    for key, label in LABELS.items():
        row = [medians[name][key] for name in ("floor", "asyncio floor", "tooldeck")]
        print(f"{label:40} {row[0]:8.1f} {row[1]:14.1f} {row[2]:9.1f}   {row[1] / floor[key]:18.2f}x "
              f"{row[2] / floor[key]:13.2f}x {BUDGETS[key]:6.1f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
