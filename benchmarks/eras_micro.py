"""tools/call through tooldeck's HTTP app in-process, a 2025-11-25 session against 2026-07-28 requests: what the
modern path adds, without sockets, uvicorn or a client sharing the CPU.

Usage: .venv/bin/python benchmarks/eras_micro.py [--src DIR] [--calls N] [--rounds R] [--instructions]

Prints each era's CPU time per call (this thread's, medians of rounds that alternate the eras), the garbage
collections per 1,000 calls and, by type, the objects per request that only the cyclic garbage collector frees.
`--instructions` also counts the instructions per call of each era under valgrind (callgrind): a run of N calls
less a run of none, each in a fresh process (the count includes making the request bodies, the same work for both
eras but for the envelope); deterministic, so it shows a change of a few percent on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
DECK = BENCH / "servers" / "tooldeck_server.py"
sys.path.insert(0, str(BENCH))

from harness import eras  # noqa: E402

SESSION_HEADERS = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                   (b"accept", b"application/json, text/event-stream")]  # fmt: skip


def load_deck(path: Path = DECK) -> Any:
    """The deck of a benchmark server module (the benchmark deck unless `path` names another), tooldeck imported
    from wherever sys.path finds it first."""
    spec = importlib.util.spec_from_file_location("bench_deck", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.deck


def load_app(path: Path = DECK, policy: Path | None = None) -> Any:
    """The ASGI app (JSON responses) of a benchmark deck (`load_deck`), under the policy file `policy` if given."""
    deck = load_deck(path)
    if policy is not None:
        deck.apply_policy(policy)
    return deck.http_app(json_response=True)


class Driver:
    """POSTs to the app as ASGI calls; `session` and `modern` hold each era's headers once `open` has run."""

    def __init__(self, app: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        self.app = app
        self.base = [*SESSION_HEADERS, *(extra or ())]  # `extra`: sent with every request (an Authorization)
        self.headers: dict[bool, list[tuple[bytes, bytes]]] = {}
        self.next_id = 1

    async def post(self, headers: list[tuple[bytes, bytes]], body: bytes) -> dict[str, Any]:
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await asyncio.Event().wait()  # the client never leaves
            return {}

        sent: list[dict[str, Any]] = []  # this request's own: several may be in flight (backends_micro.py)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/mcp", "raw_path": b"/mcp", "query_string": b"", "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000)}  # fmt: skip
        await self.app(scope, receive, send)
        start, body_message = sent[0], sent[-1]
        return {"status": start.get("status"), "headers": dict(start.get("headers", ())), "body": body_message["body"]}

    async def open(self) -> None:
        """A 2025 session (initialize, notifications/initialized) and the 2026-07-28 headers of a tools/call."""
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
        answer = await self.post(self.base, eras.message(1, "initialize", params))
        session_id = answer["headers"].get(b"mcp-session-id")
        if not session_id:
            raise SystemExit(f"initialize answered without a session id: {answer}")
        self.headers[False] = [*self.base, (b"mcp-session-id", session_id),
                               (b"mcp-protocol-version", b"2025-11-25")]  # fmt: skip
        await self.post(self.headers[False], orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.headers[True] = [*self.base, (b"mcp-protocol-version", eras.MODERN_VERSION.encode()),
                              (b"mcp-method", b"tools/call"), (b"mcp-name", b"echo")]  # fmt: skip

    async def calls(self, modern: bool, count: int, check: bool = True, tool: str = "echo") -> tuple[int, int]:
        """`count` tools/call of one era to `tool` (an echo): this thread's CPU time (ns) over the POSTs alone (the
        bodies are made before, the replies checked after, as the benchmark's rows check them), and the number of
        wrong replies."""
        headers, bodies = self.headers[modern], []
        if modern and tool != "echo":
            headers = [(key, tool.encode() if key == b"mcp-name" else value) for key, value in headers]
        for _ in range(count):
            self.next_id += 1
            text = f"hello {self.next_id}"
            params = {"name": tool, "arguments": {"text": text}}
            bodies.append((self.next_id, text, eras.message(self.next_id, "tools/call", params, modern)))
        answers = []
        started = time.thread_time_ns()
        for _, _, body in bodies:
            answers.append(await self.post(headers, body))
        cpu_ns = time.thread_time_ns() - started
        if not check:
            return cpu_ns, 0
        ok = eras.reply_check(modern)
        errors = sum(
            answer["status"] != 200 or not ok(orjson.loads(answer["body"]), request_id, text)
            for (request_id, text, _), answer in zip(bodies, answers, strict=True)
        )
        return cpu_ns, errors


def run(coroutine: Any) -> Any:
    """On uvloop where it is installed, as `tooldeck serve` runs."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def name(modern: bool) -> str:
    return "2026-07-28" if modern else "2025 session"


async def measure(args: argparse.Namespace) -> int:
    driver = Driver(load_app())
    await driver.open()
    errors = sum([(await driver.calls(modern, 500))[1] for modern in (False, True)])  # warm-up
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for number in range(args.rounds):
        for modern in (False, True) if number % 2 == 0 else (True, False):
            cpu_ns, wrong = await driver.calls(modern, args.calls)
            cpu[modern].append(cpu_ns / args.calls / 1e3)
            errors += wrong
    ratios = [m / s for s, m in zip(cpu[False], cpu[True], strict=True)]
    print(f"CPU per call, medians of {args.rounds} rounds of {args.calls} calls (µs): 2025 session "
          f"{statistics.median(cpu[False]):.1f}, 2026-07-28 {statistics.median(cpu[True]):.1f}; ratio "
          f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")  # fmt: skip
    for modern in (False, True):
        errors += await garbage(driver, modern, args.calls)
    print(f"wrong replies: {errors}")
    return 1 if errors else 0


async def garbage(driver: Driver, modern: bool, calls: int) -> int:
    """Collections per 1,000 calls with the collector on, then what the collector alone frees per request."""
    gc.collect()
    before = [s["collections"] for s in gc.get_stats()]
    errors = (await driver.calls(modern, calls))[1]
    made = [s["collections"] - b for s, b in zip(gc.get_stats(), before, strict=True)]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        errors += (await driver.calls(modern, 200))[1]
        gc.collect()
        kinds = collections.Counter(type(o).__qualname__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    per = ", ".join(f"{n / 200:g} {kind}" for kind, n in kinds.most_common(12)) or "none"
    print(f"{name(modern)}: collections per 1,000 calls (gen 0/1/2) "
          f"{'/'.join(f'{m * 1000 / calls:.1f}' for m in made)}; objects per request freed only by the "
          f"collector: {sum(kinds.values()) / 200:g} ({per})")  # fmt: skip
    return errors


async def child(modern: bool, count: int) -> None:
    driver = Driver(load_app())
    await driver.open()
    if (await driver.calls(modern, 200))[1]:
        raise SystemExit("wrong replies")
    if count:
        await driver.calls(modern, count, check=False)  # counted: only the POSTs and the bodies made before


def instructions(args: argparse.Namespace) -> None:
    """Instructions per call of each era: callgrind's total of a run of `args.calls * 4` calls less a run of none."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("--instructions: valgrind is not installed")
        return
    count = args.calls * 4
    found = {modern: callgrind_per_call(valgrind, [__file__, "--child", "modern" if modern else "session"], count)
             for modern in (False, True)}  # fmt: skip
    print(f"instructions per call (callgrind, {count} calls): 2025 session {found[False]:,.0f}, 2026-07-28 "
          f"{found[True]:,.0f}; ratio {found[True] / found[False]:.3f}x")  # fmt: skip


def callgrind_per_call(valgrind: str, child: list[str], count: int) -> float:
    """Instructions per call: callgrind's total of ``python *child N`` with N = ``count`` less that with N = 0 (each
    in a fresh process; the child makes N calls after what it always does). Both runs hash strings with one seed
    (``PYTHONHASHSEED=0`` unless set): with random seeds, dict and set probing alone moved the count by 1-2%. Threads
    take turns in order (``--fair-sched=yes``): a worker thread's hand-offs otherwise moved a total by 0.2%."""
    totals = []
    env = {"PYTHONHASHSEED": "0", **os.environ}
    for n in (0, count):
        argv = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", "--fair-sched=yes", sys.executable,
                *child, str(n)]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
        match = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode or match is None:
            raise SystemExit(f"callgrind run failed: {done.stderr[-1000:]}")
        totals.append(int(match.group(1)))
    return (totals[1] - totals[0]) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, help="import tooldeck from DIR (see run.py --src)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per era in a round (default 1000)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds, the eras alternating (default 20)")
    parser.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    parser.add_argument("--child", nargs=2, metavar=("ERA", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
        os.environ["PYTHONPATH"] = str(args.src.resolve())  # for the --instructions children
    if args.child:
        run(child(args.child[0] == "modern", int(args.child[1])))
        return 0
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one CPU, as run.py's servers
    import tooldeck

    print(f"tooldeck from {Path(tooldeck.__file__).parent}")
    code = run(measure(args))
    if args.instructions:
        instructions(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
