"""The audit trail as a JSONL file (``FileAuditSink``): one writer at a time, created 0600, continued across
restarts, rotated by size, cut back to its last complete record when a write fails, and fsynced as configured.

The batching, write-before-answer and fail-closed rules are ``BatchedSink``'s (``audit_sinks``); this module says
what they mean for a file:

- **One writer.** Two processes appending to one trail would interleave two chains. The writer holds an exclusive
  ``flock`` on ``.<file>.lock`` beside it (which holds its pid) for as long as it is open, so a second writer is refused at
  start with one line naming the holder. (A trail that is not a regular file — a FIFO, a device — is locked
  itself; it cannot be rotated.) New files are created with mode 0600.
- **No torn record.** A write that fails or comes up short is cut back (``ftruncate``) to the offset where it
  began, so the file always ends with a complete record. A trail whose last line lacks its newline (a
  process killed in the middle of a write, whose call was therefore never answered) is cut back the same way when
  it is reopened, and the cut is recorded: an ``interrupted-write`` record with the line, length and SHA-256 of
  the bytes removed, chained like any other.
- **Durability.** Every record (with fsync "each", every batch) is handed to the operating system before its call
  is answered, so a crash of the process loses nothing that was answered. ``fsync`` says what a crash of the
  machine may lose: "never" (whatever the OS had not written yet), "interval" (at most ``fsync_interval`` seconds
  of records, fsynced off the loop), "each" (nothing answered: each batch is fsynced off the loop, before its calls
  are answered, batches written meanwhile sharing the next fsync).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import functools
import hashlib
import os
import stat
import time
from typing import Any

from .audit_chain import INTERRUPTED_WRITE, AuditError, Chain, format_time, read_tail
from .audit_sinks import FSYNC_MODES, Batch, BatchedSink, log

_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


class FileAuditSink(BatchedSink):
    """The trail as a JSONL file (see the module's docstring).

    ``max_bytes``: rotate before a record would take the file past this size, like logging's
    ``RotatingFileHandler``: ``audit.jsonl`` becomes ``audit.jsonl.1``, ``.1`` becomes ``.2``, ... and the oldest past
    ``backups`` is deleted. The chain runs on across files, so ``verify`` takes the whole set in any order.
    ``fsync``: "never", "interval" or "each". ``flush()`` fsyncs unless the mode is "never". Opening continues the
    chain from the file's last record (or from ``.1``'s, if the file is empty). A file whose last complete line is
    not a record, or that another process is writing, is refused (``AuditError``).
    """

    _os_write = staticmethod(os.write)  # the one place bytes reach the file (tests put a failing write here)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int | None = None,
        backups: int = 5,
        fsync: str = "never",
        fsync_interval: float = 1.0,
    ) -> None:
        if fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {', '.join(map(repr, FSYNC_MODES))}, got {fsync!r}")
        if not fsync_interval > 0:
            raise ValueError(f"fsync_interval must be a positive number of seconds, got {fsync_interval!r}")
        if max_bytes is not None and max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive number of bytes (or None: never rotate), got {max_bytes}")
        if max_bytes is not None and backups < 1:
            raise ValueError("backups must be at least 1 when max_bytes is set: rotating with none deletes the trail")
        self.path = os.fspath(path)
        self.where = f"the audit trail {self.path}"
        self.regular = _is_regular(self.path)
        if max_bytes is not None and not self.regular:
            raise ValueError(f"max_bytes needs a regular file: {self.path} is not one, so it cannot be rotated")
        self.max_bytes = max_bytes
        self.backups = backups
        self.fsync = fsync
        self.fsync_interval = fsync_interval
        self._synced_at = time.monotonic()
        self._sync_waiting: list[Batch] = []  # "each": batches written, waiting for the next fsync
        self._sync_job: Any = None  # the fsync running off the loop
        self._sync_timer: asyncio.TimerHandle | None = None  # "interval": the fsync that falls due
        self._moved = False  # rotation moved the file aside, and the new one is not open yet
        self._cut_pending = False  # a failed write's bytes are still in the file: cut them before writing again
        self._lock_fd = _lock(self.path, self.regular)
        try:
            chain, interrupted = self._continue()
            self._fd = self._open()
            if interrupted is not None:  # a record cut short by a killed process: its call was never answered
                os.ftruncate(self._fd, interrupted.pop("end"))
            self._size = os.fstat(self._fd).st_size if self.regular else 0
        except OSError as exc:
            os.close(self._lock_fd)
            raise AuditError(f"{self.path}: cannot open the audit trail: {exc.strerror or exc}") from None
        except BaseException:
            os.close(self._lock_fd)
            raise
        super().__init__(chain)
        if interrupted is not None:
            with self._lock:
                self._records.append(interrupted)
                self._commit()
            if self.problem is not None:
                self.close()

    def _open(self) -> int:
        return os.open(self.path, _OPEN_FLAGS, 0o600)

    def _continue(self) -> tuple[Chain, dict[str, Any] | None]:
        """The chain to continue, and the ``interrupted-write`` record to add (with the offset to cut the file
        back to, as ``end``) when the last line was cut short."""
        if not self.regular:
            return Chain(), None
        try:
            tail = read_tail(self.path)
            chain = tail.chain
            if chain is None and os.path.exists(f"{self.path}.1"):
                chain = read_tail(f"{self.path}.1").chain
        except FileNotFoundError:
            return Chain(), None
        if tail.partial is None:
            return chain or Chain(), None
        log.warning("audit trail %s: line %d is a record cut short (%d bytes) by an interrupted write: removing it "
                    "and recording that", self.path, tail.partial_line, len(tail.partial))  # fmt: skip
        interrupted = {
            "time": format_time(time.time()),
            "event": INTERRUPTED_WRITE,
            "reason": "the last line was a record cut short by an interrupted write (its call was never answered)",
            "line": tail.partial_line,
            "lost_bytes": len(tail.partial),
            "lost_sha256": hashlib.sha256(tail.partial).hexdigest(),
            "end": tail.end,
        }
        return chain or Chain(), interrupted

    # --- writing ----------------------------------------------------------------------------------------------------

    def _emit(self, lines: list[bytes]) -> tuple[int, BaseException | None]:
        if self.max_bytes is None and not self._cut_pending:  # the usual case: the whole batch in one system call
            lines.append(b"")
            data = b"\n".join(lines)
            lines.pop()
            try:
                self._write_all(data)
            except OSError as exc:
                return 0, exc
            return len(lines), None
        done = 0
        try:
            if self._cut_pending:
                os.ftruncate(self._fd, self._size)
                self._cut_pending = False
            while done < len(lines):
                count = self._fitting(lines, done)
                if count == 0:
                    self._rotate()
                    continue
                self._write_all(b"\n".join(lines[done : done + count]) + b"\n")
                done += count
        except OSError as exc:
            return done, exc
        return done, None

    def _fitting(self, lines: list[bytes], start: int) -> int:
        """How many of ``lines`` from ``start`` on fit in the current file (0: rotate first)."""
        if self.max_bytes is None:
            return len(lines) - start
        room, count = self.max_bytes - self._size, 0
        for line in lines[start:]:
            room -= len(line) + 1
            if room < 0:
                break
            count += 1
        return 1 if count == 0 and self._size == 0 else count  # a record larger than max_bytes gets a file alone

    def _write_all(self, data: bytes) -> None:
        """Write ``data`` whole, or raise ``OSError`` having cut the file back to where it ended before."""
        start = self._size
        try:
            written = self._os_write(self._fd, data)
            while written < len(data):  # a short write: the rest, or the error that stopped it
                more = self._os_write(self._fd, memoryview(data)[written:])
                if more <= 0:
                    raise OSError(errno.EIO, "a write to the audit trail made no progress")
                written += more
        except OSError:
            if self.regular:
                try:
                    os.ftruncate(self._fd, start)
                except OSError:
                    self._cut_pending = True  # cut before anything else is written
            raise
        self._size = start + len(data)

    def _rotate(self) -> None:
        if not self._moved:
            if self.fsync != "never":
                os.fsync(self._fd)
            for index in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{self.path}.{index}"):
                    os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
            os.replace(self.path, f"{self.path}.1")
            self._moved = True
        fd = self._open()
        os.close(self._fd)
        self._fd, self._size, self._moved = fd, 0, False

    # --- durability -------------------------------------------------------------------------------------------------

    def _sync(self) -> None:
        if self.regular:
            os.fsync(self._fd)
        self._synced_at = time.monotonic()

    def _after_write(self) -> None:
        if self.fsync == "each" or (
            self.fsync == "interval" and time.monotonic() - self._synced_at >= self.fsync_interval
        ):
            self._guarded_sync()

    def _sync_batch(self, batch: Batch) -> None:
        self._sync_waiting.append(batch)
        if self._sync_job is None:
            self._start_sync(batch.loop)

    def _sync_later(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._sync_timer is None and self._sync_job is None:
            self._sync_timer = loop.call_later(self.fsync_interval, self._interval_due, loop)

    def _interval_due(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sync_timer = None
        if self._sync_job is None:
            self._start_sync(loop)

    def _start_sync(self, loop: asyncio.AbstractEventLoop) -> None:
        """fsync a copy of the file's descriptor off the loop (rotation or close may replace the original)."""
        waiting, self._sync_waiting = self._sync_waiting, []
        with self._lock:
            fd = -1 if self._closed else os.dup(self._fd)
        if fd < 0:  # closed meanwhile: close fsynced
            for batch in waiting:
                batch.settle(None)
            return
        self._sync_job = job = loop.run_in_executor(None, _fsync_and_close, fd)
        job.add_done_callback(functools.partial(self._synced, waiting, loop))

    def _synced(self, waiting: list[Batch], loop: asyncio.AbstractEventLoop, job: asyncio.Future[None]) -> None:
        self._sync_job = None
        error = job.exception()
        if error is None:
            self._synced_at = time.monotonic()
        else:
            with self._lock:
                self._fail(error)
        for batch in waiting:
            batch.settle(None if error is None else self.problem or "fsync failed")
        if self._sync_waiting:
            self._start_sync(loop)

    def _release(self) -> None:
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        os.close(self._fd)
        os.close(self._lock_fd)  # and with it the lock


def _fsync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True  # it will be one
    except OSError as exc:
        raise AuditError(f"{path}: cannot open the audit trail: {exc.strerror or exc}") from None


def _lock(path: str, regular: bool) -> int:
    """An exclusive lock on the trail for this process (its pid written in the lock file); ``AuditError`` naming the
    holder when another process has it."""
    folder, name = os.path.split(path)
    lock_path = os.path.join(folder, f".{name}.lock") if regular else path  # hidden: `audit.jsonl*` leaves it out
    try:
        fd = os.open(lock_path, (os.O_RDWR | os.O_CREAT if regular else os.O_RDONLY | os.O_NONBLOCK) | os.O_CLOEXEC,
                     0o600)  # fmt: skip
    except OSError as exc:
        raise AuditError(f"{lock_path}: cannot open the audit trail's lock file: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd) if regular else ""
        os.close(fd)
        raise AuditError(
            f"{path}: the audit trail is in use by another process{holder}; two writers would interleave two chains: "
            "give each server its own [audit] file"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise AuditError(f"{lock_path}: cannot lock the audit trail: {exc.strerror or exc}") from None
    if regular:
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
    return fd


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).strip()
    except OSError:
        return ""
    return f" (pid {pid.decode()})" if pid.isdigit() else ""
