"""The comparison table, the budget checks, and the raw-results JSON."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

COLUMNS = ("tooldeck", "mcp", "fastmcp", "floor")
RATIOS = (("tooldeck", "floor"), ("mcp", "tooldeck"), ("fastmcp", "tooldeck"))


@dataclass(frozen=True)
class Metric:
    label: str
    path: tuple[str, str]
    better: str  # "lower" or "higher"
    scale: float = 1.0  # multiplies the stored value for display
    digits: int = 1


METRICS = (
    Metric("start -> initialize reply, median (ms)", ("start", "median_ms"), "lower"),
    Metric("start -> initialize reply, min (ms)", ("start", "min_ms"), "lower"),
    Metric("echo (async) p50 (µs)", ("echo", "p50_us"), "lower"),
    Metric("echo (async) p99 (µs)", ("echo", "p99_us"), "lower"),
    Metric("echo (async) calls/s, sequential", ("echo", "calls_per_s"), "higher", digits=0),
    Metric("echo (async) server CPU/call (µs)", ("echo", "cpu_us_per_call"), "lower"),
    Metric("echo_sync p50 (µs)", ("echo_sync", "p50_us"), "lower"),
    Metric("echo_sync p99 (µs)", ("echo_sync", "p99_us"), "lower"),
    Metric("echo_sync calls/s, sequential", ("echo_sync", "calls_per_s"), "higher", digits=0),
    Metric("echo_sync server CPU/call (µs)", ("echo_sync", "cpu_us_per_call"), "lower"),
    Metric("echo calls/s, 32 in flight", ("inflight", "calls_per_s"), "higher", digits=0),
    Metric("echo (async) server CPU/call, 32 in flight (µs)", ("inflight", "cpu_us_per_call"), "lower"),
    Metric("echo_sync calls/s, 32 in flight", ("inflight_sync", "calls_per_s"), "higher", digits=0),
    Metric("echo_sync server CPU/call, 32 in flight (µs)", ("inflight_sync", "cpu_us_per_call"), "lower"),
    Metric("32 concurrent 50 ms sleeps, wall (ms)", ("sleeps", "median_ms"), "lower"),
    Metric("task create + result p50 (µs)", ("task", "p50_us"), "lower"),
    Metric("task create + result p99 (µs)", ("task", "p99_us"), "lower"),
    Metric("plain echo p50, alternating with them (µs)", ("task", "call_p50_us"), "lower"),
    Metric("task round trip + one plain call, server CPU (µs)", ("task", "cpu_us_per_round_trip_and_call"), "lower"),
    Metric("tools/list, 1,003 tools, p50 (µs)", ("tools_list", "p50_us"), "lower", digits=0),
    Metric("tools/list, 1,003 tools, bytes", ("tools_list", "bytes"), "lower", digits=0),
    Metric("RSS after run (MB)", ("memory", "rss_kb"), "lower", scale=1 / 1024),
    Metric("peak RSS, VmHWM (MB)", ("memory", "hwm_kb"), "lower", scale=1 / 1024),
    Metric("RSS with 1,003 tools (MB)", ("tools_list", "rss_kb"), "lower", scale=1 / 1024),
    Metric("HTTP start -> initialize 200, median (ms)", ("http_start", "median_ms"), "lower"),
    Metric("HTTP start -> initialize 200, min (ms)", ("http_start", "min_ms"), "lower"),
    Metric("HTTP echo p50 (µs)", ("http_echo", "p50_us"), "lower"),
    Metric("HTTP echo p99 (µs)", ("http_echo", "p99_us"), "lower"),
    Metric("HTTP echo calls/s, sequential", ("http_echo", "calls_per_s"), "higher", digits=0),
    Metric("HTTP echo server CPU/call (µs)", ("http_echo", "cpu_us_per_call"), "lower"),
    Metric("HTTP echo calls/s, 32 clients", ("http_clients", "calls_per_s"), "higher", digits=0),
    Metric("HTTP echo server CPU/call, 32 clients (µs)", ("http_clients", "cpu_us_per_call"), "lower"),
    Metric("HTTP echo_sync p50 (µs)", ("http_echo_sync", "p50_us"), "lower"),
    Metric("HTTP echo_sync calls/s, sequential", ("http_echo_sync", "calls_per_s"), "higher", digits=0),
    Metric("HTTP echo_sync server CPU/call (µs)", ("http_echo_sync", "cpu_us_per_call"), "lower"),
    Metric("HTTP echo_sync calls/s, 32 clients", ("http_clients_sync", "calls_per_s"), "higher", digits=0),
    Metric("HTTP echo_sync server CPU/call, 32 clients (µs)", ("http_clients_sync", "cpu_us_per_call"), "lower"),
    Metric("HTTP RSS after run (MB)", ("http_memory", "rss_kb"), "lower", scale=1 / 1024),
    Metric("2026-07-28 HTTP echo p50 (µs)", ("http_modern_echo", "p50_us"), "lower"),
    Metric("2026-07-28 HTTP echo calls/s, sequential", ("http_modern_echo", "calls_per_s"), "higher", digits=0),
    Metric("2026-07-28 HTTP echo server CPU/call (µs)", ("http_modern_echo", "cpu_us_per_call"), "lower"),
    Metric("2026-07-28 HTTP echo calls/s, 32 clients", ("http_modern_clients", "calls_per_s"), "higher", digits=0),
    Metric(
        "2026-07-28 HTTP echo server CPU/call, 32 clients (µs)", ("http_modern_clients", "cpu_us_per_call"), "lower"
    ),
    Metric("stdio eras: 2025 session echo p50 (µs)", ("session_echo", "p50_us"), "lower"),
    Metric("stdio eras: 2025 session echo server CPU/call (µs)", ("session_echo", "cpu_us_per_call"), "lower"),
    Metric("stdio eras: 2026-07-28 echo p50 (µs)", ("modern_echo", "p50_us"), "lower"),
    Metric("stdio eras: 2026-07-28 echo server CPU/call (µs)", ("modern_echo", "cpu_us_per_call"), "lower"),
    Metric("stdio eras: 2025 tools/list (1,003) p50 (µs)", ("session_tools_list", "p50_us"), "lower", digits=0),
    Metric(
        "stdio eras: 2025 tools/list (1,003) server CPU (µs)",
        ("session_tools_list", "cpu_us_per_call"),
        "lower",
        digits=0,
    ),
    Metric("stdio eras: 2026-07-28 tools/list (1,003) p50 (µs)", ("modern_tools_list", "p50_us"), "lower", digits=0),
    Metric(
        "stdio eras: 2026-07-28 tools/list (1,003) server CPU (µs)",
        ("modern_tools_list", "cpu_us_per_call"),
        "lower",
        digits=0,
    ),
    Metric("stdio eras: 2026-07-28 tools/list (1,003) bytes", ("modern_tools_list", "bytes"), "lower", digits=0),
    Metric("protocol errors (must be 0)", ("errors", ""), "lower", digits=0),
)


def value(results: dict[str, Any], server: str, path: tuple[str, str]) -> float | None:
    node = results.get(server, {}).get(path[0])
    if path[1]:
        node = node.get(path[1]) if isinstance(node, dict) else None
    return node if isinstance(node, int | float) else None


def paired_rounds(
    results: dict[str, Any], top: str, bottom: str, path: tuple[str, str], bottom_path: tuple[str, str]
) -> list[tuple[float, float]]:
    """(top, bottom) round by round, when both were measured in the same interleaved rounds."""

    def rounds(server: str, where: tuple[str, str]) -> list[Any]:
        node = results.get(server, {}).get(where[0])
        found = node.get("rounds") if isinstance(node, dict) else None
        return found if isinstance(found, list) else []

    tops, bottoms = rounds(top, path), rounds(bottom, bottom_path)
    if not tops or len(tops) != len(bottoms):
        return []
    pairs = [(t.get(path[1]), b.get(bottom_path[1])) for t, b in zip(tops, bottoms, strict=True)]
    return [(t, b) for t, b in pairs if isinstance(t, int | float) and isinstance(b, int | float) and b]


def ratio(results: dict[str, Any], top: str, bottom: str, path: tuple[str, str]) -> float | None:
    a, b = value(results, top, path), value(results, bottom, path)
    return a / b if a is not None and b else None


def align(cells: list[str], widths: list[int]) -> list[str]:
    """The first column left-aligned, numbers right-aligned."""
    return [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths, strict=True))]


def table(results: dict[str, Any]) -> str:
    columns = [c for c in COLUMNS if c in results]
    ratios = [(a, b) for a, b in RATIOS if a in results and b in results]
    header = ["metric", *columns, *(f"{a}/{b}" for a, b in ratios)]
    rows = [header]
    for metric in METRICS:
        if all(value(results, server, metric.path) is None for server in columns) and metric.path[1]:
            continue  # not measured in this run (--transport)
        row = [f"{metric.label} {'↓' if metric.better == 'lower' else '↑'}"]
        for server in columns:
            v = value(results, server, metric.path)
            row.append("-" if v is None else f"{v * metric.scale:,.{metric.digits}f}")
        for a, b in ratios:
            r = ratio(results, a, b, metric.path)
            row.append("-" if r is None else f"{r:.2f}x")
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(align(cells, widths)) for cells in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


@dataclass(frozen=True)
class Check:
    """One budget line: value(top, path) / value(bottom, bottom_path or path) within `bound` ("max" or "min")."""

    text: str
    top: str
    bottom: str
    path: tuple[str, str]
    bound: float
    kind: str
    bottom_path: tuple[str, str] | None = None

    def ratio(self, results: dict[str, Any]) -> float | None:
        """Measured in interleaved rounds: the median of the rounds' ratios (each taken minutes apart no more);
        else the ratio of the two values."""
        rounds = paired_rounds(results, self.top, self.bottom, self.path, self.bottom_path or self.path)
        if rounds:
            return statistics.median(a / b for a, b in rounds)
        a = value(results, self.top, self.path)
        b = value(results, self.bottom, self.bottom_path or self.path)
        return a / b if a is not None and b else None

    def names(self) -> str:
        if self.bottom_path is None:
            return f"{self.top}/{self.bottom}"
        if self.bottom_path[0] == self.path[0]:
            return f"{self.top} {self.path[1]}/{self.bottom_path[1]}"
        return f"{self.top} {self.path[0]}/{self.bottom_path[0]}"


BUDGET = tuple(Check(*line) for line in (
    ("sequential echo p50 <= 2x floor", "tooldeck", "floor", ("echo", "p50_us"), 2.0, "max"),
    ("sequential echo p50 >= 8x faster than mcp", "mcp", "tooldeck", ("echo", "p50_us"), 8.0, "min"),
    ("sequential echo CPU/call >= 8x less than mcp", "mcp", "tooldeck", ("echo", "cpu_us_per_call"), 8.0, "min"),
    ("32-in-flight calls/s >= 20x mcp", "tooldeck", "mcp", ("inflight", "calls_per_s"), 20.0, "min"),
    ("start time (median) <= 2x floor", "tooldeck", "floor", ("start", "median_ms"), 2.0, "max"),
    ("RSS after run <= 1.5x floor", "tooldeck", "floor", ("memory", "rss_kb"), 1.5, "max"),
    ("tools/list(1,003) p50 <= 2x floor", "tooldeck", "floor", ("tools_list", "p50_us"), 2.0, "max"),
    ("HTTP sequential calls/s >= 6x mcp", "tooldeck", "mcp", ("http_echo", "calls_per_s"), 6.0, "min"),
    ("HTTP sequential p50 <= 4x floor", "tooldeck", "floor", ("http_echo", "p50_us"), 4.0, "max"),
    ("HTTP 32 concurrent clients calls/s >= 10x mcp", "tooldeck", "mcp", ("http_clients", "calls_per_s"), 10.0, "min"),
    ("task create + result p50 <= 3x plain call p50", "tooldeck", "tooldeck", ("task", "p50_us"), 3.0, "max",
     ("task", "call_p50_us")),
    ("sync echo CPU/call <= 2x async, stdio seq", "tooldeck", "tooldeck", ("echo_sync", "cpu_us_per_call"), 2.0,
     "max", ("echo", "cpu_us_per_call")),
    ("sync echo CPU/call <= 2x async, stdio 32 in flight", "tooldeck", "tooldeck",
     ("inflight_sync", "cpu_us_per_call"), 2.0, "max", ("inflight", "cpu_us_per_call")),
    ("sync echo CPU/call <= 2x async, HTTP seq", "tooldeck", "tooldeck", ("http_echo_sync", "cpu_us_per_call"),
     2.0, "max", ("http_echo", "cpu_us_per_call")),
    ("sync echo CPU/call <= 2x async, HTTP 32 clients", "tooldeck", "tooldeck",
     ("http_clients_sync", "cpu_us_per_call"), 2.0, "max", ("http_clients", "cpu_us_per_call")),
    ("2026-07-28 call CPU <= 1.2x 2025 session, HTTP seq", "tooldeck", "tooldeck",
     ("http_modern_echo", "cpu_us_per_call"), 1.2, "max", ("http_echo", "cpu_us_per_call")),
    ("2026-07-28 call CPU <= 1.2x 2025 session, HTTP 32 clients", "tooldeck", "tooldeck",
     ("http_modern_clients", "cpu_us_per_call"), 1.2, "max", ("http_clients", "cpu_us_per_call")),
))  # fmt: skip
TEXT_WIDTH = max(len(check.text) for check in BUDGET)


def budget(results: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    checks, lines = [], []
    for check in BUDGET:
        r = check.ratio(results)
        within = r is not None and (r <= check.bound if check.kind == "max" else r >= check.bound)
        verdict = "SKIP" if r is None else "PASS" if within else "FAIL"
        measured = "n/a" if r is None else f"{check.names()} = {r:.2f}x"
        lines.append(f"  {verdict}  {check.text:<{TEXT_WIDTH}} {measured}")
        checks.append({"check": check.text, "ratio": r, "bound": check.bound, "kind": check.kind, "verdict": verdict})
    return "\n".join(lines), checks


ERAS = (  # (label, the modern row, the 2025 row it was measured against in the same rounds)
    ("HTTP echo, sequential", "http_modern_echo", "http_echo"),
    ("HTTP echo, 32 clients", "http_modern_clients", "http_clients"),
    ("stdio echo, sequential", "modern_echo", "session_echo"),
    ("stdio tools/list (1,003 tools)", "modern_tools_list", "session_tools_list"),
)


def eras(results: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Each server's modern/2025 server CPU per call, the median of the per-round ratios and their range, for every
    row pair measured; "" when no modern row was."""
    found, lines = [], []
    for label, modern, session in ERAS:
        for server in results:
            rounds = paired_rounds(results, server, server, (modern, "cpu_us_per_call"), (session, "cpu_us_per_call"))
            if not rounds:
                continue
            ratios = [a / b for a, b in rounds]
            median = statistics.median(ratios)
            figures = (value(results, server, (session, "cpu_us_per_call")),
                       value(results, server, (modern, "cpu_us_per_call")))  # fmt: skip
            found.append({"row": label, "server": server, "ratio": median, "min": min(ratios), "max": max(ratios),
                          "session_cpu_us": figures[0], "modern_cpu_us": figures[1]})  # fmt: skip
            lines.append(f"  {label:<31} {server:<9} {figures[0]:9.1f} µs -> {figures[1]:9.1f} µs  {median:.2f}x "
                         f"({min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip
    return "\n".join(lines), found


def write_json(data: dict[str, Any], *paths: Path) -> None:
    encoded = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encoded)


def run_line(data: dict[str, Any], layout: str, loadavg_start: Any, quick: bool) -> str:
    """What a run measured: the commit, the CPU layout, the load when it began, and how long it took."""
    git = data["tooldeck_git"]
    return (f"\ntooldeck git {git['sha']}{' (src/ dirty)' if git['dirty'] else ''}; {layout}; load average "
            f"{' '.join(f'{x:.2f}' for x in loadavg_start)}; {'quick' if quick else 'full'} run in "
            f"{data['duration_s']} s\n")  # fmt: skip
