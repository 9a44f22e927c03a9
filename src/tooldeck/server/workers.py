"""The worker pool for sync tools: daemon threads that run plain functions and hand their results to the event loop.

Why it is shaped this way (numbers: ``benchmarks/workers_micro.py``): handing a call to a thread and back costs
context switches and GIL hand-offs, not Python code, so the pool saves switches. Workers are SCHED_BATCH threads, so
waking one never preempts the loop's thread mid-turn (that alone took a call from 6 switches to 2-3). When a call is
the only one in flight, the loop's thread wakes a worker and yields the CPU to it (``sched_yield`` releases the GIL),
and takes the result when it gets the CPU back: one switch each way, and no trip through the loop's selector. A
function that keeps the loop waiting beyond a few µs is marked slow and is no longer waited for; calls that arrive
together are not waited for either: a worker that finds more jobs queued keeps going instead of sleeping, and results
that finish close together reach the loop in one wake-up. Threads are daemons, so a stuck sync tool never keeps the
process alive.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("tooldeck.workers")

YIELDS = 2  # times the loop's thread yields the CPU to a woken worker before it waits on a lock instead
WAIT_S = 50e-6  # the longest the loop's thread then waits for that worker (it is on another CPU, or busy)
SLOW_AFTER = 3  # waits in a row that ran out before a function is no longer waited for
_yield_cpu: Callable[[], Any] = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))  # both release the GIL


class _Job:
    __slots__ = ("fn", "context", "future", "loop", "waited", "finished", "ok", "value", "handoff")

    def __init__(self, fn: Callable[[], Any], context: contextvars.Context | None, future: Any, loop: Any) -> None:
        self.fn = fn
        self.context = context
        self.future = future
        self.loop = loop
        self.waited = False  # the loop's thread is waiting for it: the worker leaves the result here
        self.finished = False
        self.ok: bool | None = None  # None: not run (skipped)
        self.value: Any = None
        self.handoff: threading.Lock | None = None  # released when it finishes, if the loop's thread sleeps on it


class WorkerPool:
    """Runs sync functions on at most ``max_threads`` daemon threads, started as they are needed, jobs in FIFO order.

    ``run(fn)`` is called on the event loop's thread. Cancelling its awaitable before the job starts skips the job;
    cancelling it while the job runs abandons the job (its late result is dropped and logged).
    """

    def __init__(self, max_threads: int) -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self._lock = threading.Lock()  # guards everything below
        self._jobs: deque[_Job] = deque()
        self._sleepers: list[threading.Lock] = []  # idle workers, each blocked on its own (held) lock
        self._spare = 0  # workers awake without a job: each will look at the queue before it sleeps
        self._threads = 0
        self._closed = False
        self._in_flight = 0  # jobs queued or running whose result is not yet handed back
        self._done: dict[asyncio.AbstractEventLoop, list[_Job]] = {}  # results on their way to their loop
        self._slow: dict[Any, int] = {}  # function (code) -> waits in a row that ran out
        self._turns: set[asyncio.AbstractEventLoop] = set()  # loops that waited for a job in their current turn

    def run(self, fn: Callable[[], T], *, may_wait: bool = True) -> Awaitable[T]:
        """Queue ``fn`` to run in a worker thread with a copy of the caller's context variables; await its result.

        ``may_wait=False`` for a function that hands things to the loop while it runs (a tool's Context sends
        progress with ``call_soon_threadsafe``): its result must then come through the loop too, after them, so the
        loop's thread never takes it directly.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        job = _Job(fn, context if len(context) else None, future, loop)  # an empty context need not be entered
        wake = key = None
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            self._jobs.append(job)
            if not self._spare:  # nobody awake will take it
                wake = self._summon()
            # Wait for it only if it is alone (so the worker woken, or started for the pool's first call, takes it at
            # once), no wait happened this turn (the other calls of a burst are better handed back together than each
            # waited for), and it is not slow.
            if may_wait and wake is not None and not self._in_flight and loop not in self._turns:
                key = _unwrap(fn)
                key = getattr(key, "__code__", key)  # closures made per call share their code
                job.waited = self._slow.get(key, 0) < SLOW_AFTER
            self._in_flight += 1
        if wake is not None:
            wake()
        if job.waited:
            self._turns.add(loop)
            loop.call_soon(self._turns.discard, loop)
            self._wait(job, key)
        return future

    def _summon(self) -> Callable[[], None] | None:
        """Under the lock, for a job no worker awake will take: count one more awake, a sleeper or (under the cap) a
        new thread, and return what wakes or starts it, to call once the lock is released; None at the cap."""
        if self._sleepers:
            wake: Callable[[], None] = self._sleepers.pop().release
        elif self._threads < self.max_threads:
            self._threads += 1
            wake = self._start
        else:
            return None
        self._spare += 1
        return wake

    def _wait(self, job: _Job, key: Any) -> None:
        for _ in range(YIELDS):
            _yield_cpu()  # releases the GIL and the CPU: the worker just woken runs the job now
            if job.finished:  # set under the lock by a worker that saw job.waited: the result is ours to set
                break
        else:
            with self._lock:
                if not job.finished:  # the worker is on another CPU, or has yet to run: wait on a lock, briefly
                    job.handoff = threading.Lock()
                    job.handoff.acquire()
            if job.handoff is not None:
                job.handoff.acquire(timeout=WAIT_S)
            with self._lock:
                if not job.finished:
                    job.waited = False  # the worker will hand it back through the loop
                    if len(self._slow) >= 256:
                        self._slow.clear()  # bounded, whatever callables come and go
                    self._slow[key] = self._slow.get(key, 0) + 1
                    return
        self._slow.pop(key, None)
        _settle(job)

    def close(self) -> None:
        """Take no new work and cancel the jobs not yet started; busy threads end after their job, unwaited."""
        with self._lock:
            self._closed = True
            queued = list(self._jobs)
            self._jobs.clear()
            self._in_flight -= len(queued)
            sleepers, self._sleepers = self._sleepers, []
            self._spare += len(sleepers)
        for lock in sleepers:
            lock.release()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for job in queued:
            if job.loop is running:
                job.future.cancel()
            else:
                _call_on(job.loop, job.future.cancel)

    def _start(self) -> None:
        wake = threading.Lock()
        wake.acquire()
        name = f"tooldeck-worker-{self._threads}"
        threading.Thread(target=self._work, args=(wake,), name=name, daemon=True).start()

    def _work(self, wake: threading.Lock) -> None:
        _prefer_batch()
        lock, jobs = self._lock, self._jobs
        job: _Job | None = None
        while True:
            hand_back = wake_next = None
            leave = False
            with lock:
                if job is None:
                    self._spare -= 1  # woken or just started, counted as spare by whoever did it
                else:  # the job just run (or skipped)
                    job.finished = True
                    if job.waited or job.ok is None:
                        self._in_flight -= 1  # the loop's thread takes the result, or there is none
                        if job.handoff is not None:
                            job.handoff.release()
                    elif (batch := self._done.get(job.loop)) is not None:
                        batch.append(job)  # a hand-back to that loop is already on its way
                    else:
                        self._done[job.loop] = [job]
                        hand_back = job.loop
                if jobs:
                    job = jobs.popleft()
                    if jobs and not self._spare:  # more are queued and this job may block: get them a worker too
                        wake_next = self._summon()
                else:
                    job = None
                    if self._closed:
                        self._threads -= 1
                        leave = True
                    else:
                        self._sleepers.append(wake)
            if hand_back is not None:
                _call_on(hand_back, self._deliver, hand_back)
            if wake_next is not None:
                wake_next()
            if job is None:
                if leave:
                    return
                wake.acquire()  # released by run() or close()
                continue
            if job.future.cancelled():  # cancelled before it started: skipped
                continue
            try:
                job.value = job.fn() if job.context is None else job.context.run(job.fn)
                job.ok = True
            except BaseException as exc:  # handed to the awaiting caller, whatever it is
                job.value = exc
                job.ok = False

    def _deliver(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._done.pop(loop, ())
            self._in_flight -= len(batch)
        for job in batch:
            _settle(job)


def _settle(job: _Job) -> None:
    """Give a finished job's outcome to its future, on the loop's thread; a cancelled caller's is dropped, logged."""
    future = job.future
    if future.cancelled():
        what = "result" if job.ok else "exception"
        log.warning("dropped the late %s of %s: its call was cancelled while it ran", what, _name(job.fn))
    elif job.ok:
        future.set_result(job.value)
    else:
        future.set_exception(job.value)


def _prefer_batch() -> None:
    """Make this thread SCHED_BATCH (same CPU share, no preemption on wake-up) where the platform allows it."""
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _call_on(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # that loop is closed: nobody is waiting any more
        pass


def _unwrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    return getattr(fn, "func", fn)  # a functools.partial: the function it calls


def _name(fn: Callable[..., Any]) -> str:
    fn = _unwrap(fn)
    return getattr(fn, "__qualname__", None) or repr(fn)
