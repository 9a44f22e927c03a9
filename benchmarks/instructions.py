"""Instruction budgets: callgrind's count of the instructions one call costs on each of tooldeck's hot paths, held
against a committed baseline (`instructions.json`), so that a change making a path more than 3% dearer fails CI.

Usage: .venv/bin/python benchmarks/instructions.py [--check | --write] [--calls N] [--only PATH,...] [--src DIR]

Each path is a child process that sets up its deck and client, makes 200 warm-up calls (10 for tools/list) and
checks their replies (so imports, first-call caches and the session's opening are done), then makes N calls. The
count is callgrind's total for a run with N calls less that of a run with none, each in a fresh process, divided by
N (`eras_micro.callgrind_per_call`: strings hashed with one seed, threads taking turns). Two runs in a row agree
within 0.01%, runs under different load within 0.4% (timers fire more often in a longer run), where CPU time moves by
20-40% on a busy shared machine. It covers the client's side too (making the request, reading the reply), the same
work before and after a change. The paths:

- stdio-session: a 2025-11-25 session's `tools/call` echo over stdio's real framing path: a pipe pair in this
  process, the server's `transports.stdio.Connection` (handshake, then the event loop's pipe transports, line
  reader, batched writes) on uvloop, a client on the same loop writing a line and waiting for the reply's.
- http-session: the same call through the deck's HTTP app in-process, as `eras_micro.py` drives it (ASGI calls from
  this thread; no sockets, no uvicorn): routing, the guard, the session, the pipeline, the JSON response.
- http-stateless: a 2026-07-28 call (the envelope in `_meta`, no session), in-process.
- http-sync: http-session with `echo_sync`, a plain `def` tool run on the worker pool's thread (callgrind counts
  every thread). Natively the loop's thread waits up to 50 µs for a lone call's result and takes it directly; under
  valgrind, ~50x slower, that wait ran out now and then, three in a row mark the tool slow, and its results then
  come through the loop: the count jumped by 2.4% between runs. The child stretches the wait to 0.5 s (a constant,
  `workers.WAIT_S`: no instruction depends on its value), so every call takes the path it takes natively; valgrind
  runs the threads in turn (`--fair-sched=yes`) and the child makes 4N calls, which dilutes what is left of the
  threads' interleaving.
- http-secured: http-session on `security.py`'s secured deck and "on" policy: a JWT (ES256) on every request, the
  tool at level 5 with a scope, a rate limit, the sanitiser and the audit trail on a file (`fsync = "interval"`: each
  record written as its call ends, the fsync off the loop when it falls due).
- http-list-1003: `tools/list` of the benchmark deck with `BENCH_TOOLS=1000` (1,003 tools), answered in full on one
  page. The listing is encoded once and kept until the tools change, as a real server keeps it, so this counts
  copying the cached bytes into the response, not encoding 1,003 tools.

`--write` measures every path and writes the baseline; `--check` (the default) measures and exits 1 naming each
path more than 3% over it (tests/test_instructions.py runs it; .ci/run installs valgrind). A deliberate change to a
hot path updates the baseline in the same commit, saying why in the message.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from eras_micro import Driver, callgrind_per_call, load_app, load_deck, run  # noqa: E402
from harness import eras  # noqa: E402

BASELINE = BENCH / "instructions.json"
TOLERANCE = 0.03  # a path may grow this much over its baseline
CALLS = 300
WARMUP = 200  # calls before the counted ones, each reply checked
LIST_WARMUP = 10  # tools/list: the first builds the cached listing; checking a 378 kB reply is dear under valgrind
PATHS = {
    "stdio-session": "stdio, 2025 session tools/call",
    "http-session": "HTTP in-process, 2025 session tools/call",
    "http-stateless": "HTTP in-process, 2026-07-28 stateless tools/call",
    "http-sync": "HTTP in-process, session tools/call of a sync tool",
    "http-secured": "HTTP in-process, session tools/call, security on",
    "http-list-1003": "HTTP in-process, session tools/list of 1,003 tools",
}
SCALE = {"http-sync": 4}  # calls per path: N times this (a thread's hand-offs vary a little; more calls dilute it)
RESOURCE = "http://127.0.0.1:8000/mcp"  # the in-process driver's Host and path: the secured deck's token audience
EXPECT = "TOOLDECK_INSTRUCTIONS_FROM"  # set by the parent: the tooldeck package the children must import


# --- the children: one path each, N calls after the warm-up ----------------------------------------------------


async def http_child(path: str, count: int) -> None:
    """One HTTP path in-process: the deck's app opened as its ASGI lifespan opens it, a session, the calls."""
    with tempfile.TemporaryDirectory(prefix="tooldeck-instructions-") as directory:
        extra = None
        if path == "http-secured":
            import security

            os.environ["BENCH_SECURITY_LEVEL"] = str(security.LEVEL)
            issuer = security.Issuer(Path(directory))
            policy = security.policy("on", "http", Path(directory), RESOURCE, issuer.jwks)
            app = load_app(Path(security.DECK), policy)
            extra = [(b"authorization", b"Bearer " + issuer.token("bench-client-00", RESOURCE).encode())]
        else:
            if path == "http-list-1003":
                os.environ["BENCH_TOOLS"] = "1000"
            app = load_app()
        deck = app.deck
        await deck.open_backends()
        deck.bind_loop()  # as the lifespan does: the deck's services start
        driver = Driver(app, extra)
        await driver.open()
        if path == "http-list-1003":
            await listings(driver, LIST_WARMUP, check=True)
            await listings(driver, count, check=False)
        else:
            modern, tool = path == "http-stateless", "echo_sync" if path == "http-sync" else "echo"
            if path == "http-sync":
                from tooldeck.server import workers

                workers.WAIT_S = 0.5  # valgrind runs ~50x slower than the CPU the 50 µs was chosen for (see above)
            if (await driver.calls(modern, WARMUP, tool=tool))[1]:
                raise SystemExit(f"{path}: wrong replies")
            await driver.calls(modern, count, check=False, tool=tool)
        await deck.aclose()  # the audit trail flushed before its directory goes


