"""console/trail.py: the console's view of the audit trail, read from real files written by the real sink — what a
``refresh`` reads (only what was appended; a line still being written waits; a rotation followed without reading
anything twice; a file begun again), a fleet's trails merged, the filters, one record, the hour's numbers (with
record times chosen), what is let go, each chain's verdict before and after an edit, and lines that are not records."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers import client
from tooldeck import Deck
from tooldeck.console.trail import Trail
from tooldeck.security.apply import audit_sink
from tooldeck.security.audit import FileAuditSink, MemoryAuditSink, audit_record, line_hash
from tooldeck.security.audit_chain import format_time
from tooldeck.security.principal import Principal

T = datetime(2025, 6, 18, 9, 30, tzinfo=UTC).timestamp()  # 09:30:00, the start of a minute


def call(at: float, tool: str = "deploy", principal: str = "alice", decision: str = "allowed", outcome: str = "ok",
         reason: str | None = None, duration_ms: float = 10.0) -> dict[str, Any]:  # fmt: skip
    """A call's record as the call auditor writes it, at the time ``at``."""
    return audit_record(time=at, request_id=1, session="s-1", principal=Principal(principal), tool=tool,
                        version="1.0.0", security_level=0, decision=decision, reason=reason,
                        arguments={"service": "web"}, input_schema=None, outcome=outcome,
                        duration_ms=duration_ms)  # fmt: skip


def write(path: Path, *records: dict[str, Any], **options: Any) -> None:
    sink = FileAuditSink(path, **options)
    for record in records:
        sink.write(record)
    sink.close()


def at(now: float, path: Path, **options: Any) -> Trail:
    """A trail whose clock says ``now``."""
    return Trail(path, clock=lambda: now, **options)


def seqs(records: list[dict[str, Any]]) -> list[int]:
    return [record["seq"] for record in records]


def size_of_one() -> int:
    return len(MemoryAuditSink()._chain.encode(call(T))) + 1


# --- reading ------------------------------------------------------------------------------------------------------


async def test_the_calls_of_a_served_deck_are_read_from_its_audit_file(tmp_path: Path) -> None:
    deck = Deck("audited")

    @deck.tool
    def work(n: int) -> int:
        return n

    policy = tmp_path / "policy.toml"
    policy.write_text(f'[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n')
    deck.apply_policy(policy)
    trail = Trail(tmp_path / "audit.jsonl")
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        await c.request_raw("tools/call", {"name": "work", "arguments": {"n": 1}})
        await c.request_raw("tools/call", {"name": "missing", "arguments": {}})
        assert trail.refresh() == 2  # written before the answers came back
    refused, ran = trail.records()
    assert (ran["tool"], ran["principal"], ran["decision"], ran["outcome"], ran["trail"], ran["seq"]) == (
        "work", "ada", "allowed", "ok", "audit.jsonl", 0)  # fmt: skip
    assert (refused["tool"], refused["decision"], refused["outcome"], refused["seq"]) == ("missing", "refused",
                                                                                          "refused", 1)  # fmt: skip
    tools = trail.overview()["tools"]
    assert (tools["work"]["calls"], tools["work"]["refusals"], tools["missing"]["refusals"]) == (1, 0, 1)


def test_a_refresh_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path)  # the writer stays open, as a server's does
    for n in range(3):
        sink.write(call(T + n))
    trail = at(T + 60, path)
    assert trail.refresh() == 3
    assert trail.refresh() == 0
    data = path.read_bytes()
    second = data.index(b"\n") + 1  # past the first line: the opening bytes stay as they were
    with open(path, "r+b") as file:  # an edit of a line already read is not read again
        file.seek(data.index(b'"deploy"', second))
        file.write(b'"DEPLOY"')
    sink.write(call(T + 3))
    sink.close()
    assert trail.refresh() == 1
    assert [record["tool"] for record in trail.records()] == ["deploy"] * 4
    assert seqs(trail.records()) == [3, 2, 1, 0]


def test_a_line_still_being_written_waits_for_the_next_refresh(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 1))
    data = path.read_bytes()
    path.write_bytes(data[:-20])  # the second record without its end and newline
    trail = at(T + 60, path)
    assert trail.refresh() == 1
    with open(path, "ab") as file:
        file.write(data[-20:-1])
    assert trail.refresh() == 0  # still no newline
    with open(path, "ab") as file:
        file.write(b"\n")
    assert trail.refresh() == 1
    assert (seqs(trail.records()), trail.skipped) == ([1, 0], 0)


