"""Benchmark tool definitions: loading 1,000 definition files, tools/list of their 3,000 tools, and upgrading
definitions while 32 HTTP clients call them.

Usage: .venv/bin/python benchmarks/definitions.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "servers"))

from definitions_server import CAPABILITIES, document, tool_id
from harness import placement, report
from harness.http import Connection, HttpServer
from harness.measure import percentile, server_env
from harness.process import ServerFailed, memory_kb
from harness.servers import BENCH, ROOT, SERVERS_DIR, tooldeck_git
from harness.stdio import StdioServer

PYTHON = str(ROOT / ".venv/bin/python")
TOOLDECK = str(ROOT / ".venv/bin/tooldeck")
DECK = str(SERVERS_DIR / "definitions_server.py")
LOAD_BUDGET_S = 1.0  # the issue: 1,000 files of 3 capabilities each load and validate in under 1 s
LIST_BUDGET = 2.0  # the main benchmark's tools/list line: tooldeck p50 <= 2x the floor's


@dataclass(frozen=True)
class Plan:
    files: int = 1000
    load_runs: int = 7  # fresh processes per variant (after one untimed one)
    list_rounds: int = 10  # rounds over the three servers, `list_calls` listings each
    list_calls: int = 20
    list_warmup: int = 10
    definitions: int = 20  # served over HTTP and upgraded
    clients: int = 32
    upgrade_rounds: int = 6  # each: a block without upgrades and one with them (order alternating)
    block_s: float = 2.5


FULL = Plan()
QUICK = Plan(files=200, load_runs=2, list_rounds=2, list_calls=5, list_warmup=2, upgrade_rounds=2, block_s=1.0)


# --- 1. loading definition files --------------------------------------------------------------------------------


def generate(directory: Path, count: int, fmt: str) -> None:
    """`count` definition files of three capabilities each, in JSON or YAML, as a person would write them."""
    import yaml

    directory.mkdir(parents=True)
    for index in range(count):
        doc = document(index)
        if fmt == "json":
            text = json.dumps(doc, indent=2)
        else:
            text = yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
        (directory / f"{tool_id(index)}.{fmt}").write_text(text)


def time_loads(directory: Path, handler: str, plan: Plan, cpus: set[int] | None) -> dict[str, Any]:
    """`deck.load_manifest(directory)` in `plan.load_runs` fresh processes (one untimed before them)."""
    argv = [PYTHON, str(DECK), "--time-load", str(directory), handler]
    samples = []
    for attempt in range(plan.load_runs + 1):
        started = time.perf_counter()
        out = run_pinned(argv, cpus)
        wall = time.perf_counter() - started
        result = json.loads(out)
        if result["tools"] != 3 * plan.files:
            raise ServerFailed(f"{directory}: loaded {result['tools']} tools, expected {3 * plan.files}")
        if attempt:
            samples.append({"load_s": result["load_s"], "process_s": wall})
    loads = [s["load_s"] for s in samples]
    return {
        "median_s": statistics.median(loads),
        "min_s": min(loads),
        "max_s": max(loads),
        "process_median_s": statistics.median(s["process_s"] for s in samples),
        "samples": samples,
    }


def run_pinned(argv: list[str], cpus: set[int] | None) -> str:
    client = os.sched_getaffinity(0)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    try:
        return subprocess.run(argv, env=server_env(), cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as exc:
        raise ServerFailed(f"{' '.join(argv)} failed: {exc.stderr[-1500:]}") from None
    finally:
        os.sched_setaffinity(0, client)


def loading(root: Path, plan: Plan, cpus: set[int] | None, log: Any) -> dict[str, Any]:
    results = {}
    for fmt, handler in (("json", "plain"), ("json", "deferred"), ("yaml", "plain")):
        directory = root / fmt
        if not directory.exists():
            generate(directory, plan.files, fmt)
        log(f"[load] {plan.files} {fmt} files, handler annotations {handler}")
        results[f"{fmt}_{handler}"] = time_loads(directory, handler, plan, cpus)
    return results


# --- 2. tools/list of the 3,000 tools ---------------------------------------------------------------------------


def list_servers(json_dir: Path, files: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The three processes listed: the definitions, as many Python tools (`@deck.tool`), and the floor."""
    extra = 3 * files - 3  # both other decks have echo, echo_sync and sleep besides their extra tools
    definitions_env = {**server_env(), "BENCH_DEFS_DIR": str(json_dir)}
    return {
        "definitions": ([TOOLDECK, "serve", DECK], definitions_env),
        "python_tools": ([TOOLDECK, "serve", str(SERVERS_DIR / "tooldeck_server.py")], dict(server_env(extra))),
        "floor": ([PYTHON, str(SERVERS_DIR / "floor_server.py")], dict(server_env(extra))),
    }