async def listings(driver: Driver, count: int, check: bool) -> None:
    """`count` tools/list requests on the session; checked: each a 200 with all 1,003 tools and no next page."""
    headers = driver.headers[False]
    for _ in range(count):
        driver.next_id += 1
        answer = await driver.post(headers, eras.message(driver.next_id, "tools/list"))
        if check:
            result = orjson.loads(answer["body"]).get("result", {})
            if answer["status"] != 200 or len(result.get("tools", ())) != 1003 or "nextCursor" in result:
                raise SystemExit(f"tools/list: not the 1,003 tools on one page: {answer['body'][:300]!r}")


class PipeClient:
    """The client's end of a stdio pipe pair, on the server's event loop: a request is one line written, its reply
    the next line read (calls go one at a time)."""

    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.buffer = b""
        self.waiting: asyncio.Future[bytes] | None = None
        os.set_blocking(from_server, False)
        asyncio.get_running_loop().add_reader(from_server, self._readable)

    def _readable(self) -> None:
        data = os.read(self.from_server, 1 << 16)
        if not data:  # the server closed its end: no reply will come
            asyncio.get_running_loop().remove_reader(self.from_server)
            if self.waiting is not None:
                self.waiting.set_exception(SystemExit("stdio: the server closed its output before replying"))
            return
        self.buffer += data
        line, newline, rest = self.buffer.partition(b"\n")
        if newline and self.waiting is not None:
            self.buffer = rest
            self.waiting.set_result(line)
            self.waiting = None

    async def request(self, body: bytes) -> bytes:
        self.waiting = asyncio.get_running_loop().create_future()
        os.write(self.to_server, body + b"\n")
        return await self.waiting

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.from_server)
        os.close(self.to_server)  # EOF: the server finishes and returns


