"""Where audit records go: the ``AuditSink`` seam, its memory sink, and ``BatchedSink``, the base of the stderr and
file sinks (``audit_file``), which writes a record before the call it describes is answered, and fails closed.

Write before answer. ``write`` makes, stamps and encodes the record (a dict, or a function that makes it) and
hands it to the operating system with one ``os.write`` at once, on the loop (a write to the page cache takes a
microsecond or two; a thread hop, or the loop turn a call would wait for a shared write, costs more), before the
call's answer leaves: a process killed at any moment leaves no answered call without its record. The file sink's
``fsync`` setting decides what a power loss can take: "never" and "interval" (an fsync off the loop every few
seconds) leave it to the page cache; with "each" the record is also on disk before its call is answered.

Records are written one loop turn at a time (a group commit) with "each", and whenever the caller says other
requests wait or run (``together``: the server is ``busy``): ``write`` queues the record and returns the ``Batch`` of
this loop turn, whose one callback writes every record queued meanwhile with one ``os.write`` (and, with "each", has
them share one fsync off the loop). A call alone is written at once and goes on; calls of a busy server go on
together in the next turn, which over HTTP with 32 clients costs a call about 20-38 µs less server CPU than writing
each at once (``benchmarks/security.py``, ``benchmarks/fleet.py``). The pipeline awaits what ``write`` returns.

Fail closed. A batch that cannot be written (a full disk, a file size limit, an I/O error) is taken back out of the
trail — the file is cut back to its last complete record, and the chain's head stays at the last record written —
and kept; awaiting it raises ``AuditUnavailableError``, so the calls it recorded are answered with that refusal
instead of their results. From then on ``problem`` says why, and the call pipeline refuses every call before it
runs (``admit``, its admission step). Every later batch and every ``admit`` tries again; once a write succeeds, the
kept records are written, then one ``audit-unavailable`` record saying since when, why, how many records were
late and how many refusals (``write(..., refusal=True)``) went unrecorded meanwhile, and calls run again.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, TextIO

import orjson

from .audit_chain import AUDIT_UNAVAILABLE, AuditError, AuditUnavailableError, Chain, format_time, line_hash

log = logging.getLogger("tooldeck.audit")

FSYNC_MODES = ("never", "each", "interval")

Record = dict[str, Any] | bytes | Callable[[], dict[str, Any] | bytes]  # bytes: see Chain.encode


class AuditSink(Protocol):
    problem: str | None  # why records cannot be written now; None while they can

    def write(self, record: Record, *, refusal: bool = False) -> Awaitable[None] | None:
        """Add ``record`` (or what a function returns, called later) to the trail. Returns None once it is
        written, or an awaitable that is done once it is (raising ``AuditUnavailableError`` if it could not be).
        ``refusal``: the record of a call or request that was refused (it ran nothing): while the trail is
        unavailable it is counted, not kept. Raises ``AuditError`` after ``close``. A sink may also take
        ``together=True``, said when other requests wait or run: the record may then wait for the others of the
        loop turn (``BatchedSink``); the call auditor passes it only to a sink whose ``write`` names it."""

    def admit(self) -> str | None:
        """Whether a call may run: None when records can be written (after trying once more to write what is
        waiting, if they could not); else why not."""

    def flush(self) -> None:
        """Return once every record written before is in the trail (on disk, for a file sink that fsyncs); raises
        ``AuditError`` if some could not be written."""

    def close(self) -> None:
        """Flush and release the sink; closing twice is harmless."""


class MemoryAuditSink:
    """The trail in two lists, for tests: ``lines`` as they would be written (without newlines) and ``records``,
    the same parsed back (so with their ``seq`` and ``prev``). Always available."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.records: list[dict[str, Any]] = []
        self.closed = False
        self._chain = Chain()

    def write(self, record: Record, *, refusal: bool = False) -> None:
        if self.closed:
            raise AuditError("the audit sink is closed")
        line = self._chain.encode(record() if callable(record) else record)
        self.lines.append(line)
        self.records.append(orjson.loads(line))

    problem = None

    def admit(self) -> None:
        return None

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    @property
    def head(self) -> tuple[int, str]:
        return self._chain.head


