"""``tooldeck audit verify``: check an audit trail's hash chain, across its rotated files.

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


def verify(args: argparse.Namespace) -> int:
    from ..security.audit import AuditError
    from ..security.audit import verify as verify_trail

    try:
        report = verify_trail(args.files, expect_head=args.expect_head, allow_breaks=args.allow_breaks)
    except AuditError as exc:
        raise TargetError(str(exc)) from None
    if args.json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif report.problem is not None:
        print(report.problem)
    else:
        line = f"ok: {_count(report.records, 'record')} in {_count(report.files, 'file')}, chain intact"
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
            print(f"head: {report.head}")
    return 0 if report.ok else 1


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
