"""``verify``: walk an audit trail's hash chain, across rotated files, and name the first place it does not hold.

What a chain proves, and what it cannot: each record holds the hash of the one before, so an edited, removed,
added or moved record breaks a link, unless whoever changed it also rewrote every record after it (the hashes
need no key). An edit of the LAST record breaks no link at all, and neither does removing records from the end or
the start of the trail. Copy the head (``FileAuditSink.head``, or the hash ``verify`` reports) somewhere the
writer cannot reach, now and then, and pass it as ``expect_head``: every record up to that head is then proven.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

import orjson

from ..protocol.record import Record
from .audit_chain import CHAIN_BREAK, GENESIS, AuditError, line_hash


class VerifyReport(Record):
    """What ``verify`` found: ``ok``, the number of ``records`` and ``files``, the first ``problem`` (``file:line:
    what``) or None, the chain ``breaks`` it allowed, the ``first_seq`` present (0 unless older files are gone), the
    ``head`` (the last record's hash) and ``torn``, a note on a cut-short last line that was not counted."""

    __slots__ = ("ok", "records", "files", "problem", "breaks", "first_seq", "head", "torn")

    def __init__(self, *, records: int, files: int, problem: str | None = None, breaks: list[str] | None = None,
                 first_seq: int | None = None, head: str | None = None, torn: str | None = None) -> None:  # fmt: skip
        self.ok = problem is None
        self.records = records
        self.files = files
        self.problem = problem
        self.breaks = breaks or []
        self.first_seq = first_seq
        self.head = head
        self.torn = torn

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class _Line(Record):
    __slots__ = ("file", "number", "raw", "record")

    def __init__(self, file: str, number: int, raw: bytes, record: dict[str, Any] | None) -> None:
        self.file = file
        self.number = number
        self.raw = raw
        self.record = record  # None: not JSON, or not an audit record


def verify(paths: Iterable[str | os.PathLike[str]], *, expect_head: str | None = None,
           allow_breaks: bool = False) -> VerifyReport:  # fmt: skip
    """Check the chain of the trail in ``paths`` (one file, or a rotated set given in any order: files are taken in
    the order of their first ``seq``). Problems are reported, not raised; a file that cannot be read raises
    ``AuditError``. The newest file's last line may lack its newline: a record cut short because its writer was
    stopped in the middle of writing it (so before its call was answered). It is not counted, and noted in
    ``torn``; the writer cuts it off when it reopens the trail. Anywhere else a cut-short line is a problem. A
    chain-break record (what writers before that wrote after a cut-short line, leaving it in place) is a problem
    unless ``allow_breaks``; then it is listed in ``breaks``. ``expect_head``: a record hash copied earlier, which
    must be the hash of some record in the trail. The last record's own edits are not detectable without it.
    """
    files = [_read(os.fspath(path)) for path in paths]
    files.sort(key=_first_seq)
    seqs = {line.record["seq"] for lines, _ in files for line in lines if line.record is not None}
    breaks: list[str] = []
    count, first_seq, last, found_head, torn = 0, None, None, expect_head is None, None
    expect_head = expect_head.lower() if expect_head is not None else None

    def report(problem: str | None = None) -> VerifyReport:
        head = line_hash(last.raw) if last is not None else None
        return VerifyReport(records=count, files=len(files), problem=problem, breaks=breaks, first_seq=first_seq,
                            head=head, torn=torn)  # fmt: skip

    for number, (lines, ended) in enumerate(files, 1):
        for index, line in enumerate(lines):
            where = f"{line.file}:{line.number}"
            following = lines[index + 1] if index + 1 < len(lines) else None
            if following is not None and _acknowledges(following, line):
                note = (
                    f"{where}: truncated record ({len(line.raw)} bytes) left by an interrupted write; "
                    f"the chain goes on from a chain-break record at line {following.number}"
                )
                if not allow_breaks:
                    return report(note)
                breaks.append(note)
                continue
            if index == len(lines) - 1 and not ended:
                if number < len(files):  # a rotated file was complete when it was moved aside
                    return report(f"{where}: truncated last line")
                torn = f"{where}: a record cut short by an interrupted write ({len(line.raw)} bytes) is not counted"
                break
            record = line.record
            if record is None:
                return report(f"{where}: {_not_a_record(line.raw)}")
            seq, prev = record["seq"], record["prev"]
            if last is None:
                first_seq = seq
                if seq == 0 and prev != GENESIS:
                    return report(f"{where}: record was edited (the first record's prev is not {GENESIS[:8]}...)")
            else:
                expected = last.record["seq"] + 1  # type: ignore[index]
                if seq > expected and not any(expected <= other < seq for other in seqs):
                    missing = f"record {expected} is" if seq == expected + 1 else f"records {expected}-{seq - 1} are"
                    return report(f"{where}: {missing} missing (seq jumps from {expected - 1} to {seq})")
                if seq != expected:
                    return report(f"{where}: records out of order (seq {seq} follows seq {expected - 1})")
                if prev != line_hash(last.raw):
                    return report(
                        f"{last.file}:{last.number}: record was edited (its hash does not match the next record's prev)"
                    )
            if not found_head:
                found_head = line_hash(line.raw) == expect_head
            count, last = count + 1, line
    if not found_head:
        where = f"{last.file}:{last.number}: " if last is not None else ""
        return report(
            f"{where}no record has the expected head {expect_head}: the record it was copied from was edited "
            "or removed, or these are not the files it was copied from"
        )
    return report()


def _read(path: str) -> tuple[list[_Line], bool]:
    """A file's lines, each parsed, and whether its last line ended with a newline."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise AuditError(f"{path}: cannot read: {exc.strerror or exc}") from None
    ended = data.endswith(b"\n") or not data
    raws = data.split(b"\n")
    if ended:
        raws.pop()
    return [_Line(path, number, raw, _parse(raw)) for number, raw in enumerate(raws, 1)], ended


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    seq, prev = record.get("seq"), record.get("prev")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(prev, str):
        return None
    return record


def _not_a_record(raw: bytes) -> str:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "not JSON"
    return "not an audit record (no integer seq and string prev)"


def _first_seq(file: tuple[list[_Line], bool]) -> float:
    """The ordering key of a file: its first record's seq (files with none go last)."""
    return next((line.record["seq"] for line in file[0] if line.record is not None), float("inf"))


def _acknowledges(following: _Line, line: _Line) -> bool:
    """Whether ``following`` is the chain-break record a reopening writer put after the cut-short ``line``."""
    record = following.record
    return (
        record is not None
        and record.get("event") == CHAIN_BREAK
        and record.get("line") == line.number
        and record.get("lost_sha256") == hashlib.sha256(line.raw).hexdigest()
    )


def trails(paths: Iterable[str | os.PathLike[str]]) -> dict[str, list[str]]:
    """``paths`` grouped by the trail each belongs to: a file and its rotated ``.1``, ``.2``, ... are one trail, named
    by the file (a fleet writes one trail per process: ``audit.<node>.jsonl`` and its rotations)."""
    import re

    found: dict[str, list[str]] = {}
    for path in paths:
        name = os.fspath(path)
        found.setdefault(re.sub(r"\.\d+$", "", name), []).append(name)
    return found


def verify_trails(paths: Iterable[str | os.PathLike[str]], *, expect_head: str | None = None,
                  allow_breaks: bool = False) -> dict[str, VerifyReport]:  # fmt: skip
    """``verify`` of each trail among ``paths`` (see ``trails``), by trail name. ``expect_head`` needs one trail: a
    head is one chain's."""
    found = trails(paths)
    if expect_head is not None and len(found) > 1:
        raise AuditError(f"--expect-head names one chain's head, and these files hold {len(found)} trails "
                         f"({', '.join(sorted(found))}): check each trail with its own head")  # fmt: skip
    return {trail: verify(files, expect_head=expect_head, allow_breaks=allow_breaks)
            for trail, files in sorted(found.items())}  # fmt: skip