class Batch:
    """The records of one loop turn, awaited by every call among them: done once they are written (and, with fsync
    "each", on disk); raises ``AuditUnavailableError`` in each call awaiting it if they could not be.

    Awaiting it yields once, bare: the call resumes on the next loop turn, behind the callback that writes the batch
    (scheduled when its first record came), so the common case needs no future at all. Only a call that finds its
    batch still pending then (an fsync running off the loop) waits on a future, one per batch, which a cancelled
    call cannot cancel for the others."""

    __slots__ = ("loop", "done", "problem", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.done = False
        self.problem: str | None = None
        self._future: asyncio.Future[None] | None = None

    def __await__(self) -> Generator[Any, None, None]:
        if not self.done:
            yield  # one loop turn: the batch is written before this call resumes
            while not self.done:
                if self._future is None:
                    self._future = _Uncancellable(loop=self.loop)
                yield from self._future.__await__()
        if self.problem is not None:
            raise AuditUnavailableError(self.problem)

    def settle(self, problem: str | None) -> None:
        """The batch is written (``problem`` None) or could not be (why not)."""
        self.done, self.problem = True, problem
        if self._future is not None and not self._future.done():
            self._future.set_result(None)


class _Uncancellable(asyncio.Future[None]):
    """A future every call of a batch awaits: cancelling one of them must not cancel the others' wait. The cancelled
    call still waits for the write, then sees its cancellation."""

    def cancel(self, msg: Any = None) -> bool:
        return False


class Outage:
    """Since when, and why, the trail cannot be written, and how many refusals went unrecorded meanwhile."""

    __slots__ = ("since", "problem", "refused")

    def __init__(self, problem: str) -> None:
        self.since = time.time()
        self.problem = problem
        self.refused = 0

    def record(self, late: int) -> dict[str, Any]:
        return {"time": format_time(time.time()), "event": AUDIT_UNAVAILABLE, "since": format_time(self.since),
                "reason": self.problem, "late": late, "refused": self.refused}  # fmt: skip


class BatchedSink:
    """A sink that writes the records of one loop turn together, before their calls are answered, and fails closed
    (see the module's docstring). Subclasses say how lines are written (``_emit``), made durable (``_sync``) and
    released (``_release``), and ``where`` they go. One lock guards the queue, the chain and the writing, so
    ``flush`` and ``close`` may come from any thread."""

    fsync = "never"
    where = "the audit trail"

    def __init__(self, chain: Chain) -> None:
        self._chain = chain
        self._head = chain.head  # the last record written
        self._lock = threading.Lock()
        self._records: list[Record] = []  # written, not yet encoded
        self._unwritten: list[bytes] = []  # encoded, not in the trail: a batch that could not be written
        self._batch: Batch | None = None
        self._closed = False
        self._outage: Outage | None = None
        self.problem: str | None = None  # why records cannot be written now (None: they can)
        atexit.register(self._close_at_exit)  # records queued when the interpreter exits are written first

    @property
    def head(self) -> tuple[int, str]:
        """The ``seq`` and hash of the last record written (not of records waiting to be written)."""
        return self._head

    def write(self, record: Record, *, refusal: bool = False, together: bool = False) -> Awaitable[None] | None:
        with self._lock:
            if self._closed:
                raise AuditError("the audit sink is closed")
            outage = self._outage
            if refusal and outage is not None:
                outage.refused += 1  # a refusal ran nothing: while the trail is down it is counted, not kept
                return None
            self._records.append(record)
            batch = self._batch
            if batch is not None:
                return batch
            loop = asyncio._get_running_loop()
            if loop is not None and (together or self.fsync == "each"):  # the records of a loop turn together
                batch = self._batch = Batch(loop)
                loop.call_soon(self._write_batch)
                return batch
            self._commit()  # at once: one write, and the call goes on without waiting for a loop turn
            problem = self.problem if self._unwritten else None
            if problem is None and self.fsync != "never":
                if loop is None:
                    self._after_write()
                else:
                    self._sync_later(loop)
        if problem is None:
            return None
        if loop is None:
            raise AuditUnavailableError(problem)
        failed = Batch(loop)  # awaited by the call, which is then answered with the refusal instead of its result
        failed.settle(problem)
        return failed

    def admit(self) -> str | None:
        if self.problem is None:
            return None
        with self._lock:
            if not self._closed:
                self._commit()
            return self.problem

    def flush(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._commit()
            if self.problem is None and self.fsync != "never":
                self._guarded_sync()
            problem = self.problem
        if problem is not None:
            raise AuditError(f"{self.where} could not be written: {problem}")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            atexit.unregister(self._close_at_exit)
            try:
                self._commit()
                if self.problem is None and self.fsync != "never":
                    self._guarded_sync()
                problem = self.problem if self._unwritten or self._outage else None
            finally:
                self._release()
        if problem is not None:
            raise AuditError(f"{self.where} could not be written ({len(self._unwritten)} records lost): {problem}")

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except AuditError as exc:
            log.error("%s", exc)

    # --- the batch of a loop turn -----------------------------------------------------------------------------------

    def _write_batch(self) -> None:
        with self._lock:
            batch, self._batch = self._batch, None
            if not self._closed:
                self._commit()
            problem = self.problem if self._unwritten else None
        if batch is None:
            return
        if problem is None and self.fsync == "each":  # its calls wait for the fsync too
            self._sync_batch(batch)
            return
        batch.settle(problem)
        if problem is None and self.fsync == "interval":
            self._sync_later(batch.loop)

    def _commit(self) -> None:
        """Encode what is queued and write every line not yet written — while the trail is down, first the lines
        kept since and the ``audit-unavailable`` record. A failure keeps the lines not written and sets ``problem``."""
        if self._outage is not None and not self._recover():
            self._encode_queued()  # kept, after the others, for the next try
            return
        self._encode_queued()
        lines = self._unwritten
        if lines:
            done, error = self._emit(lines)
            self._written(lines, done)
            if error is not None:
                self._fail(error)

    def _recover(self) -> bool:
        """Try the trail again: the lines kept since it failed, then the record of the outage. True once both are
        written."""
        outage, lines, chain = self._outage, self._unwritten, self._chain
        assert outage is not None
        late, mark = len(lines), chain.mark()
        lines.append(chain.encode(outage.record(late)))
        done, error = self._emit(lines)
        self._written(lines, done)
        if error is not None:
            if lines:  # the outage's record was not written: it is made again, with the counts of then
                lines.pop()
                chain.back_to(mark)
            self._fail(error)
            return False
        log.warning("%s can be written again: %d records were written late, %d refusals went unrecorded",
                    self.where, late, outage.refused)  # fmt: skip
        self._outage = self.problem = None
        return True

    def _encode_queued(self) -> None:
        records, self._records = self._records, []
        lines, encode = self._unwritten, self._chain.encode
        for record in records:
            try:
                lines.append(encode(record() if callable(record) else record))
            except Exception as exc:  # a record that cannot be made is logged, and the others written
                log.error("audit trail: a record could not be made: %r", exc)

    def _written(self, lines: list[bytes], done: int) -> None:
        """The first ``done`` of ``lines`` are in the trail now."""
        if done == len(lines):  # all of them (the usual case): the chain knows the last one's hash
            self._head = self._chain.head
            lines.clear()
        elif done:
            self._head = (self._head[0] + done, line_hash(lines[done - 1]))
            del lines[:done]

    def _fail(self, error: BaseException) -> None:
        problem = getattr(error, "strerror", None) or str(error) or type(error).__name__
        if self._outage is None:
            self._outage = Outage(problem)
            log.error("%s cannot be written (%s): every call is refused until it can", self.where, problem)
        self.problem = problem

    # --- durability -------------------------------------------------------------------------------------------------

    def _sync_batch(self, batch: Batch) -> None:
        """Settle ``batch`` once an fsync that began after its write has ended (off the loop; batches written while
        one runs share the next)."""
        batch.settle(None)

    def _sync_later(self, loop: asyncio.AbstractEventLoop) -> None:
        """An "interval" sink: schedule the fsync that falls due."""

    def _after_write(self) -> None:
        """After a write without an event loop: fsync now if the mode says it is due."""

    def _guarded_sync(self) -> None:
        try:
            self._sync()
        except OSError as exc:
            self._fail(exc)

    # --- what subclasses say ----------------------------------------------------------------------------------------

    def _emit(self, lines: list[bytes]) -> tuple[int, BaseException | None]:
        """Write ``lines`` (each without its newline); how many are now in the trail, and the error that stopped the
        rest (None: all written). Lines not counted must leave nothing behind."""
        raise NotImplementedError

    def _sync(self) -> None:
        """Make what was written durable."""

    def _release(self) -> None:
        """Let go of what the sink holds (lock held, everything written that could be)."""


class StderrAuditSink(BatchedSink):
    """JSONL on stderr (or ``stream``), for a log collector to pick up. Each process starts a new chain at seq 0."""

    where = "the audit trail on stderr"

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        super().__init__(Chain())

    def _emit(self, lines: list[bytes]) -> tuple[int, BaseException | None]:
        try:
            self._stream.write(b"\n".join(lines).decode() + "\n")
            self._stream.flush()
        except (OSError, ValueError) as exc:  # a closed pipe, a closed stream
            return 0, exc
        return len(lines), None
