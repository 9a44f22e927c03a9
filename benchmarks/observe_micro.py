"""What metrics and tracing cost a call: the benchmark deck's HTTP app in-process, with both off (the default) and
with both on (Prometheus metrics, OpenTelemetry spans through the SDK to an exporter that drops them), both eras.

Usage: .venv/bin/python benchmarks/observe_micro.py [--calls N] [--rounds R] [--http-rounds R] [--instructions]

Prints this thread's CPU per call (medians of rounds that alternate off and on) and the ratio on/off, per era;
``--http-rounds`` (the budget's measure: what a served call costs the server) also serves each deck with ``tooldeck
serve --http`` (servers/tooldeck_server.py, and servers/observed_server.py, the same with both on) and drives them
with the harness's client in interleaved rounds, sequential and 32 clients: the server process's CPU per call;
``--instructions`` also counts instructions per call under callgrind (N calls less none, fresh processes).
Budget (issue 23): on ≤ 1.15x off. Off costs what eras_micro.py counts (its instruction count is the guard).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from eras_micro import Driver, callgrind_per_call, load_app, run  # noqa: E402

BUDGET = 1.15


def observed_app() -> Any:
    """The deck with metrics and spans on; the spans go to an exporter that drops them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    app = load_app()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    app.deck.use_metrics()
    app.deck.use_tracing(provider)
    from tooldeck.transports.http import HttpApp

    return HttpApp(app.deck, json_response=True)  # made again: the metrics route and gauges belong to the app


async def measure(args: argparse.Namespace) -> int:
    drivers = {False: Driver(load_app()), True: Driver(observed_app())}
    for driver in drivers.values():
        await driver.open()
    errors = 0
    for modern in (False, True):
        for driver in drivers.values():
            errors += (await driver.calls(modern, 300))[1]  # warm-up
    for modern in (False, True):
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for number in range(args.rounds):
            for on in (False, True) if number % 2 == 0 else (True, False):
                cpu_ns, wrong = await drivers[on].calls(modern, args.calls)
                cpu[on].append(cpu_ns / args.calls / 1e3)
                errors += wrong
        ratios = [b / a for a, b in zip(cpu[False], cpu[True], strict=True)]
        print(f"{'2026-07-28 stateless' if modern else '2025 session'} call: CPU per call (µs, medians of "
              f"{args.rounds} rounds of {args.calls}) off {statistics.median(cpu[False]):.1f}, metrics and tracing "
              f"on {statistics.median(cpu[True]):.1f}; ratio {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}, budget {BUDGET}x)")  # fmt: skip
    print(f"wrong replies: {errors}")
    return 1 if errors else 0


def over_http(rounds: int) -> int:
    """Each deck in a ``tooldeck serve --http`` process of its own, placed as run.py places servers (client and
    server on one CPU), the harness's client calling echo in both eras, sequentially and from 32 clients."""
    from dataclasses import replace

    from harness import measure_http, placement
    from harness.http import HttpServer
    from harness.measure import FULL, server_env
    from harness.servers import ROOT, SERVERS_DIR, TOOLDECK_HTTP

    plan = replace(FULL, rounds=rounds)
    server_cpus, layout = placement.pin("same")
    print(f"over HTTP, CPU placement: {layout}", file=sys.stderr)
    subjects = []
    for name, deck in (("off", "tooldeck_server.py"), ("on", "observed_server.py")):
        argv = [sys.executable, "-m", "tooldeck", "serve", str(SERVERS_DIR / deck), *TOOLDECK_HTTP, "--quiet"]
        subjects.append(measure_http.Subject(name, HttpServer(argv, dict(server_env()), str(ROOT), cpus=server_cpus),
                                             plan, rows=("echo", "modern_echo")))  # fmt: skip
    found, failure = measure_http.side_by_side(subjects, plan)
    if failure:
        print(failure)
        return 1
    off, on = found
    errors = 0
    for key, label, _modern in measure_http.ECHO_ROWS:
        a, b = off[key], on[key]
        ratios = [y["cpu_us_per_call"] / x["cpu_us_per_call"] for x, y in zip(a["rounds"], b["rounds"], strict=True)]
        errors += a["errors"] + b["errors"]
        print(f"over HTTP, {label}: server CPU per call (µs, medians of {plan.rounds} rounds) off "
              f"{a['cpu_us_per_call']:.1f}, on {b['cpu_us_per_call']:.1f} (+{b['cpu_us_per_call'] - a['cpu_us_per_call']:.1f}); "
              f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}, budget {BUDGET}x)")  # fmt: skip
    print(f"wrong replies over HTTP: {errors}")
    return 1 if errors else 0


async def child(on: bool, modern: bool, count: int) -> None:
    driver = Driver(observed_app() if on else load_app())
    await driver.open()
    if (await driver.calls(modern, 200))[1]:
        raise SystemExit("wrong replies")
    if count:
        await driver.calls(modern, count, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per setting in a round (default 1000)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds, off and on alternating (default 10)")
    parser.add_argument("--http-rounds", type=int, default=0, help="also rounds over HTTP (default 0: none)")
    parser.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    parser.add_argument("--child", nargs=3, metavar=("ON", "ERA", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        on, era, n = args.child
        run(child(on == "on", era == "modern", int(n)))
        return 0
    code = over_http(args.http_rounds) if args.http_rounds else 0
    code = run(measure(args)) or code
    valgrind = shutil.which("valgrind")
    if args.instructions and valgrind is not None:
        for modern in (False, True):
            era = "modern" if modern else "session"
            found = {
                on: callgrind_per_call(valgrind, [__file__, "--child", on, era], args.calls) for on in ("off", "on")
            }
            print(f"{'2026-07-28 stateless' if modern else '2025 session'} call: instructions per call (callgrind, "
                  f"{args.calls} calls) off {found['off']:,.0f}, on {found['on']:,.0f}; ratio "
                  f"{found['on'] / found['off']:.3f}x")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
