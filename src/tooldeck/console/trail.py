"""The console's view of the audit trail (``Trail``): the records of the last hour, read a little at a time from the
policy's audit file, its rotations and the trail of every other process that writes beside it (``audit.<node>.jsonl``),
and what the console shows of them: lists, one record, an hour's numbers, and each chain's verdict.

Reading follows files, not names. Each file is known by its device and inode, with the offset read up to: when the
writer rotates (``audit.jsonl`` renamed ``audit.jsonl.1``, a new ``audit.jsonl`` begun), what it wrote before the
move is read from the renamed file and nothing is read twice. A file that shrank, or whose last line read is no
longer there (cut back and written again, or another file on a reused inode), is read again from the start; a record
read again is held once, and one that now reads otherwise replaces the one held. A last line without its newline is
a record still being written: it waits for the next ``refresh``. A file last modified before the hour began cannot
hold a record of the hour, so only its last line is read (for the chain's head). A line that is not an audit record
is skipped and counted, never raised.
"""

from __future__ import annotations

import bisect
import math
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from ..security.audit_chain import AuditError, format_time, line_hash
from ..security.audit_verify import VerifyReport, trails, verify

Moment = datetime | str | float  # a datetime (naive: UTC), an ISO 8601 string, or seconds since the epoch
Entry = tuple[float, str, int, dict[str, Any]]  # (time in seconds, trail, seq, record): sorted, the oldest first

_CHUNK = 1 << 22  # bytes read at a time
_ERRORS = ("error", "timeout")  # the outcomes that are a tool's failure (a refusal, a cancellation or a task are not)
_NO_REASON = "(no reason given)"


def _when(entry: Entry) -> float:
    return entry[0]


class _File:
    """How far one file, known by device and inode, has been read, and the last line read: where it starts, its
    length and hash (still there, the file holds what was read; gone, it was cut back or is another file)."""

    __slots__ = ("offset", "mtime", "line_at", "line_length", "line_hash")

    def __init__(self) -> None:
        self.offset = 0  # just past the last complete line read
        self.mtime = -1  # st_mtime_ns when it was last read
        self.line_at = self.line_length = 0
        self.line_hash = ""

    def read_up_to(self, offset: int, line: bytes) -> None:
        """Note that the file was read up to ``offset``, where ``line`` (and its newline) ends."""
        self.offset = offset
        self.line_at, self.line_length, self.line_hash = offset - len(line) - 1, len(line), line_hash(line)

    def holds_what_was_read(self, fd: int, size: int) -> bool:
        if size < self.offset:
            return False
        return self.offset == 0 or line_hash(os.pread(fd, self.line_length, self.line_at)) == self.line_hash


class _Chain:
    """What is known of one trail: its newest record's seq and hash, and the time of its newest record."""

    __slots__ = ("seq", "head", "last")

    def __init__(self) -> None:
        self.seq = -1
        self.head: str | None = None
        self.last: float | None = None


