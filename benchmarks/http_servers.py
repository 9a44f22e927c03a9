"""Which HTTP server serves tooldeck's ASGI app for the least CPU per call: the benchmark deck under uvicorn (what
`tooldeck serve --http` runs: httptools, uvloop, the corked transport) and under granian (its ASGI interface, and
its own RSGI through an adapter), beside what each server costs around an app that does nothing (the raw-ASGI floor
of run.py under uvicorn, the same app under granian) and a bare `asyncio.Protocol` on httptools serving that app
with no server around it (the least a Python HTTP/1.1 server on this loop can do).

Usage: .venv/bin/python benchmarks/http_servers.py [--rounds R] [--only a,b,...] [--calls N] [--syscalls]

Needs granian in .venv (`bash benchmarks/setup.sh` installs it; tooldeck itself never imports it). Each server is
a process of its own, measured as run.py measures its HTTP rows: all started and warmed up together, then
interleaved rounds in which each does a 0.3 s block of sequential `tools/call echo` on one 2025-11-25 session and a
0.3 s block from 32 clients (the client a batch process), client and servers pinned to one CPU; server CPU per call
(schedstat, every thread of the process) as medians of the rounds, and ratios as medians of the per-round ratios.

Then, without a clock, for each server in turn: context switches per call (every thread, from /proc) over `--calls`
sequential calls and four times as many from 32 clients, and with `--syscalls` the system calls per call over both
(strace -f -c attached meanwhile). These do not move with the machine's load.

The budget of issue 24 for a server option: tooldeck under it costs no more server CPU per call than uvicorn's
raw-ASGI floor (<= 1.0x), sequential and with 32 clients.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from harness import measure_http, placement, process, report  # noqa: E402
from harness.http import HttpServer  # noqa: E402
from harness.measure import FULL, server_env, switch_rates  # noqa: E402
from harness.process import ServerFailed  # noqa: E402
from harness.servers import ROOT, SERVERS_DIR, TOOLDECK_HTTP, project_python, tooldeck_git  # noqa: E402

PYTHON = str(project_python())
GRANIAN = str(SERVERS_DIR / "granian_server.py")
BARE = str(SERVERS_DIR / "bare_http_server.py")
SUBJECTS: dict[str, tuple[str, list[str]]] = {  # name: (what it is, argv with {port})
    "uvicorn": ("tooldeck under uvicorn (tooldeck serve --http)",
                [str(ROOT / ".venv/bin/tooldeck"), "serve", str(SERVERS_DIR / "tooldeck_server.py"), *TOOLDECK_HTTP,
                 "--quiet"]),
    "granian": ("tooldeck under granian, ASGI", [PYTHON, GRANIAN, "{port}", "tooldeck", "asgi"]),
    "granian-rsgi": ("tooldeck under granian, RSGI", [PYTHON, GRANIAN, "{port}", "tooldeck", "rsgi"]),
    "floor": ("raw-ASGI floor under uvicorn (run.py's)", [PYTHON, str(SERVERS_DIR / "floor_http_server.py"), "{port}"]),
    "granian-floor": ("the same app under granian, ASGI", [PYTHON, GRANIAN, "{port}", "floor", "asgi"]),
    "bare-floor": ("the same app on a bare protocol", [PYTHON, BARE, "{port}", "floor"]),
    "bare": ("tooldeck on a bare protocol, a Task per request", [PYTHON, BARE, "{port}", "tooldeck"]),
}  # fmt: skip
FLOOR = "floor"
BUDGET = 1.0  # tooldeck under a server option / uvicorn's raw-ASGI floor, server CPU per call
ROWS = (("http_echo", "sequential"), ("http_clients", "32 clients"))


def per_round(found: dict[str, Any], name: str, base: str, key: str) -> list[float]:
    return [a["cpu_us_per_call"] / b["cpu_us_per_call"]
            for a, b in zip(found[name][key]["rounds"], found[base][key]["rounds"], strict=True)]  # fmt: skip


def rounds(names: list[str], count: int, cpus: set[int] | None) -> tuple[dict[str, Any], str]:
    plan = replace(FULL, rounds=count)
    subjects = []
    for name in names:
        server = HttpServer(SUBJECTS[name][1], dict(server_env()), str(ROOT), cpus=cpus)
        try:
            subjects.append(measure_http.Subject(name, server, plan, rows=("echo",)))
        except Exception as exc:
            for started in [*(subject.server for subject in subjects), server]:
                started.close()
            return {}, f"{name}: {exc}{server.stderr_tail()}"
    found, failure = measure_http.side_by_side(subjects, plan)
    return dict(zip(names, found, strict=False)), failure


def table(found: dict[str, Any]) -> str:
    lines = []
    for key, label in ROWS:
        lines.append(f"{label}: server CPU per call (µs, median of rounds), calls/s, and medians of per-round ratios")
        for name, result in found.items():
            row = result[key]
            cells = [f"  {name:14s} {row['cpu_us_per_call']:7.1f} µs {row['calls_per_s']:8,.0f}/s"]
            for base in (FLOOR, "uvicorn"):
                if name != base and base in found:
                    ratios = per_round(found, name, base, key)
                    cells.append(f"/{base} {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
            lines.append("   ".join(cells) + (f"   wrong replies: {row['errors']}" if row["errors"] else ""))
    return "\n".join(lines)


def budget(found: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """tooldeck under each server / uvicorn's raw-ASGI floor, against the budget."""
    lines, verdicts = [], []
    for name in ("uvicorn", "granian", "granian-rsgi", "bare"):
        if name not in found or FLOOR not in found:
            continue
        for key, label in ROWS:
            ratio = statistics.median(per_round(found, name, FLOOR, key))
            ok = ratio <= BUDGET
            verdicts.append({"server": name, "row": key, "ratio": ratio, "pass": ok})
            lines.append(f"  {'PASS' if ok else 'FAIL'}  tooldeck under {name}, {label}: {ratio:.2f}x the floor "
                         f"(budget {BUDGET}x)")  # fmt: skip
    return "\n".join(lines), verdicts


