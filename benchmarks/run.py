"""Benchmark tooldeck against the official mcp SDK, fastmcp and a minimal floor server, side by side over stdio
and Streamable HTTP.

Usage: .venv/bin/python benchmarks/run.py [--quick] [--only tooldeck,floor] [--json PATH] [--cpus same|split|none]
       [--transport stdio|http|both] [--rows all|modern] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import measure, placement, report
from harness.servers import BENCH, NAMES, SPECS, tooldeck_git
from harness.suite import ROW_SETS, TRANSPORTS, run_http_rounds, run_server


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run with few iterations")
    parser.add_argument("--only", help=f"comma-separated servers out of {','.join(NAMES)}")
    parser.add_argument("--json", type=Path, help="also write the raw results to this path")
    parser.add_argument(
        "--cpus", choices=placement.LAYOUTS, default="same", help="CPU pinning of client and server (default: same)"
    )
    parser.add_argument(
        "--transport", choices=(*TRANSPORTS, "both"), default="both", help="which rows to measure (default: both)"
    )
    parser.add_argument(
        "--rows",
        choices=ROW_SETS,
        default="all",
        help="all rows, or only the 2026-07-28 (stateless) rows and the 2025 session rows they are compared with",
    )
    parser.add_argument(
        "--src",
        type=Path,
        help="import tooldeck from DIR (holding tooldeck/) instead of the editable install's src/, e.g. a snapshot "
        "made with `git archive HEAD src | tar -x -C /tmp/snap` (then DIR is /tmp/snap/src)",
    )
    args = parser.parse_args()
    if args.src is not None:
        args.src = args.src.resolve()
        if not (args.src / "tooldeck" / "__init__.py").is_file():
            parser.error(f"--src {args.src}: no tooldeck/__init__.py there")
    args.transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    args.only = args.only.split(",") if args.only else list(NAMES)
    if unknown := set(args.only) - set(NAMES):
        parser.error(f"unknown server(s) {', '.join(sorted(unknown))}; choose from {', '.join(NAMES)}")
    return args


def machine() -> dict[str, object]:
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    return {
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu": model,
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
    }


def main() -> int:
    args = parse_args()
    plan = measure.QUICK if args.quick else measure.FULL
    host = machine()  # before pinning narrows the CPUs this process sees
    server_cpus, layout = placement.pin(args.cpus)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data: dict[str, object] = {
        "timestamp": stamp,
        "quick": args.quick,
        "plan": vars(plan),
        "machine": host,
        "client_python": platform.python_version(),
        "cpus": layout,
        "throughput_client": "SCHED_BATCH during the HTTP 32-client blocks (placement.yielding)",
        "transports": list(args.transports),
        "rows": args.rows,
        "tooldeck_git": tooldeck_git(),
        "tooldeck_src": str(args.src) if args.src else None,
    }
    print(f"machine: {data['machine']}", flush=True)
    compile_sources(args.src)
    started = time.monotonic()
    specs = [spec for spec in SPECS if spec.name in args.only]
    if args.src is not None:
        specs = [replace(spec, source=args.src) if spec.name == "tooldeck" else spec for spec in specs]
    log = partial(print, flush=True)
    results = {spec.name: run_server(spec, plan, server_cpus, args.transports, log, args.rows) for spec in specs}
    if "http" in args.transports:
        run_http_rounds(specs, plan, server_cpus, results, log, args.rows)
    data["machine"]["loadavg_end"] = os.getloadavg()  # type: ignore[index]
    data["duration_s"] = round(time.monotonic() - started, 1)
    data["servers"] = results
    budget_text, data["budget"] = report.budget(results)

    print()
    print(header(data, results))
    print()
    print(report.table(results))
    print("\nratios are a/b of the values; ↓ lower is better, ↑ higher is better")
    print("\nbudget (tooldeck):")
    print(budget_text)
    eras_text, data["eras"] = report.eras(results)
    if eras_text:
        print("\n2026-07-28 request / 2025-11-25 session, server CPU per call (median of the per-round ratios):")
        print(eras_text)
    for name, result in results.items():
        if result["error"]:
            print(f"\n{name} skipped or incomplete: {result['error']}")

    paths = [BENCH / "results" / f"{stamp}.json"]
    clean = all(r["error"] is None and not r["errors"] for r in results.values())
    everything = args.only == list(NAMES) and args.transport == "both" and args.rows == "all"
    if clean and everything and not args.quick and args.cpus == "same" and args.src is None:
        paths.append(BENCH / "results" / "latest.json")  # the published one: a full, clean run of everything
    if args.json:
        paths.append(args.json)
    report.write_json(data, *paths)
    print("\nraw results: " + ", ".join(str(p) for p in paths))
    return 0 if clean else 1


def compile_sources(source: Path | None) -> None:
    """Bytecode for tooldeck's editable install (or `--src`) and the benchmark decks, as `pip install` gives the
    peers."""
    root = BENCH.parent
    for path in (source or root / "src", BENCH / "servers"):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(path)], check=True, stdout=subprocess.DEVNULL)


def header(data: dict, results: dict) -> str:
    versions = {name: r["versions"] for name, r in results.items()}
    git = data["tooldeck_git"]
    m = data["machine"]
    lines = [
        f"python (client) {data['client_python']}; servers: "
        + "; ".join(f"{n} " + ", ".join(f"{k} {v}" for k, v in vs.items() if v) for n, vs in versions.items()),
        f"CPU placement: {data['cpus']}",
        f"tooldeck git {git['sha']}{' (src/ dirty)' if git['dirty'] else ''}"
        + (f", tooldeck imported from {data['tooldeck_src']}" if data["tooldeck_src"] else ""),
        f"machine: {m['cpu']}, nproc {m['nproc']}, load average at start "
        + " ".join(f"{x:.2f}" for x in m["loadavg_start"])
        + f", {'quick' if data['quick'] else 'full'} run "
        f"in {data['duration_s']} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