def listing(server: StdioServer) -> tuple[int, int]:
    """One full tools/list (following nextCursor): (tools, bytes)."""
    names, size, cursor = 0, 0, None
    while True:
        params = {"cursor": cursor} if cursor is not None else None
        server.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": server.next_id, "method": "tools/list"}
        if params:
            message["params"] = params
        server.send(message)
        reply, nbytes = server.read_reply()
        size += nbytes
        result = reply.get("result") if reply.get("id") == server.next_id else None
        if not isinstance(result, dict):
            raise ServerFailed(f"bad tools/list reply: {orjson.dumps(reply)[:300].decode()}")
        names += len(result.get("tools", ()))
        cursor = result.get("nextCursor")
        if cursor is None:
            return names, size


def list_block(server: StdioServer, calls: int) -> dict[str, Any]:
    samples = []
    before = server.cpu_ns()
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        tools, size = listing(server)
        samples.append(time.perf_counter_ns() - t0)
    after = server.cpu_ns()
    precise = before[1] is not None and after[1] is not None and before[2] == after[2]
    cpu_ns = (after[1] - before[1]) if precise else (after[0] - before[0])  # type: ignore[operator]
    return {"samples": samples, "cpu_us_per_list": cpu_ns / calls / 1e3, "tools": tools, "bytes": size}


def tools_list(json_dir: Path, plan: Plan, cpus: set[int] | None, log: Any) -> dict[str, Any]:
    """Every server started and warmed up, then rounds in which each lists `plan.list_calls` times (rotating)."""
    servers: dict[str, StdioServer] = {}
    rounds: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, (argv, env) in list_servers(json_dir, plan.files).items():
            servers[name] = server = StdioServer(argv, env, str(ROOT), cpus)
            server.initialize()
            for _ in range(plan.list_warmup):
                listing(server)
            rounds[name] = []
        names = list(servers)
        for number in range(plan.list_rounds):
            log(f"[tools/list] round {number + 1}/{plan.list_rounds}")
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                rounds[name].append(list_block(servers[name], plan.list_calls))
        results: dict[str, Any] = {name: list_summary(rows, servers[name]) for name, rows in rounds.items()}
    finally:
        for server in servers.values():
            server.close()
    per_round = [d["p50_us"] / f["p50_us"] for d, f in zip(rounds["definitions"], rounds["floor"], strict=True)]
    results["definitions_over_floor"] = statistics.median(per_round)
    results["main_benchmark"] = main_benchmark_list()
    return results


def list_summary(rows: list[dict[str, Any]], server: StdioServer) -> dict[str, Any]:
    for row in rows:
        row["p50_us"] = percentile(row.pop("samples"), 0.5) / 1e3
    samples_p50 = statistics.median(r["p50_us"] for r in rows)
    cpu = statistics.median(r["cpu_us_per_list"] for r in rows)
    tools = rows[-1]["tools"]
    return {
        "tools": tools,
        "bytes": rows[-1]["bytes"],
        "p50_us": samples_p50,
        "cpu_us_per_list": cpu,
        "cpu_us_per_tool": cpu / tools,
        "p50_us_per_tool": samples_p50 / tools,
        "rss_kb": server.memory_kb()["rss_kb"],
        "rounds": rows,
    }


def main_benchmark_list() -> dict[str, Any] | None:
    """tools/list of 1,003 tools in the committed main run (results/latest.json), for the per-tool comparison."""
    try:
        latest = json.loads((BENCH / "results" / "latest.json").read_text())
    except (OSError, ValueError):
        return None
    found = {"timestamp": latest.get("timestamp")}
    for name in ("tooldeck", "floor"):
        row = latest.get("servers", {}).get(name, {}).get("tools_list") or {}
        if row.get("p50_us") and row.get("tools"):
            found[name] = {
                "tools": row["tools"],
                "p50_us": row["p50_us"],
                "p50_us_per_tool": row["p50_us"] / row["tools"],
            }
    return found


