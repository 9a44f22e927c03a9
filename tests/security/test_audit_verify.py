"""security/audit_verify.py: ``verify``'s verdict on every way a trail can be changed — edited, removed, added, moved,
duplicated, cut short, a record that is not one — each check with a case that fails if the check is weakened by one
step (a condition dropped, a comparison loosened, a boundary moved), the expected head, a torn last line (a writer
killed mid-write) that is noted and not counted, and the chain-break records older writers left."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tooldeck.security.audit import GENESIS, AuditError, MemoryAuditSink, line_hash, verify


def lines_of(count: int, start: int = 0) -> list[bytes]:
    sink = MemoryAuditSink()
    sink._chain.seq = start
    for n in range(count):
        sink.write({"event": "call", "tool": "deploy", "n": start + n})
    return sink.lines


def save(path: Path, lines: list[bytes], ended: bool = True) -> Path:
    path.write_bytes(b"\n".join(lines) + (b"\n" if ended else b""))
    return path


@pytest.fixture
def trail(tmp_path: Path) -> Path:
    return save(tmp_path / "audit.jsonl", lines_of(6))


def rewrite(path: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    save(path, change(path.read_bytes().splitlines()))


def edit(lines: list[bytes], index: int, **changes: Any) -> list[bytes]:
    document = orjson.loads(lines[index])
    document.update(changes)
    return [*lines[:index], orjson.dumps(document), *lines[index + 1 :]]


def rechain(lines: list[bytes]) -> list[bytes]:
    """``lines`` with every ``prev`` made right again: whoever changed them also rewrote the links."""
    out: list[bytes] = []
    for line in lines:
        document = orjson.loads(line)
        document["prev"] = line_hash(out[-1]) if out else GENESIS
        out.append(orjson.dumps(document))
    return out


def forged_after(lines: list[bytes], index: int) -> bytes:
    """A record that would follow ``lines[index]``: the next seq, and a right link to it."""
    return orjson.dumps({"seq": index + 1, "prev": line_hash(lines[index]), "event": "call", "n": 99})


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda ls: edit(ls, 2, outcome="error"),
            "3: record was edited (its hash does not match the next record's prev)",
        ),
        (lambda ls: edit(ls, 0, prev="1" * 64), "1: record was edited (the first record's prev is not 00000000...)"),
        (lambda ls: [*ls[:3], *ls[4:]], "4: record 3 is missing (seq jumps from 2 to 4)"),
        (lambda ls: [*ls[:1], *ls[4:]], "2: records 1-3 are missing (seq jumps from 0 to 4)"),
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], "2: records out of order (seq 2 follows seq 0)"),
        (lambda ls: [*ls[:4], ls[3], *ls[4:]], "5: records out of order (seq 3 follows seq 3)"),
        (lambda ls: [*ls[:2], b"{not json", *ls[3:]], "3: not JSON"),
        (lambda ls: [*ls[:2], b'{"hello": 1}', *ls[3:]], "3: not an audit record (no integer seq and string prev)"),
        # a line can be JSON and still not a record: each field's type is checked on its own
        (lambda ls: edit(ls, 2, seq=True), "3: not an audit record (no integer seq and string prev)"),
        (lambda ls: edit(ls, 2, seq="2"), "3: not an audit record (no integer seq and string prev)"),
        (lambda ls: edit(ls, 2, prev=None), "3: not an audit record (no integer seq and string prev)"),
        (lambda ls: [*ls[:2], b"[1, 2]", *ls[3:]], "3: not an audit record (no integer seq and string prev)"),
        (lambda ls: [*ls[:2], b"", *ls[3:]], "3: not JSON"),
        # renumbered to hide a removal, links rewritten: the first record's prev no longer starts the chain
        (
            lambda ls: edit(rechain(ls[1:]), 0, seq=0, prev="2" * 64),
            "1: record was edited (the first record's prev is not 00000000...)",
        ),
        # a record added in the middle with the next seq and a right link: the records after it are out of order
        (lambda ls: [*ls[:3], forged_after(ls, 2), *ls[3:]], "5: records out of order (seq 3 follows seq 3)"),
        # a gap that another file fills is not a removal: here no file does, so the jump is a removal
        (lambda ls: [*ls[:2], *ls[5:]], "3: records 2-4 are missing (seq jumps from 1 to 5)"),
    ],
    ids=[
        "edited",
        "first-edited",
        "deleted",
        "three-deleted",
        "reordered",
        "duplicated",
        "not-json",
        "not-a-record",
        "seq-bool",
        "seq-string",
        "prev-null",
        "json-array",
        "empty-line",
        "renumbered",
        "inserted",
        "gap",
    ],
)
def test_verify_names_the_first_problem(
    trail: Path, change: Callable[[list[bytes]], list[bytes]], problem: str
) -> None:
    rewrite(trail, change)
    report = verify([trail])
    assert (report.ok, report.problem) == (False, f"{trail}:{problem}")


def test_a_trail_that_begins_after_seq_0_is_the_rest_of_a_rotated_set(tmp_path: Path) -> None:
    path = save(tmp_path / "audit.jsonl", lines_of(6)[2:])  # the files with seq 0 and 1 were deleted by rotation
    report = verify([path])
    assert (report.ok, report.records, report.first_seq) == (True, 4, 2)


def test_files_are_taken_in_the_order_of_their_first_seq_and_a_gap_another_file_fills_is_out_of_order(
    tmp_path: Path,
) -> None:
    lines = lines_of(6)
    older, newer = save(tmp_path / "audit.jsonl.1", lines[:3]), save(tmp_path / "audit.jsonl", lines[3:])
    assert verify([newer, older]).ok
    save(older, [lines[0], lines[2]])  # record 1 moved into the newer file
    save(newer, [lines[1], *lines[3:]])
    assert verify([newer, older]).problem == f"{older}:2: records out of order (seq 2 follows seq 0)"


# --- the head -----------------------------------------------------------------------------------------------------


def test_an_edit_of_the_last_record_needs_the_expected_head(trail: Path) -> None:
    lines = trail.read_bytes().splitlines()
    middle, head = line_hash(lines[3]), line_hash(lines[-1])
    assert verify([trail], expect_head=head.upper()).ok
    assert verify([trail], expect_head=middle).ok  # the trail grew after the head was copied
    assert verify([trail]).head == head
    rewrite(trail, lambda ls: edit(ls, 5, outcome="error"))
    assert verify([trail]).ok  # what a hash chain alone cannot see
    assert verify([trail], expect_head=middle).ok  # nor a head copied before the edited record
    assert verify([trail], expect_head=head).problem == (
        f"{trail}:6: no record has the expected head {head}: the record it was copied from was edited or removed, "
        "or these are not the files it was copied from"
    )


def test_records_removed_from_the_end_are_found_by_the_expected_head(trail: Path) -> None:
    head = line_hash(trail.read_bytes().splitlines()[-1])
    rewrite(trail, lambda ls: ls[:-2])
    assert verify([trail]).ok
    assert verify([trail], expect_head=head).problem == (
        f"{trail}:4: no record has the expected head {head}: the record it was copied from was edited or removed, "
        "or these are not the files it was copied from"
    )
    trail.write_bytes(b"")
    assert verify([trail], expect_head=head).problem == (
        f"no record has the expected head {head}: the record it was copied from was edited or removed, "
        "or these are not the files it was copied from"
    )


# --- a torn last line ---------------------------------------------------------------------------------------------


def test_a_torn_last_line_is_noted_and_not_counted(trail: Path) -> None:
    lines = trail.read_bytes().splitlines()
    save(trail, [*lines[:5], lines[5][:40]], ended=False)  # the writer was killed in the middle of a write
    report = verify([trail])
    assert report.to_json() == {
        "ok": True, "records": 5, "files": 1, "problem": None, "breaks": [], "first_seq": 0,
        "head": line_hash(lines[4]),
        "torn": f"{trail}:6: a record cut short by an interrupted write (40 bytes) is not counted",
    }  # fmt: skip


def test_a_complete_record_without_its_newline_is_not_counted_either(trail: Path) -> None:
    lines = trail.read_bytes().splitlines()
    trail.write_bytes(trail.read_bytes()[:-1])
    report = verify([trail], expect_head=line_hash(lines[5]))  # it was never committed: not a head to be found
    assert report.problem == (
        f"{trail}:5: no record has the expected head {line_hash(lines[5])}: the record it was copied from was edited "
        "or removed, or these are not the files it was copied from"
    )
    assert (
        verify([trail]).torn
        == f"{trail}:6: a record cut short by an interrupted write ({len(lines[5])} bytes) is not counted"
    )


def test_a_torn_line_anywhere_but_at_the_very_end_is_a_problem(tmp_path: Path) -> None:
    lines = lines_of(6)
    older = save(tmp_path / "audit.jsonl.1", [*lines[:2], lines[2][:30]], ended=False)
    newer = save(tmp_path / "audit.jsonl", lines[3:])
    assert verify([newer, older]).problem == f"{older}:3: truncated last line"  # a rotated file is never torn
    save(older, [*lines[:2], lines[2][:30], *lines[3:]])
    assert verify([older]).problem == f"{older}:3: not JSON"


def test_a_torn_line_only_is_a_trail_of_no_records(tmp_path: Path) -> None:
    path = save(tmp_path / "audit.jsonl", [b'{"seq":0,"pr'], ended=False)
    report = verify([path])
    assert (report.ok, report.records, report.head, report.torn) == (
        True, 0, None, f"{path}:1: a record cut short by an interrupted write (12 bytes) is not counted",
    )  # fmt: skip


# --- chain-break records (written by writers before they cut torn lines off) --------------------------------------


def legacy_trail(path: Path, **break_changes: Any) -> tuple[Path, bytes]:
    """What a writer before this one left after a torn write: the torn line kept, then a chain-break record naming
    it, chained to the last intact record."""
    sink = MemoryAuditSink()
    for n in range(2):
        sink.write({"event": "call", "n": n})
    torn = b'{"seq":2,"prev":"' + b"a" * 20
    chain_break = {"time": "2025-06-18T09:30:00.000Z", "event": "chain-break", "reason": "truncated last line",
                   "line": 3, "lost_bytes": len(torn), "lost_sha256": hashlib.sha256(torn).hexdigest()}  # fmt: skip
    sink.write({**chain_break, **break_changes})
    sink.write({"event": "call", "n": 3})
    save(path, [*sink.lines[:2], torn, *sink.lines[2:]])
    return path, torn


def test_a_chain_break_is_a_problem_unless_breaks_are_allowed(tmp_path: Path) -> None:
    path, torn = legacy_trail(tmp_path / "audit.jsonl")
    note = (
        f"{path}:3: truncated record ({len(torn)} bytes) left by an interrupted write; "
        "the chain goes on from a chain-break record at line 4"
    )
    assert verify([path]).problem == note
    report = verify([path], allow_breaks=True)
    assert (report.ok, report.records, report.breaks) == (True, 4, [note])


@pytest.mark.parametrize(
    "changes",
    [{"event": "call"}, {"line": 2}, {"lost_sha256": "0" * 64}],
    ids=["not-a-chain-break", "another-line", "other-bytes"],
)
def test_a_chain_break_acknowledges_only_the_torn_line_it_names(tmp_path: Path, changes: dict[str, Any]) -> None:
    path, _ = legacy_trail(tmp_path / "audit.jsonl", **changes)
    report = verify([path], allow_breaks=True)
    assert (report.ok, report.problem) == (False, f"{path}:3: not JSON")


# --- nothing to verify ----------------------------------------------------------------------------------------------


def test_verify_of_nothing_and_of_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert verify([tmp_path / "empty.jsonl"]).to_json() == {
        "ok": True, "records": 0, "files": 1, "problem": None, "breaks": [], "first_seq": None, "head": None,
        "torn": None,
    }  # fmt: skip
    with pytest.raises(AuditError, match=r"missing.jsonl: cannot read: No such file or directory"):
        verify([tmp_path / "missing.jsonl"])
