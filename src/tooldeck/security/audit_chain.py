"""The audit trail's hash chain: how a record is stamped with ``seq`` and ``prev`` and encoded as one JSONL line, and
how the end of an existing trail is found so a new writer continues it.

Each line is ``{"seq": n, "prev": h, ...record}`` where ``h`` is the SHA-256 hex of the previous line's exact bytes
(without its newline) and the very first line's ``prev`` is ``GENESIS``. ``seq`` never restarts, across rotated
files and across writers; so a record that is edited, removed or moved breaks a link that ``verify`` can name.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from typing import Any

import orjson

from ..protocol.errors import TooldeckError, ToolError

GENESIS = "0" * 64
CHAIN_BREAK = "chain-break"  # what writers before the trail was truncated back wrote after a cut-short line
INTERRUPTED_WRITE = "interrupted-write"
AUDIT_UNAVAILABLE = "audit-unavailable"


class AuditError(TooldeckError):
    """An audit trail that cannot be opened, written or read."""


class AuditUnavailableError(ToolError):
    """A call refused because its audit record cannot be written: an isError result for tools/call, and for
    everything else a -32000 error that an HTTP transport answers with ``http_status`` 503."""

    http_status = 503

    def __init__(self, problem: str) -> None:
        super().__init__(f"the audit trail is unavailable ({problem}): the call was refused; try again later")


_second: tuple[int, bytes] = (-1, b"")  # the last whole second formatted, and its text (swapped whole: thread-safe)


def format_time(seconds: float) -> str:
    """A record's ``time``: RFC 3339 in UTC to the millisecond, e.g. ``2025-06-18T09:30:00.125Z``."""
    return format_time_bytes(seconds).decode()


def format_time_bytes(seconds: float) -> bytes:
    """``format_time`` as ASCII bytes."""
    global _second
    millis = int(seconds * 1000)
    whole = millis // 1000
    known = _second
    if known[0] != whole:  # records come many to a second: format the date once per second
        known = _second = (whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S").encode())
    return b"%s.%03dZ" % (known[1], millis - whole * 1000)


def line_hash(line: bytes) -> str:
    """What the next record's ``prev`` holds: the SHA-256 hex of a line as written, without its newline."""
    return hashlib.sha256(line).hexdigest()


class Chain:
    """The writer's end of the chain: the next ``seq`` and the hash of the last line written.

    Not thread-safe: one writer (a sink's writer thread, or the caller of a synchronous sink) owns it.
    """

    __slots__ = ("seq", "_prev")

    def __init__(self, seq: int = 0, prev: str = GENESIS) -> None:
        self.seq = seq  # the seq the next record gets
        self._prev = prev.encode()

    @property
    def prev(self) -> str:
        """What the next record's ``prev`` holds."""
        return self._prev.decode()

    def encode(self, record: dict[str, Any] | bytes) -> bytes:
        """``record`` stamped with the next ``seq`` and ``prev``, as one line without its newline; the chain moves on.

        ``record`` is a dict, or its members already encoded: JSON object members, each led by a comma, and the
        object's closing brace (``b',"time":"…",…}'``: what ``CallRecords.encode`` makes). A value JSON cannot hold is
        written as its ``repr`` rather than losing the record."""
        if type(record) is not bytes:
            body = orjson.dumps(record, default=repr, option=orjson.OPT_NON_STR_KEYS)
            record = b"," + body[1:] if len(body) > 2 else b"}"
        line = b'{"seq":%d,"prev":"%s"%s' % (self.seq, self._prev, record)
        self.seq += 1
        self._prev = hashlib.sha256(line).hexdigest().encode()
        return line

    @property
    def head(self) -> tuple[int, str]:
        """The last record's ``seq`` and hash (``(-1, GENESIS)`` before the first): worth copying somewhere else now
        and then, since an edit of the records after the last copied head cannot be proven by the chain alone."""
        return self.seq - 1, self.prev

    def mark(self) -> tuple[int, bytes]:
        """Where the chain is now, for ``back_to``."""
        return self.seq, self._prev

    def back_to(self, mark: tuple[int, bytes]) -> None:
        """Undo the records encoded since ``mark`` (they were never written)."""
        self.seq, self._prev = mark


class Tail:
    """The end of an existing trail file: the chain to continue, and the truncated line left by an interrupted write,
    if its last line has no newline (``partial`` is its bytes, ``partial_line`` its 1-based number); ``end`` is the
    offset just past the last complete line."""

    __slots__ = ("chain", "partial", "partial_line", "end")

    def __init__(self, chain: Chain | None, partial: bytes | None = None, partial_line: int = 0, end: int = 0) -> None:
        self.chain = chain  # None: the file holds no complete record
        self.partial = partial
        self.partial_line = partial_line
        self.end = end


def read_tail(path: str | os.PathLike[str]) -> Tail:
    """Where ``path`` ends. Raises ``AuditError`` when its last complete line is not an audit record (the file is
    something else, or was edited: ``tooldeck audit verify`` says where) and ``OSError`` when it cannot be read."""
    with open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        data = _read_back(file, size)
        head, newline, rest = data.rpartition(b"\n")
        last, partial, line_number = head if newline else b"", rest or None, 0
        if partial is not None:  # only now is the number of lines worth counting
            file.seek(0)
            line_number = sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b"")) + 1
    end = size - len(rest)
    if not last:
        return Tail(None, partial, line_number, end)
    try:
        record = orjson.loads(last)
    except orjson.JSONDecodeError:
        record = None
    seq = record.get("seq") if isinstance(record, dict) else None
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise AuditError(
            f"{os.fspath(path)}: the last complete line is not an audit record; run `tooldeck audit verify` on it, "
            "and move it aside to start a new trail"
        )
    return Tail(Chain(seq + 1, line_hash(last)), partial, line_number, end)


def _read_back(file: Any, size: int, block: int = 1 << 16) -> bytes:
    """The end of ``file``: its last complete line with its newline, then any partial line after it."""
    start, data = size, b""
    while start > 0 and data.count(b"\n") < 2:
        start = max(0, start - block)
        file.seek(start)
        data = file.read(size - start)
    end = data.rfind(b"\n")  # the newline that ends the last complete line
    return data if end < 0 else data[data.rfind(b"\n", 0, end) + 1 :]