# --- 3. upgrades while 32 HTTP clients call -----------------------------------------------------------------------


def call_body(request_id: int, name: str, city: str) -> bytes:
    params = {"name": name, "arguments": {"city": city, "days": 3, "metric": True}}
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def call_ok(reply: dict[str, Any], request_id: int, expected: str) -> bool:
    result = reply.get("result")
    if reply.get("id") != request_id or not isinstance(result, dict) or result.get("isError"):
        return False
    content = result.get("content")
    return isinstance(content, list) and bool(content) and content[0].get("text") == expected


def control(connection: Connection, upgrading: bool) -> dict[str, Any]:
    """Switch the server's upgrader on or off with the `bench_upgrades` tool; its counts so far."""
    connection.next_id += 1
    params = {"name": "bench_upgrades", "arguments": {"upgrading": upgrading}}
    connection.post(orjson.dumps({"jsonrpc": "2.0", "id": connection.next_id, "method": "tools/call",
                                  "params": params}))  # fmt: skip
    reply = connection.read_response().reply()
    result = reply.get("result") or {}
    if result.get("isError") or not isinstance(result.get("structuredContent"), dict):
        raise ServerFailed(f"bench_upgrades: {orjson.dumps(reply)[:300].decode()}")
    stats = result["structuredContent"]
    return stats.get("result", stats) if set(stats) == {"result"} else stats


class Calls:
    """What the clients saw in one mode (with or without upgrades): latencies and failures, over all its blocks."""

    def __init__(self) -> None:
        self.latencies: list[int] = []
        self.failed = 0
        self.first_failure: str | None = None
        self.wall_ns = 0
        self.block_p99_us: list[float] = []  # one per block, for round-by-round ratios
        self.block_max_us: list[float] = []

    def summary(self) -> dict[str, Any]:
        ordered = self.latencies
        return {
            "calls": len(ordered),
            "failed": self.failed,
            "first_failure": self.first_failure,
            "calls_per_s": len(ordered) / (self.wall_ns / 1e9) if self.wall_ns else 0.0,
            "p50_us": percentile(ordered, 0.50) / 1e3,
            "p99_us": percentile(ordered, 0.99) / 1e3,
            "max_us": max(ordered) / 1e3,
            "block_p99_us": self.block_p99_us,
            "block_max_us": self.block_max_us,
        }


def call_block(
    connections: list[Connection], tools: list[str], seconds: float, calls: Calls, rng: random.Random
) -> None:
    """Every session calls a random capability one call at a time; new calls go out for `seconds`."""
    pending: dict[Connection, tuple[int, str, int]] = {}

    def send(connection: Connection) -> None:
        connection.next_id += 1
        name = rng.choice(tools)
        city = f"city{connection.next_id}"
        expected = f"{name.rpartition('.')[2]}:{city}"
        pending[connection] = (connection.next_id, expected, time.perf_counter_ns())
        connection.post(call_body(connection.next_id, name, city))

    selector = selectors.DefaultSelector()
    for connection in connections:
        selector.register(connection.sock, selectors.EVENT_READ, connection)
    started = time.perf_counter_ns()
    deadline = started + int(seconds * 1e9)
    first = len(calls.latencies)
    try:
        for connection in connections:
            send(connection)
        while pending:
            events = selector.select(60)
            if not events:
                raise ServerFailed(f"{len(pending)} calls unanswered after 60 s")
            sending = time.perf_counter_ns() < deadline
            for key, _ in events:
                connection = key.data
                for response in connection.receive(connection.sock.recv(1 << 16)):
                    request_id, expected, sent_at = pending.pop(connection)
                    calls.latencies.append(time.perf_counter_ns() - sent_at)
                    reply = response.reply()
                    if not call_ok(reply, request_id, expected):
                        calls.failed += 1
                        calls.first_failure = calls.first_failure or orjson.dumps(reply)[:300].decode()
                    if sending:
                        send(connection)
    finally:
        selector.close()
    calls.wall_ns += time.perf_counter_ns() - started
    calls.block_p99_us.append(percentile(calls.latencies[first:], 0.99) / 1e3)
    calls.block_max_us.append(max(calls.latencies[first:]) / 1e3)


