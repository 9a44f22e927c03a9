"""Where audit records go: the ``AuditSink`` seam, and its memory, stderr and JSONL-file implementations.

Every sink stamps records into the hash chain (``audit_chain``). ``write`` never blocks on I/O. The stderr and file
sinks work in three steps:

1. ``write`` queues the record (a dict, or a function that makes it). On an event loop nothing more happens then:
   the call that wrote it is answered first.
2. ``ENCODE_DELAY`` seconds later, one loop callback makes, stamps and encodes every record queued meanwhile. Done
   in one go, a hundred records cost a fraction of a hundred separate encodings, whose code and data are cold by
   the time each call ends. Without a running loop, ``write`` encodes at once.
3. A daemon writer thread wakes every ``WAKE`` seconds (or when ``_BATCH`` lines wait), swaps the queue of lines out
   and writes it with one call. It runs almost no Python, so it never competes with the loop for the interpreter
   (records built on the writer thread cost several times their own CPU in GIL hand-offs).

``flush`` and ``close`` encode what is queued and wait until it is written.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

import orjson

from .audit_chain import CHAIN_BREAK, AuditError, Chain, format_time, read_tail

log = logging.getLogger("tooldeck.audit")

FSYNC_MODES = ("never", "each", "interval")
_BATCH = 1024  # queued lines that wake the writer before its round is due
ENCODE_DELAY = 0.01  # seconds a record waits on an event loop to be encoded with the others that come meanwhile
WAKE = 0.05  # seconds between the writer's rounds: a record reaches the file at most this late (flush: at once)

Record = dict[str, Any] | bytes | Callable[[], dict[str, Any] | bytes]  # bytes: see Chain.encode


class AuditSink(Protocol):
    def write(self, record: Record) -> None:
        """Add ``record`` (or what a function returns, called later) to the trail; returns without waiting for I/O.
        Raises ``AuditError`` after ``close``."""

    def flush(self) -> None:
        """Return once every record written before is in the trail (on disk, for a file sink that fsyncs)."""

    def close(self) -> None:
        """Flush and release the sink; closing twice is harmless."""


class MemoryAuditSink:
    """The trail in two lists, for tests: ``lines`` as they would be written (without newlines) and ``records``,
    the same parsed back (so with their ``seq`` and ``prev``)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.records: list[dict[str, Any]] = []
        self.closed = False
        self._chain = Chain()

    def write(self, record: Record) -> None:
        if self.closed:
            raise AuditError("the audit sink is closed")
        line = self._chain.encode(record() if callable(record) else record)
        self.lines.append(line)
        self.records.append(orjson.loads(line))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    @property
    def head(self) -> tuple[int, str]:
        return self._chain.head


