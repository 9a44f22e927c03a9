"""Process CPU per call of the ways to run a sync function from the event loop, one variant per fresh process.

Usage: .venv/bin/python benchmarks/workers_micro.py [--calls N] [--repeat R] [--cpus 0|all] [--loops uvloop,asyncio]
       [--variants async,executor,pool] [--modes seq,32]

Each call is what a server does for one tools/call: a task that awaits the tool. `async` awaits an async echo,
`executor` awaits `loop.run_in_executor(ThreadPoolExecutor(40), copy_context().run, fn)` (tooldeck before
`server/workers.py`), `pool` awaits `WorkerPool(40).run(fn)`, `queue` is a plain alternative kept for comparison
(SimpleQueue of jobs, normal-priority threads, one `call_soon_threadsafe` per result), `minimal` the least a hand-off
to one thread can do (a floor, not a pool). `seq`: one call at a time; `32`: 32 callers, each
awaiting its calls one at a time. CPU is `getrusage(RUSAGE_SELF)` user+system of the whole process (all threads)
over the timed calls, after a warm-up; context switches per call are the process's voluntary + involuntary ones.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import functools
import os
import resource
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from queue import SimpleQueue
from typing import Any

from tooldeck.server.workers import WorkerPool

VARIANTS = ("async", "executor", "pool", "queue", "minimal")
MODES = ("seq", "32")


def echo(text: str = "hello") -> str:
    return text


async def echo_async(text: str = "hello") -> str:
    return text


class QueuePool:
    """The simplest lean pool: a SimpleQueue of jobs, a fixed number of daemon threads started on first use, one
    call_soon_threadsafe per result."""

    def __init__(self, max_threads: int) -> None:
        self.jobs: SimpleQueue[Any] = SimpleQueue()
        self.max_threads = max_threads
        self.started = 0
        self.idle = 0
        self.lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.jobs.put((loop, future, contextvars.copy_context(), fn))
        with self.lock:
            if self.idle:
                self.idle -= 1
                return future
            if self.started >= self.max_threads:
                return future
            self.started += 1
        threading.Thread(target=self.work, daemon=True).start()
        return future

    def work(self) -> None:
        while True:
            loop, future, context, fn = self.jobs.get()
            try:
                value, error = context.run(fn), None
            except BaseException as exc:
                value, error = None, exc
            loop.call_soon_threadsafe(settle, future, value, error)
            with self.lock:
                self.idle += 1


class MinimalHandoff:
    """The least a hand-off to one thread can do (no queue, no bound, no cancellation): the loop's thread wakes the
    worker and yields the CPU; the worker runs the function and sleeps again. A floor for `pool`, not a pool."""

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()
        self.job: Any = None
        self.result: Any = None
        threading.Thread(target=self.work, daemon=True).start()

    def run(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        future = asyncio.get_running_loop().create_future()
        self.job = fn
        self.result = None
        self.wake.release()
        while self.result is None:
            os.sched_yield()
        future.set_result(self.result[0])
        return future

    def work(self) -> None:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_BATCH, os.sched_param(0))
        while True:
            self.wake.acquire()
            self.result = (self.job(),)


def settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


def runner(variant: str) -> Callable[[], Any]:
    """An `async def` that does one call the way `variant` does."""
    fn = functools.partial(echo, "hello")
    if variant == "async":

        async def call() -> Any:
            return await echo_async("hello")

        return call
    if variant == "executor":
        executor = ThreadPoolExecutor(40, thread_name_prefix="tooldeck-tool")

        async def call() -> Any:
            return await asyncio.get_running_loop().run_in_executor(executor, contextvars.copy_context().run, fn)

        return call
    if variant == "pool":
        pool: Any = WorkerPool(40)
    elif variant == "minimal":
        pool = MinimalHandoff()
    else:
        pool = QueuePool(40)

    async def call() -> Any:
        return await pool.run(fn)

    return call


def usage() -> tuple[float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


async def measure(variant: str, mode: str, calls: int) -> dict[str, float]:
    call = runner(variant)
    loop = asyncio.get_running_loop()

    async def caller(count: int) -> None:
        for _ in range(count):
            await loop.create_task(call())

    callers = 1 if mode == "seq" else int(mode)
    await asyncio.gather(*(caller(500 // callers + 1) for _ in range(callers)))  # warm-up: threads started
    cpu0, switches0 = usage()
    await asyncio.gather(*(caller(calls // callers) for _ in range(callers)))
    cpu1, switches1 = usage()
    done = calls // callers * callers
    return {"cpu_us": (cpu1 - cpu0) / done * 1e6, "switches": (switches1 - switches0) / done}


def child(variant: str, mode: str, loop_name: str, calls: int) -> None:
    factory = None
    if loop_name == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as run:
        result = run.run(measure(variant, mode, calls))
    print(f"{result['cpu_us']:.3f} {result['switches']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpus", choices=("0", "all"), default="0", help="pin to CPU 0 (default) or run unpinned")
    parser.add_argument("--loops", default="uvloop,asyncio")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.calls)
        return 0
    if args.cpus == "0":
        os.sched_setaffinity(0, {0})  # inherited by the children
    print(f"CPU/call in µs (min / median / max of {args.repeat} processes), context switches/call; cpus={args.cpus}")
    for loop_name in args.loops.split(","):
        for mode in args.modes.split(","):
            for variant in args.variants.split(","):
                samples = []
                for _ in range(args.repeat):
                    argv = [sys.executable, __file__, "--calls", str(args.calls), "--child", variant, mode, loop_name]
                    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()
                    samples.append((float(out[0]), float(out[1])))
                cpu = sorted(s[0] for s in samples)
                switches = statistics.median(s[1] for s in samples)
                print(
                    f"{loop_name:8} {mode:>3} {variant:9} {cpu[0]:7.2f} {statistics.median(cpu):7.2f} "
                    f"{cpu[-1]:7.2f}   switches {switches:5.2f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