def upgrades(plan: Plan, cpus: set[int] | None, log: Any) -> dict[str, Any]:
    """One HTTP server with `plan.definitions` definitions; rounds of a block without upgrades and a block with
    the upgrader on (the order alternating), each `plan.block_s` long, 32 sessions calling throughout."""
    argv = [TOOLDECK, "serve", DECK, "--http", "--host", "127.0.0.1", "--port", "{port}", "--json-response"]
    env = {**server_env(), "BENCH_UPGRADE_DEFS": str(plan.definitions)}
    tools = [f"{tool_id(i)}.{name}" for i in range(plan.definitions) for name in CAPABILITIES]
    modes = {"without": Calls(), "with": Calls()}
    rng = random.Random(7)
    with HttpServer(argv, env, str(ROOT), cpus) as server:
        boss = server.connect()
        boss.initialize()
        connections = [server.connect() for _ in range(plan.clients)]
        for connection in connections:
            connection.initialize()
        call_block(connections, tools, 0.5, Calls(), rng)  # warm-up
        rss_start = memory_kb(server.pid)["rss_kb"]
        for number in range(plan.upgrade_rounds):
            order = ("without", "with") if number % 2 == 0 else ("with", "without")
            log(f"[upgrades] round {number + 1}/{plan.upgrade_rounds}")
            for mode in order:
                control(boss, mode == "with")
                with placement.yielding():  # as the main benchmark's 32-client blocks
                    call_block(connections, tools, plan.block_s, modes[mode], rng)
        stats = control(boss, False)
        rss_end = memory_kb(server.pid)["rss_kb"]
    return {
        "definitions": plan.definitions,
        "clients": plan.clients,
        "block_s": plan.block_s,
        "rounds": plan.upgrade_rounds,
        "without": modes["without"].summary(),
        "with": modes["with"].summary(),
        "upgrader": stats,
        "rss_kb_start": rss_start,
        "rss_kb_end": rss_end,
    }


# --- report -------------------------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(data: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []

    def add(label: str, value: str) -> None:
        rows.append((label, value))

    load, files = data["load"], data["plan"]["files"]
    first = load["json_plain"]
    spread = f"(min {first['min_s']:.3f}, max {first['max_s']:.3f})"
    add(
        f"load {files} JSON files (3 capabilities each), median of {data['plan']['load_runs']} (s)",
        f"{first['median_s']:.3f} {spread}",
    )
    add("  the same, handler annotations as strings (PEP 563) (s)", f"{load['json_deferred']['median_s']:.3f}")
    add(f"load {files} YAML files, median (s)", f"{load['yaml_plain']['median_s']:.3f}")
    add("  fresh process, start to exit, JSON (s)", f"{first['process_median_s']:.3f}")
    listed = data["tools_list"]
    for name, label in (("definitions", "definitions"), ("python_tools", "@deck.tool"), ("floor", "floor")):
        r = listed[name]
        add(
            f"tools/list, {r['tools']:,} tools ({label}): p50 wall (ms)",
            f"{r['p50_us'] / 1e3:.2f} ({r['p50_us_per_tool']:.2f} µs/tool)",
        )
        add(
            "  server CPU per tools/list (ms); reply size",
            f"{r['cpu_us_per_list'] / 1e3:.2f} ({r['cpu_us_per_tool']:.2f} µs/tool); {r['bytes']:,} B",
        )
    main = listed.get("main_benchmark") or {}
    for name in ("tooldeck", "floor"):
        if name in main:
            m = main[name]
            add(
                f"  main benchmark ({main['timestamp']}): {name}, {m['tools']:,} tools, p50 wall (ms)",
                f"{m['p50_us'] / 1e3:.2f} ({m['p50_us_per_tool']:.2f} µs/tool)",
            )
    up, stats = data["upgrades"], data["upgrades"]["upgrader"]
    for mode in ("without", "with"):
        s = up[mode]
        add(
            f"{up['clients']} HTTP clients, {up['definitions']} definitions, {mode} upgrades: calls (failed)",
            f"{s['calls']:,} ({s['failed']})",
        )
        latency = f"{s['p50_us'] / 1e3:.2f} / {s['p99_us'] / 1e3:.2f} / {s['max_us'] / 1e3:.2f}"
        add("  calls/s; latency p50 / p99 / max (ms)", f"{s['calls_per_s']:,.0f}; {latency}")
    add(
        "upgrades applied (patch + minor); refused",
        f"{stats['upgrades']} ({stats['patch']} + {stats['minor']}); {stats['failed']}",
    )
    add(
        "  one register() on the loop: p50 / max (ms)",
        f"{stats.get('apply_p50_ms', 0):.2f} / {stats.get('apply_max_ms', 0):.2f}",
    )
    gc_max, gc_full = stats["gc_max_ms"], stats["gc_full_collections"]
    add(
        "  server GC: longest pause without / with upgrades (ms); full collections",
        f"{gc_max['without']:.2f} / {gc_max['with']:.2f}; {gc_full['without']} / {gc_full['with']}",
    )
    add(
        "  tools served at the end; server RSS start -> end (MB)",
        f"{stats['tools']}; {up['rss_kb_start'] / 1024:.1f} -> {up['rss_kb_end'] / 1024:.1f}",
    )
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    lines += ["", "budget:"] + [f"  {c['verdict']}  {c['check']}: {c['measured']}" for c in data["budget"]]
    return "\n".join(lines)