class ThreadedSink:
    """A sink whose lines are written by one daemon thread; subclasses say how lines are written (``_emit``), made
    durable (``_sync``) and finished (``_finish``). The thread is joined at interpreter exit.

    One lock guards the queues and the chain: ``_encode`` stamps queued records into the chain in the order they were
    written, and each round the writer swaps the queue of lines (and the flushes waiting on it) out and writes it
    with one call."""

    def __init__(self, chain: Chain, name: str) -> None:
        self._chain = chain
        self._lock = threading.Lock()  # guards the chain, the queue, the waiting flushes and the closing flag
        self._records: list[Record] = []  # written, not yet encoded
        self._pending: list[bytes] = []  # encoded, not yet written
        self._waiting: list[threading.Event] = []
        self._closing = False
        self._wake = threading.Event()
        self._closed = False
        self.error: BaseException | None = None  # the last write failure: flush and close raise it
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()
        atexit.register(self.close)  # a daemon thread dies with the interpreter: drain the queue first

    def write(self, record: Record) -> None:
        if self._closed:
            raise AuditError("the audit sink is closed")
        with self._lock:
            queued = self._records
            queued.append(record)
            if len(queued) > 1:
                return  # an encoding round is due already
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._encode()
        else:
            loop.call_later(ENCODE_DELAY, self._encode)

    def _encode(self) -> None:
        """Make, stamp and encode every record queued, in order, and queue their lines for the writer."""
        with self._lock:
            records, self._records = self._records, []
            pending, encode = self._pending, self._chain.encode
            for record in records:
                try:
                    pending.append(encode(record() if callable(record) else record))
                except Exception as exc:  # a record that cannot be made is logged, and the others written
                    log.error("audit trail: a record could not be made: %r", exc)
            if len(pending) < _BATCH:
                return
        self._wake.set()

    def flush(self) -> None:
        if self._closed:
            return
        self._encode()
        done = threading.Event()
        with self._lock:
            self._waiting.append(done)
        self._wake.set()
        while not done.wait(1.0):
            if not self._thread.is_alive():
                raise AuditError("the audit writer thread has stopped; records written since are lost")
        self._raise_error()

    def close(self) -> None:
        self._encode()
        with self._lock:
            if self._closed:
                return
            self._closed = self._closing = True
        atexit.unregister(self.close)
        self._wake.set()
        self._thread.join()
        self._raise_error()

    @property
    def head(self) -> tuple[int, str]:
        """The ``seq`` and hash of the last record encoded (of every record written, after ``flush``)."""
        with self._lock:
            return self._chain.head

    def _raise_error(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise AuditError(f"the audit trail could not be written: {error}") from error

    # --- the writer thread ----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self._wake.wait(WAKE)
            self._wake.clear()
            with self._lock:  # everything queued before a flush is taken in the same round as that flush
                lines, self._pending = self._pending, []
                waiting, self._waiting = self._waiting, []
                closing = self._closing
            if lines:
                self._guard(self._emit, lines)
            if closing:
                self._guard(self._finish)
            elif lines or waiting:
                self._guard(self._sync, bool(waiting))
            else:
                due = self._idle_timeout()  # an "interval" file sink's fsync falls due while no record comes
                if due is not None and due <= 0:
                    self._guard(self._sync, True)
            for done in waiting:
                done.set()
            if closing:
                return

    def _guard(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except Exception as exc:  # a full disk must not kill the writer: later records may still get through
            log.error("audit trail: %s", exc)
            self.error = exc

    def _idle_timeout(self) -> float | None:
        """Seconds until an fsync falls due with nothing to write (None: none is)."""
        return None

    def _emit(self, lines: list[bytes]) -> None:
        raise NotImplementedError

    def _sync(self, flushing: bool) -> None:
        """After each batch (``flushing``: a ``flush()`` is waiting) and when ``_idle_timeout`` runs out."""

    def _finish(self) -> None:
        self._sync(True)


class StderrAuditSink(ThreadedSink):
    """JSONL on stderr (or ``stream``), for a log collector to pick up. Each process starts a new chain at seq 0."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        super().__init__(Chain(), "tooldeck-audit stderr")

    def _emit(self, lines: list[bytes]) -> None:
        lines.append(b"")  # the last line's newline
        self._stream.write(b"\n".join(lines).decode())
        self._stream.flush()


class FileAuditSink(ThreadedSink):
    """The trail as a JSONL file, continued across restarts and rotated by size.

    ``max_bytes``: rotate before a record would take the file past this size, like logging's
    ``RotatingFileHandler``: ``audit.jsonl`` becomes ``audit.jsonl.1``, ``.1`` becomes ``.2``, ... and the oldest past
    ``backups`` is deleted. The chain runs on across files, so ``verify`` takes the whole set in any order.
    ``fsync``: "never" (the OS writes when it likes: a crash of the machine, not of the process, can lose the last
    records), "each" (every batch the writer takes is on disk before it takes the next), "interval" (at most
    ``fsync_interval`` seconds after a record is written). ``flush()`` fsyncs unless the mode is "never".

    Opening continues the chain from the file's last record (or from ``.1``'s, if the file is empty). A last line
    without its newline is a record an interrupted write cut short: it is kept, ended with a newline, and followed by
    a ``{"event": "chain-break", ...}`` record naming its line, length and SHA-256, chained to the last intact record.
    The trail stays writable after a crash, and ``verify`` reports the break (an error unless breaks are allowed),
    so the lost record is never hidden. A file whose last complete line is not a record is refused (``AuditError``).
    """

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
        self.max_bytes = max_bytes
        self.backups = backups
        self.fsync = fsync
        self.fsync_interval = fsync_interval
        self._dirty = False
        self._synced_at = time.monotonic()
        chain, chain_break = self._continue()
        self._file = open(self.path, "ab")  # noqa: SIM115 - the writer thread owns it until close
        self._size = self._file.tell()
        if chain_break is not None:  # written here, into this file, next to the line it names
            self._file.write(b"\n" + chain.encode(chain_break) + b"\n")
            self._size = self._file.tell()
            self._sync(True)
        super().__init__(chain, f"tooldeck-audit {self.path}")

    def _continue(self) -> tuple[Chain, dict[str, Any] | None]:
        try:
            tail = read_tail(self.path)
            chain = tail.chain
            if chain is None and os.path.exists(f"{self.path}.1"):
                chain = read_tail(f"{self.path}.1").chain
        except FileNotFoundError:
            return Chain(), None
        except OSError as exc:
            raise AuditError(f"{self.path}: cannot open the audit trail: {exc.strerror or exc}") from None
        if tail.partial is None:
            return chain or Chain(), None
        log.warning(
            "audit trail %s: line %d is a record cut short (%d bytes): writing a chain-break record after it",
            self.path,
            tail.partial_line,
            len(tail.partial),
        )
        chain_break = {
            "time": format_time(time.time()),
            "event": CHAIN_BREAK,
            "reason": "truncated last line",
            "line": tail.partial_line,
            "lost_bytes": len(tail.partial),
            "lost_sha256": hashlib.sha256(tail.partial).hexdigest(),
        }
        return chain or Chain(), chain_break

    def _emit(self, lines: list[bytes]) -> None:
        lines.append(b"")  # the last line's newline
        data = b"\n".join(lines)
        del lines[-1]
        if self.max_bytes is None or self._size + len(data) <= self.max_bytes:
            self._file.write(data)  # the whole round in one call (and one system call)
            self._size += len(data)
        else:
            for line in lines:  # a rotation falls within this round: line by line
                size = len(line) + 1
                if self._size and self._size + size > self.max_bytes:
                    self._rotate()
                self._file.write(line + b"\n")
                self._size += size
        self._dirty = True

    def _rotate(self) -> None:
        self._sync(True)
        self._file.close()
        for index in range(self.backups - 1, 0, -1):
            if os.path.exists(f"{self.path}.{index}"):
                os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
        os.replace(self.path, f"{self.path}.1")
        self._file = open(self.path, "ab")  # noqa: SIM115
        self._size = 0

    def _sync(self, flushing: bool) -> None:
        self._file.flush()  # to the OS after every batch: a crash of the process loses nothing already taken
        if self.fsync == "never" or not (self._dirty or flushing):
            return
        now = time.monotonic()
        if self.fsync == "each" or flushing or now - self._synced_at >= self.fsync_interval:
            os.fsync(self._file.fileno())
            self._dirty, self._synced_at = False, now

    def _idle_timeout(self) -> float | None:
        if self.fsync != "interval" or not self._dirty:
            return None
        return max(0.0, self._synced_at + self.fsync_interval - time.monotonic())

    def _finish(self) -> None:
        try:
            self._sync(True)
        finally:
            self._file.close()
