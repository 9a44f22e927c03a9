"""``tooldeck audit verify``: check an audit trail's hash chain, across its rotated files — or a fleet's trails, one
per process (``audit.<node>.jsonl``), each on its own, every line of the output then led by its trail's name.

Exit 0 when the chain holds ("ok: N records in K files, chain intact", with a note on a last line cut short by an
interrupted write, which is not counted; then "head: HASH", the newest record's hash, which is what a later
``--expect-head`` takes), 1 at the first problem (printed as ``file:line: what``), 2 when a file
cannot be read.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import orjson

from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

    from ..security.audit_verify import VerifyReport


def verify(args: argparse.Namespace) -> int:
    from ..security.audit import AuditError
    from ..security.audit_verify import verify_trails

    try:
        reports = verify_trails(args.files, expect_head=args.expect_head, allow_breaks=args.allow_breaks)
    except AuditError as exc:
        raise TargetError(str(exc)) from None
    if args.json:
        found: object = next(iter(reports.values())).to_json() if len(reports) == 1 else {
            trail: report.to_json() for trail, report in reports.items()}  # fmt: skip
        sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0 if all(report.ok for report in reports.values()) else 1
    several = len(reports) > 1
    for trail, report in reports.items():
        _print(report, f"{trail}: " if several else "")
    return 0 if all(report.ok for report in reports.values()) else 1


def _print(report: VerifyReport, trail: str) -> None:
    """One trail's verdict: ``ok: ...`` and ``head: HASH``, or its first problem (which names its file)."""
    if report.problem is not None:
        print(report.problem)
        return
    line = f"{trail}ok: {_count(report.records, 'record')} in {_count(report.files, 'file')}, chain intact"
    if report.first_seq:
        line += f" from seq {report.first_seq} (the records before it are not in these files)"
    if report.breaks:
        line += f"; {_count(len(report.breaks), 'break')} allowed: " + ", ".join(
            note.split(": ", 1)[0] for note in report.breaks
        )
    if report.torn:
        line += f"; {report.torn} (the server removes it when it reopens the trail)"
    print(line)
    if report.head is not None:
        print(f"{trail}head: {report.head}")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