def budget(data: dict[str, Any]) -> list[dict[str, Any]]:
    load = data["load"]["json_plain"]["median_s"]
    listed = data["tools_list"]["definitions_over_floor"]
    up = data["upgrades"]
    failed = up["without"]["failed"] + up["with"]["failed"] + up["upgrader"]["failed"]
    pairs = zip(up["with"]["block_p99_us"], up["without"]["block_p99_us"], strict=True)
    p99 = statistics.median(w / wo for w, wo in pairs)  # round by round, as run.py's interleaved rows
    checks = [
        (
            f"load {data['plan']['files']} JSON definition files < {LOAD_BUDGET_S:g} s",
            load < LOAD_BUDGET_S,
            f"median {load:.3f} s",
        ),
        (
            f"tools/list of the definitions' tools p50 <= {LIST_BUDGET:g}x floor (main benchmark's line)",
            listed <= LIST_BUDGET,
            f"{listed:.2f}x (median of per-round ratios)",
        ),
        ("no failed call or refused upgrade while upgrading", failed == 0, f"{failed} failed"),
        (
            "p99 latency with upgrades <= 1.5x without (no pause in serving)",
            p99 <= 1.5,
            f"{p99:.2f}x (median of per-round ratios)",
        ),
    ]
    return [{"check": text, "verdict": verdict(ok), "measured": measured} for text, ok, measured in checks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (200 files, short blocks; < 30 s)")
    parser.add_argument("--json", type=Path, help="also write the raw results to this path")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    loadavg_start = os.getloadavg()
    server_cpus, layout = placement.pin("same")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log = lambda text: print(text, flush=True)  # noqa: E731
    started = time.monotonic()
    data: dict[str, Any] = {"timestamp": stamp, "quick": args.quick, "plan": asdict(plan), "cpus": layout,
                            "python": platform.python_version(), "tooldeck_git": tooldeck_git()}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tooldeck-definitions-") as root:
        data["load"] = loading(Path(root), plan, server_cpus, log)
        data["tools_list"] = tools_list(Path(root) / "json", plan, server_cpus, log)
    data["upgrades"] = upgrades(plan, server_cpus, log)
    data["loadavg"] = {"start": loadavg_start, "end": os.getloadavg()}
    data["duration_s"] = round(time.monotonic() - started, 1)
    data["budget"] = budget(data)
    print(report.run_line(data, layout, loadavg_start, args.quick))
    print(table(data))
    paths = [BENCH / "results" / f"definitions-{stamp}.json"]
    if args.json:
        paths.append(args.json)
    report.write_json(data, *paths)
    print("\nraw results: " + ", ".join(str(p) for p in paths))
    return 0 if all(check["verdict"] == "PASS" for check in data["budget"]) else 1


if __name__ == "__main__":
    sys.exit(main())