def stdio_child(count: int) -> None:
    """The stdio path: the handshake with blocking I/O (as `run_stdio` serves it), then calls on the event loop."""
    from tooldeck.transports.stdio import Connection

    deck = load_deck()
    server_in, to_server = os.pipe()
    from_server, server_out = os.pipe()
    connection = Connection(deck, server_in, server_out, None)
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
    os.write(to_server, eras.message(1, "initialize", params) + b"\n")
    os.write(to_server, orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n")
    if not connection.handshake() or b'"serverInfo"' not in os.read(from_server, 1 << 16):
        raise SystemExit("stdio: no initialize reply")

    async def client() -> None:
        pipe = PipeClient(to_server, from_server)
        next_id = 1
        for number, checked in ((WARMUP, True), (count, False)):
            bodies = []
            for _ in range(number):
                next_id += 1
                text = f"hello {next_id}"
                params = {"name": "echo", "arguments": {"text": text}}
                bodies.append((next_id, text, eras.message(next_id, "tools/call", params)))
            for request_id, text, body in bodies:
                reply = await pipe.request(body)
                if checked and not eras.text_ok(orjson.loads(reply), request_id, text):
                    raise SystemExit(f"stdio: wrong reply {reply[:300]!r}")
        pipe.close()

    async def both() -> None:
        await asyncio.gather(connection.serve(), client())

    run(both())


def child(path: str, count: int) -> None:
    import tooldeck

    expected = os.environ.get(EXPECT)
    if expected and str(Path(tooldeck.__file__).parent) != expected:
        raise SystemExit(f"the child imported tooldeck from {Path(tooldeck.__file__).parent}, not {expected}")
    if path == "stdio-session":
        stdio_child(count)
    else:
        run(http_child(path, count))


# --- the parent: measure, compare, write ---------------------------------------------------------------------


def measure(paths: list[str], calls: int, log: Callable[[str], None]) -> dict[str, float]:
    """Instructions per call of each path. The children's bytecode goes to a cache of this run's own
    (``PYTHONPYCACHEPREFIX``), filled by running each child once without valgrind (which also fails fast): a module
    compiled under valgrind costs more than the call it serves, and with ``PYTHONDONTWRITEBYTECODE`` every run would
    compile. Then two valgrind processes at a time (one per CPU here): the counts do not depend on what else runs,
    only the wall time does."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    import tooldeck

    os.environ[EXPECT] = str(Path(tooldeck.__file__).parent)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="tooldeck-instructions-pyc-") as cache:
        os.environ["PYTHONPYCACHEPREFIX"] = cache
        for path in paths:
            done = subprocess.run([sys.executable, __file__, "--child", path, "0"], capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{path}: the child failed: {done.stderr[-2000:]}")

        def one(path: str) -> float:
            started = time.monotonic()
            found = callgrind_per_call(valgrind, [__file__, "--child", path], calls * SCALE.get(path, 1))
            log(f"  {path}: {found:,.0f} ({time.monotonic() - started:.0f} s)")
            if found <= 0:  # the runs did other work than the calls (a tree changing under them?)
                raise SystemExit(f"{path}: {found:,.0f} instructions per call: the run without calls cost more")
            return found

        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(zip(paths, pool.map(one, paths), strict=True))


def versions() -> dict[str, str]:
    from importlib.metadata import version

    found = {"python": platform.python_version()}
    for name in ("orjson", "uvloop", "PyJWT", "cryptography"):
        found[name] = version(name)
    valgrind = shutil.which("valgrind")
    found["valgrind"] = "missing" if valgrind is None else subprocess.run(
        [valgrind, "--version"], capture_output=True, text=True).stdout.strip()  # fmt: skip
    return found


def git_head() -> str:
    done = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=BENCH, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def write(found: dict[str, float], calls: int, note: str, src: Path | None) -> None:
    data = {
        "note": note,
        "tooldeck": f"--src {src}" if src is not None else f"the checkout at {git_head()}",
        "calls": {path: calls * SCALE.get(path, 1) for path in found},
        "versions": versions(),
        "instructions_per_call": {path: round(count) for path, count in found.items()},
    }
    BASELINE.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {BASELINE.relative_to(BENCH.parent)}")


def check(found: dict[str, float], baseline_file: Path = BASELINE, calls: int | None = None) -> int:
    """Print every path's ratio to its baseline; 1 if any grew by more than the tolerance, each named in the last
    line with its growth, and with what differs from the baseline's measurement (the versions it records; the calls
    per path, when ``calls`` is given). A path far below its baseline is pointed out (lower the baseline, keep the
    gain)."""
    if not baseline_file.exists():
        print(f"instruction budget: no baseline {baseline_file} (run --write)")
        return 1
    baseline = json.loads(baseline_file.read_text())
    budget = baseline["instructions_per_call"]
    over, under = [], []
    for path, count in found.items():
        if path not in budget:
            print(f"none  {path:15} {count:>12,.0f}  no baseline")
            over.append(f"{path} has no baseline in {baseline_file.name}")
            continue
        ratio = count / budget[path]
        verdict = "OVER" if ratio > 1 + TOLERANCE else "low" if ratio < 1 - TOLERANCE else "ok"
        print(f"{verdict:4}  {path:15} {count:>12,.0f}  baseline {budget[path]:>12,}  {ratio:.3f}x  {PATHS[path]}")
        if verdict == "OVER":
            over.append(f"{path} grew {(ratio - 1) * 100:.1f}% ({budget[path]:,} -> {count:,.0f} instructions per "
                        f"call; the budget is +{TOLERANCE * 100:g}%)")  # fmt: skip
        elif verdict == "low":
            under.append(path)
    if under:
        print(f"{', '.join(under)}: more than {TOLERANCE * 100:g}% below the baseline; --write keeps the gain")
    if over:  # what else differs from the baseline's measurement: counts move with any of these
        now = versions()
        over += [f"the baseline was measured with {name} {was}, this is {now.get(name, 'missing')}"
                 for name, was in baseline.get("versions", {}).items() if now.get(name) != was]  # fmt: skip
        if calls is not None:
            over += [f"{path} was measured with {measured} calls, its baseline with {kept}"
                     for path, kept in baseline.get("calls", {}).items()
                     if path in found and (measured := calls * SCALE.get(path, 1)) != kept]  # fmt: skip
    if over:
        print("a deliberate change: .venv/bin/python benchmarks/instructions.py --write, committed with it, and why")
        print("instruction budget exceeded: " + "; ".join(over))
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the baseline (the default)")
    mode.add_argument("--write", action="store_true", help="measure every path and write the baseline")
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per path (default {CALLS})")
    parser.add_argument("--only", help="comma-separated paths (default: all): " + ", ".join(PATHS))
    parser.add_argument("--note", default="", help="--write: what the baseline was measured on")
    parser.add_argument("--src", type=Path, help="import tooldeck from DIR, as run.py --src (a snapshot of one commit: "
                        "git archive HEAD src | tar -x -C /tmp/snap, then --src /tmp/snap/src)")  # fmt: skip
    parser.add_argument("--child", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src.resolve()))
        os.environ["PYTHONPATH"] = str(args.src.resolve())  # for the children
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    paths = args.only.split(",") if args.only else list(PATHS)
    unknown = [path for path in paths if path not in PATHS]
    if unknown:
        parser.error(f"unknown path {', '.join(unknown)}; the paths: {', '.join(PATHS)}")
    if args.write and args.only:
        parser.error("--write measures every path: leave out --only")
    import tooldeck

    print(f"tooldeck from {Path(tooldeck.__file__).parent}; {args.calls} calls per path; instructions per call:")
    started = time.monotonic()
    found = measure(paths, args.calls, lambda text: print(text, flush=True))
    print(f"measured in {time.monotonic() - started:.0f} s")
    if args.write:
        write(found, args.calls, args.note, args.src)
        return 0
    return check(found, calls=args.calls)


if __name__ == "__main__":
    sys.exit(main())
