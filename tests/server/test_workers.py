"""The worker pool for sync tools: results, context, order and bound, cancellation, never blocking the loop, exit."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from tooldeck.server.workers import WorkerPool

TIMEOUT = 10.0
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


class Gate:
    """A job that says when it started and runs until the test opens it."""

    def __init__(self, value: Any = None) -> None:
        self.started = threading.Event()
        self.opened = threading.Event()
        self.finished = threading.Event()
        self.value = value

    def __call__(self) -> Any:
        self.started.set()
        try:
            assert self.opened.wait(TIMEOUT), "the test never opened the gate"
        finally:
            self.finished.set()
        return self.value


def fail(exc: BaseException) -> None:
    raise exc


class Abort(BaseException):
    """Not an Exception: still handed to the caller."""


@pytest.mark.parametrize("max_threads", [1, 4])
async def test_results_and_exceptions_reach_the_caller(max_threads: int) -> None:
    pool = WorkerPool(max_threads)
    assert await pool.run(lambda: 42) == 42
    with pytest.raises(ValueError, match="bad input"):
        await pool.run(functools.partial(fail, ValueError("bad input")))
    with pytest.raises(Abort):
        await pool.run(functools.partial(fail, Abort()))
    values = await asyncio.gather(*(pool.run(functools.partial(int, i)) for i in range(200)))  # a burst
    assert values == list(range(200))
    outcomes = await asyncio.gather(
        *(pool.run(functools.partial(fail, KeyError(i)) if i % 2 else functools.partial(str, i)) for i in range(50)),
        return_exceptions=True,
    )
    assert [str(o) if i % 2 else o for i, o in enumerate(outcomes)] == [repr(i) if i % 2 else str(i) for i in range(50)]
    pool.close()


async def test_fn_sees_a_copy_of_the_callers_context_variables() -> None:
    pool = WorkerPool(2)

    def read_and_set() -> str:
        seen = request_id.get()
        request_id.set("changed in the worker")
        return seen

    assert await pool.run(read_and_set) == "none"
    request_id.set("r-17")
    assert await asyncio.gather(*(pool.run(read_and_set) for _ in range(10))) == ["r-17"] * 10
    assert request_id.get() == "r-17"  # the worker's change stayed in its copy
    pool.close()


async def test_jobs_start_in_fifo_order_and_at_most_max_threads_at_once() -> None:
    pool = WorkerPool(2)
    lock = threading.Lock()
    order: list[int] = []
    running = [0, 0]  # now, most at once

    def job(i: int, gate: Gate) -> int:
        with lock:
            order.append(i)
            running[0] += 1
            running[1] = max(running)
        try:
            gate()
        finally:
            with lock:
                running[0] -= 1
        return i

    gates = [Gate() for _ in range(6)]
    futures = [pool.run(functools.partial(job, i, gate)) for i, gate in enumerate(gates)]
    assert gates[0].started.wait(TIMEOUT) and gates[1].started.wait(TIMEOUT)
    for i in range(2, 6):
        assert not gates[i].started.is_set()  # both threads are busy: it waits its turn
        gates[i - 2].opened.set()  # one finishes, so the next in line starts
        assert gates[i].started.wait(TIMEOUT)
        with lock:
            assert order == list(range(i + 1))
    for gate in gates[4:]:
        gate.opened.set()
    assert await asyncio.gather(*futures) == list(range(6))
    assert running[1] == 2
    pool.close()


async def test_a_job_cancelled_before_it_starts_is_skipped() -> None:
    pool = WorkerPool(1)
    blocker = Gate("first")
    first = pool.run(blocker)
    assert blocker.started.wait(TIMEOUT)
    ran = threading.Event()
    skipped = asyncio.ensure_future(pool.run(ran.set))
    await asyncio.sleep(0)  # the task now awaits the pool's future
    skipped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await skipped
    blocker.opened.set()
    assert await first == "first"
    assert await pool.run(lambda: "after") == "after"  # FIFO: the skipped job's turn came before this one
    assert not ran.is_set()
    pool.close()


@pytest.mark.parametrize(("value", "what"), [("late", "result"), (ValueError("late"), "exception")])
async def test_a_job_cancelled_while_it_runs_is_abandoned_and_its_late_outcome_logged(
    value: Any, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    pool = WorkerPool(1)
    gate = Gate()

    def slow_tool(text: str) -> Any:
        gate()
        if isinstance(value, BaseException):
            raise value
        return value

    call = asyncio.ensure_future(pool.run(functools.partial(slow_tool, text="hi")))
    await asyncio.sleep(0)
    assert gate.started.wait(TIMEOUT)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    with caplog.at_level(logging.WARNING, logger="tooldeck.workers"):
        gate.opened.set()
        assert await pool.run(lambda: "next") == "next"  # handed back after the abandoned one
    records = [r for r in caplog.records if r.name == "tooldeck.workers"]
    assert len(records) == 1
    assert f"late {what}" in records[0].getMessage()
    assert "slow_tool" in records[0].getMessage()
    pool.close()


async def test_a_blocked_job_never_delays_the_loop() -> None:
    pool = WorkerPool(2)
    for _ in range(5):  # the pool may wait a few µs for a call it expects to be quick: never for one that blocks
        gate = Gate("done")
        called = time.perf_counter()
        future = asyncio.ensure_future(pool.run(gate))
        assert time.perf_counter() - called < 1.0  # it waits µs, if at all: far from the gate's TIMEOUT
        assert not future.done()  # run() came back while the job is still blocked
        assert gate.started.wait(TIMEOUT)
        ran = asyncio.Event()
        asyncio.get_running_loop().call_soon(ran.set)
        await asyncio.wait_for(ran.wait(), TIMEOUT)  # a callback scheduled meanwhile runs at once
        assert not future.done()
        gate.opened.set()
        assert await future == "done"
    pool.close()


@pytest.mark.parametrize("where", ["loop thread", "another thread"])
async def test_close_does_not_wait_for_a_stuck_thread_and_cancels_queued_jobs(where: str) -> None:
    pool = WorkerPool(1)
    stuck = Gate()
    running = pool.run(stuck)
    queued = asyncio.ensure_future(pool.run(lambda: "never"))
    assert stuck.started.wait(TIMEOUT)
    if where == "loop thread":
        pool.close()  # returns: were it to wait, the gate would never open
        assert queued.cancelled()
    else:
        closer = threading.Thread(target=pool.close)
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive()
    assert not stuck.finished.is_set()  # close() came back while the job was still running
    with pytest.raises(asyncio.CancelledError):
        await queued
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(lambda: None)
    stuck.opened.set()
    assert await running is None  # a job already running still finishes and is handed back


def test_max_threads_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkerPool(0)


def test_a_process_whose_other_thread_is_a_stuck_worker_exits_at_the_end_of_main() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        from tooldeck.server.workers import WorkerPool

        async def main():
            started = threading.Event()
            def stuck():
                started.set()
                threading.Event().wait()  # forever
            pool = WorkerPool(4)
            pool.run(stuck)
            assert started.wait(10)
            assert threading.active_count() == 2
            print("main done", flush=True)

        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main done\n"