def test_a_rotation_is_followed_and_nothing_is_read_twice(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, max_bytes=2 * size_of_one() + 10, backups=5)  # two records a file
    trail = at(T + 60, path)
    sink.write(call(T))
    with open(path, "ab") as file:
        file.write(b"not a record\n")  # counted each time it is read
    assert (trail.refresh(), trail.skipped) == (1, 1)
    sink.write(call(T + 1))  # into the file just read, which the next write moves to audit.jsonl.1
    sink.write(call(T + 2))
    assert sorted(p.name for p in tmp_path.glob("audit.jsonl*")) == ["audit.jsonl", "audit.jsonl.1"]
    assert trail.refresh() == 2
    for n in range(3, 7):
        sink.write(call(T + n))
    sink.close()
    assert trail.refresh() == 4
    assert (seqs(trail.records()), trail.skipped) == ([6, 5, 4, 3, 2, 1, 0], 1)
    assert trail.head("audit.jsonl") == (6, line_hash(path.read_bytes().splitlines()[-1]))


def test_a_file_that_shrank_is_read_again_from_its_start_and_its_records_held_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 1), call(T + 2))
    trail = at(T + 60, path)
    assert trail.refresh() == 3
    first, second, third = path.read_bytes().splitlines(keepends=True)
    with open(path, "r+b") as file:  # cut back in place: the same inode
        file.truncate(len(first + second))
    assert trail.refresh() == 0  # read again: the same two records
    assert len(trail.records()) == 3  # held until they fall out of the hour
    write(path, call(T + 2))
    assert trail.refresh() == 0  # the same third record, appended again
    with open(path, "r+b") as file:
        file.truncate(len(first + second))
    write(path, call(T + 2, tool="status"))  # cut back and written again between two refreshes, to the same size
    assert path.stat().st_size == len(first + second + third)
    assert trail.refresh() == 1  # the last line read is not there any more: read again, and what it says now held
    assert [(r["seq"], r["tool"]) for r in trail.records()] == [(2, "status"), (1, "deploy"), (0, "deploy")]


def test_a_trail_begun_again_in_a_new_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 1), call(T + 2))
    trail = at(T + 60, path)
    assert trail.refresh() == 3
    os.replace(path, tmp_path / "archive.jsonl")  # moved aside: a new chain begins at seq 0
    write(path, call(T + 30, tool="status"))
    assert trail.refresh() == 1
    assert trail.record("audit.jsonl", 0)["tool"] == "status"
    assert [(r["seq"], r["tool"]) for r in trail.records()] == [(0, "status"), (2, "deploy"), (1, "deploy")]


def test_the_trails_of_a_fleet_are_read_together(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    alpha = audit_sink({"file": str(path), "max_bytes": 2 * size_of_one() + 10, "backups": 3}, "alpha")
    beta = audit_sink({"file": str(path)}, "beta")
    for n in range(3):
        alpha.write(call(T + 2 * n, principal="alpha"))
        beta.write(call(T + 2 * n + 1, principal="beta"))
    alpha.close()
    beta.close()
    (tmp_path / "audit.jsonl.bak").write_bytes(b"not a trail\n")
    (tmp_path / "other.jsonl").write_bytes(b"not a trail either\n")
    assert sorted(p.name for p in tmp_path.glob("audit.*")) == [
        "audit.alpha.jsonl", "audit.alpha.jsonl.1", "audit.beta.jsonl", "audit.jsonl.bak"]  # fmt: skip
    trail = at(T + 60, path)
    assert trail.refresh() == 6
    assert [(r["trail"], r["seq"]) for r in trail.records()] == [
        ("audit.beta.jsonl", 2), ("audit.alpha.jsonl", 2), ("audit.beta.jsonl", 1), ("audit.alpha.jsonl", 1),
        ("audit.beta.jsonl", 0), ("audit.alpha.jsonl", 0)]  # fmt: skip
    assert trail.skipped == 0
    late = audit_sink({"file": str(path)}, "beta")
    late.write(call(T + 0.5, principal="beta"))  # older than records already held: read later, listed in its place
    late.close()
    assert trail.refresh() == 1
    assert [(r["trail"], r["seq"]) for r in trail.records()][-3:] == [
        ("audit.beta.jsonl", 0), ("audit.beta.jsonl", 3), ("audit.alpha.jsonl", 0)]  # fmt: skip
    assert trail.record("audit.beta.jsonl", 1)["principal"] == "beta"
    assert trail.record("audit.alpha.jsonl", 1)["principal"] == "alpha"
    assert trail.record("audit.jsonl", 1) is None
    assert trail.record("audit.beta.jsonl", 4) is None


def test_a_trail_not_written_yet_is_empty(tmp_path: Path) -> None:
    trail = at(T, tmp_path / "nowhere" / "audit.jsonl")
    assert (trail.refresh(), trail.records(), trail.head("audit.jsonl"), trail.verify_now(), trail.status()) == (
        0, [], None, {}, {})  # fmt: skip
    assert trail.overview(minutes=2)["per_minute"] == [0, 0]


# --- filters ------------------------------------------------------------------------------------------------------


FILTERED = [
    ({}, [4, 3, 2, 1, 0]),
    ({"principal": "alice"}, [3, 2, 0]),
    ({"tool": "deploy"}, [3, 1, 0]),
    ({"decision": "refused"}, [3]),
    ({"outcome": "ok", "principal": "bob"}, [4]),
    ({"tool": "deploy", "outcome": "ok"}, [0]),
    ({"principal": "carol"}, []),
    ({"since": datetime(2025, 6, 18, 9, 30, 10, tzinfo=UTC)}, [4, 3, 2, 1]),
    ({"since": datetime(2025, 6, 18, 9, 30, 20)}, [4, 3, 2]),  # naive: UTC
    ({"since": "2025-06-18T09:30:10Z", "until": "2025-06-18T09:30:30.000Z"}, [2, 1]),  # until is not included
    ({"until": T + 0.001}, [0]),
    ({"limit": 2}, [4, 3]),
    ({"limit": 0}, []),
    ({"limit": None, "tool": "status"}, [4, 2]),
]


@pytest.mark.parametrize(("filters", "expected"), FILTERED, ids=[str(f) for f, _ in FILTERED])
def test_records_are_newest_first_and_filtered(tmp_path: Path, filters: dict[str, Any], expected: list[int]) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 10, principal="bob", outcome="error"), call(T + 20, tool="status"),
          call(T + 30, decision="refused", outcome="refused", reason="security level 5 needed"),
          call(T + 40, tool="status", principal="bob"))  # fmt: skip
    trail = at(T + 60, path)
    trail.refresh()
    assert seqs(trail.records(**filters)) == expected