class Trail:
    """The records of the last ``keep_for`` seconds (and at most ``keep`` of them, the newest) of the audit trail
    at ``path`` (the policy's ``[audit] file``), its rotations, and the per-node trails beside it (see the module's
    docstring). ``refresh`` reads what was appended since the last one; the rest reads what is held. Each record
    held is the dict written, with one member added: ``trail``, the name of the trail it was read from (its file's
    name: ``audit.jsonl``, ``audit.<node>.jsonl``). Records returned are the ones held: do not change them.

    ``skipped`` counts the lines that were not audit records; ``problems`` maps a file that could not be read at
    the last ``refresh`` to why. ``clock`` gives the time (seconds since the epoch): the hour held ends at its
    ``now``. Not thread-safe, but for ``verify_now``: call ``refresh`` and the queries from one thread."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep: int = 100_000,
        keep_for: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be a positive number of records, got {keep}")
        if not keep_for > 0:
            raise ValueError(f"keep_for must be a positive number of seconds, got {keep_for!r}")
        self.path = os.fspath(path)
        self.keep = keep
        self.keep_for = keep_for
        self.skipped = 0
        self.problems: dict[str, str] = {}
        self.verified: dict[str, dict[str, Any]] | None = None  # the last verify_now's verdicts
        self._clock = clock
        folder, name = os.path.split(self.path)
        self._folder = folder
        base, extension = os.path.splitext(name)
        # the file, a node's (as security.apply.audit_sink names it), and their rotations (.1, .2, ...)
        self._names = re.compile(rf"{re.escape(base)}(?:\.[^/]+)?{re.escape(extension)}(?:\.\d+)?")
        self._files: dict[tuple[int, int], _File] = {}
        self._chains: dict[str, _Chain] = {}
        self._entries: list[Entry] = []
        self._index: dict[tuple[str, int], Entry] = {}

    # --- reading --------------------------------------------------------------------------------------------------

    def refresh(self) -> int:
        """Read what every file of the trail gained since the last call, and let go of the records that fell out of
        the hour or past ``keep``. Returns how many records were added (or replaced: a file that now says otherwise)."""
        horizon = self._clock() - self.keep_for
        seen: set[tuple[int, int]] = set()
        fresh: list[Entry] = []
        problems = {}
        for base, paths in trails(self._found()).items():
            name = os.path.basename(base)
            chain = self._chains.setdefault(name, _Chain())
            for path in paths:
                try:
                    self._read(path, name, chain, horizon, seen, fresh)
                except FileNotFoundError:
                    continue  # removed since the folder was listed: a rotation deleting its oldest file
                except OSError as exc:
                    problems[path] = f"{path}: cannot read: {exc.strerror or exc}"
        self.problems = problems
        for gone in self._files.keys() - seen:
            del self._files[gone]
        added = self._hold(fresh)
        self._let_go(horizon)
        return added

    def _found(self) -> list[str]:
        """The files of the trail and of the nodes' trails beside it, as they are now."""
        try:
            names = os.listdir(self._folder or ".")
        except OSError:
            return []  # no folder yet: nothing written yet
        return [os.path.join(self._folder, name) for name in sorted(names) if self._names.fullmatch(name)]

    def _read(self, path: str, name: str, chain: _Chain, horizon: float, seen: set[Any], fresh: list[Entry]) -> None:
        with open(path, "rb") as file:
            status = os.fstat(file.fileno())
            identity = (status.st_dev, status.st_ino)
            seen.add(identity)
            known = self._files.get(identity)
            if known is not None and status.st_size == known.offset and status.st_mtime_ns == known.mtime:
                return
            fd = file.fileno()
            if known is None or not known.holds_what_was_read(fd, status.st_size):
                known = self._files[identity] = _File()
                if status.st_mtime < horizon:  # written to last before the hour: only its head is of use
                    line, end = _last_line(fd, status.st_size)
                    if end:
                        known.read_up_to(end, line)
                        self._take([line], name, chain, horizon, fresh)
            known.mtime = status.st_mtime_ns
            self._read_from(file, known, name, chain, horizon, fresh)

    def _read_from(self, file: Any, known: _File, name: str, chain: _Chain, horizon: float, fresh: list[Entry]) -> None:
        """Take the complete lines of ``file`` from where it was read up to."""
        file.seek(known.offset)
        rest = b""
        while chunk := file.read(_CHUNK):
            data = rest + chunk if rest else chunk
            end = data.rfind(b"\n")
            if end < 0:
                rest = data
                continue
            lines = data[:end].split(b"\n")
            self._take(lines, name, chain, horizon, fresh)
            known.read_up_to(known.offset + end + 1, lines[-1])
            rest = data[end + 1 :]

    def _take(self, lines: list[bytes], name: str, chain: _Chain, horizon: float, fresh: list[Entry]) -> None:
        """Parse ``lines`` of trail ``name``: the records of the hour go to ``fresh``, the newest moves the head."""
        newest, newest_line = chain.seq, None
        for line in lines:
            parsed = _parse(line)
            if parsed is None:
                self.skipped += 1
                continue
            record, when = parsed
            seq = record["seq"]
            if seq > newest:
                newest, newest_line = seq, line
            if chain.last is None or when > chain.last:
                chain.last = when
            if when >= horizon:
                record["trail"] = name
                fresh.append((when, name, seq, record))
        if newest_line is not None:
            chain.seq, chain.head = newest, line_hash(newest_line)

    def _hold(self, fresh: list[Entry]) -> int:
        """Add ``fresh`` to the records held, each (trail, seq) once; returns how many were added or replaced."""
        added, rebuild, new = 0, False, []
        for entry in fresh:
            key = (entry[1], entry[2])
            held = self._index.get(key)
            if held is not None:
                if held[3] == entry[3]:
                    continue  # read again (a file that shrank, a rotation seen halfway): the same record
                rebuild = True  # the file now says otherwise (a trail begun again, or rewritten): what it says now
            self._index[key] = entry
            added += 1
            new.append(entry)
        if rebuild:
            self._entries = sorted(self._index.values())
        elif new:
            new.sort()
            late = self._entries and new[0] < self._entries[-1]
            self._entries.extend(new)
            if late:  # two sorted runs: the sort merges them in one pass
                self._entries.sort()
        return added

    def _let_go(self, horizon: float) -> None:
        entries = self._entries
        cut = max(bisect.bisect_left(entries, horizon, key=_when), len(entries) - self.keep)
        if cut > 0:
            for _, name, seq, _ in entries[:cut]:
                del self._index[(name, seq)]
            del entries[:cut]

    # --- what is held -----------------------------------------------------------------------------------------------

    def records(
        self,
        *,
        principal: str | None = None,
        tool: str | None = None,
        decision: str | None = None,
        outcome: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        limit: int | None = 200,
    ) -> list[dict[str, Any]]:
        """The records held, newest first, that match every filter given: ``principal``, ``tool``, ``decision``
        and ``outcome`` are exact values of those members; ``since <= time < until``. At most ``limit`` (None: all).
        Raises ValueError for a ``since`` or ``until`` string that is not an ISO 8601 time."""
        if limit is not None and limit < 1:
            return []
        entries = self._entries
        low = 0 if since is None else bisect.bisect_left(entries, _seconds(since, "since"), key=_when)
        high = len(entries) if until is None else bisect.bisect_left(entries, _seconds(until, "until"), key=_when)
        wanted = [(member, value) for member, value in (("principal", principal), ("tool", tool),
                  ("decision", decision), ("outcome", outcome)) if value is not None]  # fmt: skip
        found = []
        for index in range(high - 1, low - 1, -1):
            record = entries[index][3]
            if all(record.get(member) == value for member, value in wanted):
                found.append(record)
                if len(found) == limit:
                    break
        return found

    def record(self, trail: str, seq: int) -> dict[str, Any] | None:
        """The record ``seq`` of ``trail`` (a record's ``trail`` member), if it is held."""
        entry = self._index.get((trail, seq))
        return None if entry is None else entry[3]

    def head(self, trail: str) -> tuple[int, str] | None:
        """The seq and hash of the newest record read from ``trail`` (what ``FileAuditSink.head`` says while the
        writer runs, and ``verify`` reports as ``head``), or None before one was read."""
        chain = self._chains.get(trail)
        return None if chain is None or chain.head is None else (chain.seq, chain.head)

    def overview(self, now: Moment | None = None, minutes: int = 60) -> dict[str, Any]:
        """The numbers of the last ``minutes`` whole minutes up to ``now`` (default: the clock's), the minute in
        progress the last. Only records held count: minutes before ``keep_for`` are empty. ::

            {"start": ISO time, "end": ISO time, "calls": n, "per_minute": [n, ...],
             "tools": {tool: {"calls", "errors", "refusals", "p50_ms", "p99_ms", "outcomes", "per_minute"}},
             "refusals": {reason: n}, "trails": {trail: {"records": n, "last": ISO time or None}},
             "skipped": n}

        ``calls``, ``per_minute`` (oldest first) and ``tools`` count call records (``event`` "call", which includes
        refused calls); ``errors`` are the calls whose outcome is "error" or "timeout", ``refusals`` those whose
        decision is not "allowed", ``outcomes`` counts each outcome; ``p50_ms``/``p99_ms`` are the nearest-rank
        percentiles of the ``duration_ms`` of the calls that ran (None without one). ``refusals`` counts every
        record refused, HTTP refusals included, by ``reason``, the most frequent first. ``trails``: every trail seen,
        with its records in the window and the time of the newest record ever read from it."""
        if minutes < 1:
            raise ValueError(f"minutes must be at least 1, got {minutes}")
        moment = self._clock() if now is None else _seconds(now, "now")
        end = (math.floor(moment / 60) + 1) * 60.0
        start = end - minutes * 60.0
        per_minute = [0] * minutes
        tools: dict[str, _Tally] = {}
        refusals: dict[str, int] = {}
        counts = dict.fromkeys(self._chains, 0)
        entries = self._entries
        for index in range(bisect.bisect_left(entries, start, key=_when), bisect.bisect_left(entries, end, key=_when)):
            when, name, _, record = entries[index]
            counts[name] = counts.get(name, 0) + 1
            decision = record.get("decision")
            if decision is not None and decision != "allowed":
                reason = record.get("reason")
                reason = reason if isinstance(reason, str) else _NO_REASON
                refusals[reason] = refusals.get(reason, 0) + 1
            if record.get("event") != "call":
                continue
            minute = int((when - start) // 60)
            per_minute[minute] += 1
            tool = str(record.get("tool"))
            tally = tools.get(tool)
            if tally is None:
                tally = tools[tool] = _Tally(minutes)
            tally.add(minute, record)
        return {
            "start": format_time(start),
            "end": format_time(end),
            "calls": sum(per_minute),
            "per_minute": per_minute,
            "tools": {tool: tools[tool].summary() for tool in sorted(tools)},
            "refusals": dict(sorted(refusals.items(), key=lambda item: (-item[1], item[0]))),
            "trails": {name: {"records": counts[name], "last": self._last(name)} for name in sorted(counts)},
            "skipped": self.skipped,
        }

    def _last(self, trail: str) -> str | None:
        chain = self._chains.get(trail)
        return None if chain is None or chain.last is None else format_time(chain.last)

    # --- the chains -----------------------------------------------------------------------------------------------

    def verify_now(self) -> dict[str, dict[str, Any]]:
        """``verify`` of every trail's files on disk, by trail name: ``{"ok", "records", "files", "problem",
        "head", "torn"}`` (``problem`` is ``file:line: what``; ``head`` the hash of the newest record; ``torn`` a
        note on a last line still being written). Reads every file whole: call it off the event loop (it touches
        nothing ``refresh`` does, so from any thread). A problem is checked once more before it is reported, since a
        rotation while the files were read can show one that is not there. Kept as ``verified``."""
        verdicts = {os.path.basename(base): self._verdict(base, paths) for base, paths in trails(self._found()).items()}
        self.verified = dict(sorted(verdicts.items()))
        return self.verified

    def _verdict(self, base: str, paths: list[str]) -> dict[str, Any]:
        try:
            report = verify(paths)
            if report.ok:
                return _verdict(report)
        except AuditError:
            pass
        paths = trails(self._found()).get(base, [])
        try:
            return _verdict(verify(paths))
        except AuditError as exc:
            return {"ok": False, "records": 0, "files": len(paths), "problem": str(exc), "head": None, "torn": None}

    def status(self) -> dict[str, dict[str, Any]]:
        """Every trail seen, from memory (no file is read): ``{"seq", "head", "last", "verified"}``: the newest
        record's seq and hash (None before one was read), its time, and the last ``verify_now`` verdict (None
        before one)."""
        verified = self.verified or {}
        status = {}
        for name in sorted(self._chains.keys() | verified.keys()):
            head = self.head(name)
            status[name] = {"seq": head[0] if head else None, "head": head[1] if head else None,
                            "last": self._last(name), "verified": verified.get(name)}  # fmt: skip
        return status


class _Tally:
    """One tool's numbers in an overview."""

    __slots__ = ("calls", "errors", "refusals", "outcomes", "durations", "per_minute")

    def __init__(self, minutes: int) -> None:
        self.calls = self.errors = self.refusals = 0
        self.outcomes: dict[str, int] = {}
        self.durations: list[float] = []
        self.per_minute = [0] * minutes

    def add(self, minute: int, record: dict[str, Any]) -> None:
        self.calls += 1
        self.per_minute[minute] += 1
        outcome = str(record.get("outcome"))
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome in _ERRORS:
            self.errors += 1
        if record.get("decision") != "allowed":
            self.refusals += 1
            return
        duration = record.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self.durations.append(float(duration))

    def summary(self) -> dict[str, Any]:
        durations = sorted(self.durations)
        return {
            "calls": self.calls,
            "errors": self.errors,
            "refusals": self.refusals,
            "p50_ms": _percentile(durations, 0.50),
            "p99_ms": _percentile(durations, 0.99),
            "outcomes": dict(sorted(self.outcomes.items())),
            "per_minute": self.per_minute,
        }


def _percentile(ordered: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least ``fraction`` of ``ordered`` at or below it."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else None


def _verdict(report: VerifyReport) -> dict[str, Any]:
    return {"ok": report.ok, "records": report.records, "files": report.files, "problem": report.problem,
            "head": report.head, "torn": report.torn}  # fmt: skip


def _parse(line: bytes) -> tuple[dict[str, Any], float] | None:
    """An audit record (an object with an integer ``seq``, a string ``prev`` and a ``time``) and its time in
    seconds, or None."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    seq, stamp = record.get("seq"), record.get("time")
    if type(seq) is not int or not isinstance(record.get("prev"), str) or not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return record, (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _seconds(moment: Moment, what: str) -> float:
    if isinstance(moment, int | float) and not isinstance(moment, bool):
        return float(moment)
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            raise ValueError(f"{what}: not an ISO 8601 time: {moment!r}") from None
    if isinstance(moment, datetime):
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    raise TypeError(f"{what}: expected a datetime, an ISO 8601 string or seconds since the epoch, got {moment!r}")


def _last_line(fd: int, size: int, block: int = 1 << 16) -> tuple[bytes, int]:
    """The last complete line of the file ``fd`` (``size`` bytes long), and the offset just past its newline."""
    start = size
    while start > 0:
        start = max(0, start - block)
        data = os.pread(fd, size - start, start)
        end = data.rfind(b"\n")
        before = data.rfind(b"\n", 0, end) if end > 0 else -1
        if end >= 0 and (before >= 0 or start == 0):
            return data[before + 1 : end], start + end + 1
    return b"", 0