def counts(name: str, calls: int, cpus: set[int] | None, syscalls: bool) -> dict[str, Any]:
    """Context switches (and system calls) per call of one server, over sequential calls and calls from 32
    clients: counted, not timed."""
    strace = shutil.which("strace") if syscalls else None  # (main refuses --syscalls without strace)
    with HttpServer(SUBJECTS[name][1], dict(server_env()), str(ROOT), cpus=cpus) as server:
        checker = measure_http.Checker()
        connection = server.connect()
        connection.initialize()
        measure_http.warm_up(connection, 300, checker)
        clients = measure_http.open_clients(server, 32)
        for client in clients:
            measure_http.warm_up(client, 5, checker)
        found: dict[str, Any] = {}
        before = process.switches(server.pid)
        measure_http.warm_up(connection, calls, checker)
        found["sequential"] = switch_rates(before, process.switches(server.pid), calls)
        many = measure_http.clients(server, clients, 0, checker, calls=4 * calls)
        found["clients"] = {key: many[key] for key in ("server_waits_per_call", "server_preempted_per_call")}
        if strace is not None:  # the same calls again, traced (a traced process switches more: counted apart)
            with tempfile.NamedTemporaryFile(suffix=".strace") as trace:
                tracer = subprocess.Popen([strace, "-f", "-c", "-o", trace.name, "-p", str(server.pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
                assert tracer.stderr is not None
                attached = tracer.stderr.readline()  # "strace: Process N attached": from here on calls are counted
                if b"attached" not in attached:
                    tracer.kill()
                    raise ServerFailed(f"strace could not attach to the server: {attached.decode(errors='replace')}")
                measure_http.warm_up(connection, calls, checker)
                traced = calls + measure_http.clients(server, clients, 0, checker, calls=4 * calls)["calls"]
                tracer.send_signal(signal.SIGINT)
                tracer.wait()
                found["syscalls_per_call"] = strace_counts(trace.name, traced)
        found["errors"] = checker.errors
    return found


def strace_counts(path: str, calls: int) -> dict[str, float]:
    """strace -c's table, as calls per request by system call (and the total)."""
    found: dict[str, float] = {}
    for line in Path(path).read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            found[fields[-1]] = int(fields[3]) / calls
    found["total"] = sum(found.values())
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def counts_table(found: dict[str, dict[str, Any]]) -> str:
    lines = ["context switches per call (voluntary + involuntary, every thread); system calls per call (strace)"]
    for name, row in found.items():
        seq, many = row["sequential"], row["clients"]
        waits, preempted = "server_waits_per_call", "server_preempted_per_call"
        line = (f"  {name:14s} sequential {seq[waits]:5.2f} + {seq[preempted]:5.2f}   32 clients "
                f"{many[waits]:5.2f} + {many[preempted]:5.2f}")  # fmt: skip
        calls = row.get("syscalls_per_call")
        if calls:
            top = ", ".join(f"{k} {v:.2f}" for k, v in list(calls.items())[1:6])
            line += f"   syscalls {calls['total']:5.2f} ({top})"
        lines.append(line)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    parser.add_argument("--only", help=f"comma-separated, out of {','.join(SUBJECTS)} (the floor is always run)")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls counted per server (default 2000)")
    parser.add_argument("--syscalls", action="store_true", help="also count system calls (strace -f -c)")
    args = parser.parse_args()
    if args.syscalls and shutil.which("strace") is None:
        parser.error("--syscalls needs strace (apt-get install strace)")
    names = list(SUBJECTS) if not args.only else [FLOOR, *(n for n in args.only.split(",") if n != FLOOR)]
    if unknown := set(names) - set(SUBJECTS):
        parser.error(f"unknown server(s) {', '.join(sorted(unknown))}; choose from {', '.join(SUBJECTS)}")
    loadavg = os.getloadavg()
    cpus, layout = placement.pin("same")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for name in names:
        print(f"{name:14s} {SUBJECTS[name][0]}")
    found, failure = rounds(names, args.rounds, cpus)
    if failure:
        print(failure)
        return 1
    print(f"\n{layout}; load average {' '.join(f'{x:.2f}' for x in loadavg)}; {args.rounds} rounds\n")
    print(table(found))
    budget_text, verdicts = budget(found)
    print("\nbudget (issue 24: tooldeck under a server option <= 1.0x uvicorn's raw-ASGI floor):\n" + budget_text)
    counted = {name: counts(name, args.calls, cpus, args.syscalls) for name in names}
    print("\n" + counts_table(counted))
    errors = sum(r[key]["errors"] for r in found.values() for key, _ in ROWS) + sum(
        r["errors"] for r in counted.values()
    )
    data = {"timestamp": stamp, "cpus": layout, "loadavg_start": loadavg, "tooldeck_git": tooldeck_git(),
            "subjects": {n: SUBJECTS[n][0] for n in names}, "rounds": found, "budget": verdicts, "counts": counted,
            "errors": errors}  # fmt: skip
    path = BENCH / "results" / f"http-servers-{stamp}.json"
    report.write_json(data, path)
    print(f"\nwrong replies: {errors}\nraw results: {path}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