def test_a_time_that_is_not_one_is_refused_naming_the_filter(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="^since: not an ISO 8601 time: 'yesterday'$"):
        at(T, tmp_path / "audit.jsonl").records(since="yesterday")


# --- the hour's numbers -------------------------------------------------------------------------------------------


def test_the_overview_counts_calls_errors_refusals_and_durations_by_tool_and_minute(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    records = [call(T - 30)]  # before the three minutes asked for
    records += [call(T + n, duration_ms=n + 1) for n in range(99)]  # 1..99 ms over the first two minutes
    records += [call(T + 65, tool="status", outcome="timeout", duration_ms=2000),
                call(T + 70, tool="status", outcome="task_created", duration_ms=3),
                call(T + 125, decision="refused", outcome="refused", reason="security level 5 needed", duration_ms=0.1),
                call(T + 126, decision="refused", outcome="refused", reason="security level 5 needed", duration_ms=0.1),
                call(T + 130, outcome="error", duration_ms=100),
                {"time": format_time(T + 140), "event": "http-refused", "method": "POST", "path": "/mcp",
                 "principal": None, "status": 401, "decision": "refused", "reason": "invalid token"}]  # fmt: skip
    write(path, *records)
    beta = audit_sink({"file": str(path)}, "beta")
    beta.write(call(T + 150, tool="status", duration_ms=4))
    beta.close()
    trail = at(T + 150, path)
    trail.refresh()
    overview = trail.overview(minutes=3)
    assert list(overview["refusals"]) == ["security level 5 needed", "invalid token"]  # the most frequent first
    assert overview == {
        "start": "2025-06-18T09:30:00.000Z",
        "end": "2025-06-18T09:33:00.000Z",  # the minute in progress is the last
        "calls": 105,
        "per_minute": [60, 41, 4],
        "tools": {
            "deploy": {
                "calls": 102,
                "errors": 1,
                "refusals": 2,
                "p50_ms": 50.0,
                "p99_ms": 99.0,
                "outcomes": {"error": 1, "ok": 99, "refused": 2},
                "per_minute": [60, 39, 3],
            },
            "status": {
                "calls": 3,
                "errors": 1,
                "refusals": 0,
                "p50_ms": 4.0,
                "p99_ms": 2000.0,
                "outcomes": {"ok": 1, "task_created": 1, "timeout": 1},
                "per_minute": [0, 2, 1],
            },
        },
        "refusals": {"security level 5 needed": 2, "invalid token": 1},
        "trails": {
            "audit.beta.jsonl": {"records": 1, "last": "2025-06-18T09:32:30.000Z"},
            "audit.jsonl": {"records": 105, "last": "2025-06-18T09:32:20.000Z"},
        },
        "skipped": 0,
    }
    assert trail.overview(now="2025-06-18T09:31:59Z", minutes=1)["per_minute"] == [41]
    assert trail.overview(now=T + 3600, minutes=2)["calls"] == 0


# --- what is let go -----------------------------------------------------------------------------------------------


def test_only_the_newest_keep_records_are_held(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, *(call(T + n) for n in range(5)))
    trail = at(T + 60, path, keep=3)
    assert trail.refresh() == 5
    assert (seqs(trail.records()), trail.record("audit.jsonl", 1)) == ([4, 3, 2], None)


def test_records_older_than_keep_for_are_let_go_and_the_head_stays(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 10), call(T + 20))
    now = [T + 30]
    trail = Trail(path, keep_for=25, clock=lambda: now[0])
    trail.refresh()
    assert seqs(trail.records()) == [2, 1]
    now[0] = T + 50
    assert trail.refresh() == 0
    assert trail.records() == []
    assert trail.head("audit.jsonl") == (2, line_hash(path.read_bytes().splitlines()[-1]))
    assert trail.status()["audit.jsonl"]["last"] == "2025-06-18T09:30:20.000Z"


def test_a_file_last_written_before_the_hour_is_not_read_but_for_its_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T - 7300), call(T - 7200))
    first, last = path.read_bytes().splitlines()
    path.write_bytes(first + b"\nnot a record\n" + last + b"\n")  # read, it would be counted
    os.utime(path, (T - 7200, T - 7200))
    trail = at(T + 60, path)
    assert (trail.refresh(), trail.skipped, trail.head("audit.jsonl")) == (0, 0, (1, line_hash(last)))
    write(path, call(T + 30))  # the writer comes back: what it appends is read
    assert (trail.refresh(), seqs(trail.records()), trail.skipped) == (1, [2], 0)


# --- the chains ---------------------------------------------------------------------------------------------------


def test_verify_now_reports_each_trail_and_names_the_one_edited(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sinks = [audit_sink({"file": str(path)}, node) for node in ("alpha", "beta")]
    for n in range(3):
        for sink in sinks:
            sink.write(call(T + n))
    for sink in sinks:
        sink.close()
    alpha, beta = tmp_path / "audit.alpha.jsonl", tmp_path / "audit.beta.jsonl"
    heads = {name: line_hash((tmp_path / name).read_bytes().splitlines()[-1]) for name in (alpha.name, beta.name)}
    trail = at(T + 60, path)
    assert trail.verify_now() == {
        name: {"ok": True, "records": 3, "files": 1, "problem": None, "head": head, "torn": None}
        for name, head in heads.items()
    }
    trail.refresh()
    assert trail.head("audit.beta.jsonl") == (2, heads["audit.beta.jsonl"])
    assert trail.status()["audit.beta.jsonl"] == {"seq": 2, "head": heads["audit.beta.jsonl"],
                                                  "last": "2025-06-18T09:30:02.000Z",
                                                  "verified": trail.verified["audit.beta.jsonl"]}  # fmt: skip
    beta.write_bytes(beta.read_bytes().replace(b'"alice"', b'"mallory"', 1))
    verdicts = trail.verify_now()
    assert verdicts["audit.alpha.jsonl"]["ok"] is True
    assert (verdicts["audit.beta.jsonl"]["ok"], verdicts["audit.beta.jsonl"]["problem"]) == (
        False, f"{beta}:1: record was edited (its hash does not match the next record's prev)")  # fmt: skip
    assert trail.status()["audit.beta.jsonl"]["verified"]["ok"] is False


def test_verify_now_notes_a_line_still_being_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 1))
    path.write_bytes(path.read_bytes()[:-20])
    (verdict,) = at(T + 60, path).verify_now().values()
    assert (verdict["ok"], verdict["records"]) == (True, 1)
    assert verdict["torn"].startswith(f"{path}:2: a record cut short by an interrupted write")


# --- lines that are not records -----------------------------------------------------------------------------------


def test_lines_that_are_not_records_are_skipped_and_counted_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T), call(T + 1))
    with open(path, "ab") as file:
        file.write(b'not json\n[1, 2]\n{"seq": "3", "prev": "x", "time": "2025-06-18T09:30:02Z"}\n'
                   b'{"seq": 4, "prev": "x", "time": "yesterday"}\n{"seq": 5, "prev": "x"}\n\n')  # fmt: skip
    trail = at(T + 60, path)
    assert (trail.refresh(), trail.skipped) == (2, 6)
    assert (trail.refresh(), trail.skipped) == (0, 6)
    assert trail.overview(now=T + 60)["skipped"] == 6


def test_a_file_that_cannot_be_read_is_named_until_it_can_be(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write(path, call(T))
    (tmp_path / "audit.jsonl.1").mkdir()
    trail = at(T + 60, path)
    assert trail.refresh() == 1
    assert trail.problems == {f"{path}.1": f"{path}.1: cannot read: Is a directory"}
    (tmp_path / "audit.jsonl.1").rmdir()
    trail.refresh()
    assert trail.problems == {}
