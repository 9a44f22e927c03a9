"""security/audit_sinks.py: a record written at once, with one system call, before the call goes on; with fsync
"each", or when the server is busy, the records of one loop turn written together, with one system call, before the
batch is done; and failing closed — a batch that cannot be written is cut back out of the file, its future fails,
calls are refused (``admit``) until a write works again, and then the kept records and an ``audit-unavailable``
record are written. Failures are injected at the file sink's one write seam (``_os_write``), or are real (a closed
stream)."""

from __future__ import annotations

import asyncio
import errno
import io
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from tooldeck.security.audit import AuditError, AuditUnavailableError, FileAuditSink, StderrAuditSink, line_hash, verify

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def rec(n: int) -> dict[str, Any]:
    return {"event": "call", "tool": "deploy", "n": n}


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


class Disk:
    """The file sink's write seam: counts system calls; while ``full``, writes ``room`` bytes of what it is given
    (a real partial write, as a full disk does) and then fails with ENOSPC."""

    def __init__(self, sink: FileAuditSink) -> None:
        self.calls = 0
        self.full = False
        self.room = 0
        sink._os_write = self.write  # type: ignore[method-assign]

    def write(self, fd: int, data: Any) -> int:
        self.calls += 1
        if not self.full:
            return os.write(fd, data)
        if self.room:
            written = os.write(fd, bytes(data[: self.room]))
            self.room = 0
            return written
        raise ENOSPC


async def settled(outcome: Any) -> None:
    """What a call does with what ``write`` returned: awaits it, if there is anything to await."""
    if outcome is not None:
        await outcome


# --- one record, one write, before the answer ---------------------------------------------------------------------


@pytest.mark.parametrize("fsync", ["never", "interval"])
async def test_on_a_loop_a_record_is_written_at_once_with_one_system_call(fsync: str, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync=fsync, fsync_interval=3600)
    disk = Disk(sink)
    for n in range(3):
        assert sink.write(rec(n)) is None  # written: nothing to wait for, not even a loop turn
        assert disk.calls == n + 1 and [r["n"] for r in records(path)] == list(range(n + 1))
    assert sink.head == (2, line_hash(path.read_bytes().splitlines()[-1]))
    sink.close()


@pytest.mark.parametrize("fsync", ["never", "interval"])
async def test_records_said_together_are_written_with_the_others_of_the_turn(fsync: str, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync=fsync, fsync_interval=3600)
    disk = Disk(sink)
    batch = sink.write(rec(0), together=True)  # other requests wait: the turn's records go out together
    assert batch is not None and sink.write(rec(1), together=True) is batch and sink.write(rec(2)) is batch
    assert path.read_bytes() == b"" and not batch.done
    await batch
    assert disk.calls == 1 and [r["n"] for r in records(path)] == [0, 1, 2]  # written before the calls go on
    assert sink.write(rec(3)) is None and disk.calls == 2  # a record alone again: at once
    sink.close()


# --- fsync "each": one loop turn, one write and one fsync, before the answer --------------------------------------


async def test_a_loop_turns_records_are_written_with_one_system_call_before_its_batch_is_done(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync="each")
    disk = Disk(sink)
    made: list[int] = []

    def later(n: int) -> Any:
        def make() -> dict[str, Any]:
            made.append(n)
            return rec(n)

        return make

    batch = sink.write(later(0))
    assert batch is not None and all(sink.write(later(n)) is batch for n in range(1, 5))  # one future for the turn
    assert made == [] and path.read_bytes() == b"" and not batch.done  # nothing until the turn ends
    await batch
    assert made == [0, 1, 2, 3, 4] and disk.calls == 1  # made, chained and written together
    assert [r["n"] for r in records(path)] == [0, 1, 2, 3, 4]  # in the file as the batch is done: before any answer
    assert sink.head == (4, line_hash(path.read_bytes().splitlines()[-1]))
    second = sink.write(rec(5))
    assert second is not batch
    await second
    assert disk.calls == 2 and [r["seq"] for r in records(path)] == list(range(6))
    sink.close()


async def test_cancelling_one_call_that_awaits_a_batch_leaves_the_others_theirs(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync="each")

    async def call(n: int) -> str:
        batch = sink.write(rec(n))
        assert batch is not None and not batch.done
        if n == 0:  # a client's cancellation, arriving before the batch is written: the task cancels what it awaits
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
        await batch
        return "answered"

    first, second = asyncio.ensure_future(call(0)), asyncio.ensure_future(call(1))
    assert await second == "answered"  # the batch both await was not cancelled with the first
    with pytest.raises(asyncio.CancelledError):
        await first  # which still ends cancelled, once the batch is written
    assert [r["n"] for r in records(path)] == [0, 1]  # the cancelled call had run: its record is written all the same
    sink.close()


def test_without_an_event_loop_a_record_is_written_at_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path)
    assert sink.write(rec(0)) is None
    assert records(path)[0]["n"] == 0
    sink.close()


# --- failing closed -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fsync", "together"), [("never", False), ("never", True), ("each", False)])
async def test_a_batch_that_cannot_be_written_is_cut_back_out_of_the_file_and_awaiting_it_raises(
    fsync: str, together: bool, tmp_path: Path
) -> None:  # written at once, as a busy server's turn, or as a turn's batch to fsync
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync=fsync)
    disk = Disk(sink)
    await settled(sink.write(rec(0)))
    intact, head = path.read_bytes(), sink.head
    disk.full, disk.room = True, 30  # the disk takes 30 bytes of the next batch, then is full
    batch = sink.write(rec(1), together=together)
    assert batch is not None  # not written: what the call awaits refuses it
    sink.write(rec(2), together=together)
    with pytest.raises(AuditUnavailableError) as caught:
        await batch
    assert str(caught.value) == (
        "the audit trail is unavailable (No space left on device): the call was refused; try again later"
    )
    assert path.read_bytes() == intact  # the 30 bytes of a torn record were cut off again
    assert sink.head == head and sink.problem == "No space left on device"
    assert verify([path]).to_json() | {"head": None} == {
        "ok": True, "records": 1, "files": 1, "problem": None, "breaks": [], "first_seq": 0, "head": None, "torn": None,
    }  # fmt: skip
    disk.full = False
    sink.close()  # close writes what was kept: nothing that happened is lost
    assert [r.get("n") for r in records(path)] == [0, 1, 2, None]
    assert verify([path]).ok


@pytest.mark.parametrize("fsync", ["never", "each"])  # written at once, or as a loop turn's batch
async def test_while_unavailable_refusals_are_counted_and_each_admission_tries_again(
    fsync: str, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync=fsync)
    disk = Disk(sink)
    assert sink.admit() is None and disk.calls == 0  # while the trail works, admitting a call costs no write
    disk.full = True
    with pytest.raises(AuditUnavailableError):
        await settled(sink.write(rec(0)))  # a call that ran: its record is kept
    calls = disk.calls
    assert sink.admit() == "No space left on device" and disk.calls == calls + 1  # tried again, and refused
    assert sink.admit() == "No space left on device" and disk.calls == calls + 2
    assert sink.write(rec(99), refusal=True) is None  # a refusal ran nothing: counted, not kept
    assert path.read_bytes() == b""
    disk.full = False
    assert sink.admit() is None  # space came back: this call runs, after the kept record and the outage's
    assert sink.problem is None
    kept, outage = records(path)
    assert kept["n"] == 0
    assert outage == {
        "seq": 1, "prev": line_hash(path.read_bytes().splitlines()[0]), "time": outage["time"],
        "event": "audit-unavailable", "since": outage["since"], "reason": "No space left on device", "late": 1,
        "refused": 1,
    }  # fmt: skip
    assert outage["since"] <= outage["time"]
    await settled(sink.write(rec(1)))
    assert [r.get("n") for r in records(path)] == [0, None, 1]
    report = verify([path])
    assert (report.ok, report.records, report.head) == (True, 3, sink.head[1])
    sink.close()


@pytest.mark.parametrize("fsync", ["never", "each"])  # written at once, or as a loop turn's batch
async def test_the_next_batch_tries_again_and_writes_the_kept_records_first(fsync: str, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, fsync=fsync)
    disk = Disk(sink)
    disk.full = True
    with pytest.raises(AuditUnavailableError):
        await settled(sink.write(rec(0)))
    disk.full = False
    await settled(sink.write(rec(1)))  # a call admitted before the trail failed, ending now
    assert [(r["seq"], r["event"], r.get("n")) for r in records(path)] == [
        (0, "call", 0), (1, "audit-unavailable", None), (2, "call", 1),
    ]  # fmt: skip
    assert records(path)[1]["late"] == 1
    sink.close()


def test_without_an_event_loop_a_failed_write_raises_and_flush_and_close_say_so(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path)
    disk = Disk(sink)
    disk.full = True
    with pytest.raises(AuditUnavailableError, match=r"unavailable \(No space left on device\)"):
        sink.write(rec(0))
    with pytest.raises(AuditError, match=rf"the audit trail {path} could not be written: No space left on device"):
        sink.flush()
    with pytest.raises(AuditError, match=r"\(1 records lost\): No space left on device"):
        sink.close()
    assert path.read_bytes() == b""


def test_a_short_write_goes_on_with_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path)
    real = os.write

    def short(fd: int, data: Any) -> int:
        return real(fd, bytes(data[:10]))  # a write may take fewer bytes than it was given, without an error

    sink._os_write = short  # type: ignore[method-assign]
    sink.write(rec(0))
    sink.write(rec(1))
    assert [r["n"] for r in records(path)] == [0, 1] and sink.problem is None
    sink.close()


def test_a_write_that_makes_no_progress_fails(tmp_path: Path) -> None:
    sink = FileAuditSink(tmp_path / "audit.jsonl")
    sink._os_write = lambda fd, data: 0  # type: ignore[method-assign]
    with pytest.raises(AuditUnavailableError, match="a write to the audit trail made no progress"):
        sink.write(rec(0))
    sink._os_write = os.write  # type: ignore[method-assign]
    sink.close()


def test_a_cut_back_that_fails_is_done_before_the_next_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tooldeck.security import audit_file

    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path)
    sink.write(rec(0))
    intact = path.read_bytes()
    disk = Disk(sink)
    disk.full, disk.room = True, 25
    real_ftruncate = os.ftruncate
    monkeypatch.setattr(audit_file.os, "ftruncate", lambda fd, size: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))
    with pytest.raises(AuditUnavailableError):
        sink.write(rec(1))
    assert len(path.read_bytes()) == len(intact) + 25  # the torn bytes could not be cut off yet
    monkeypatch.setattr(audit_file.os, "ftruncate", real_ftruncate)
    disk.full = False
    sink.write(rec(2))  # cut first, then the kept record, the outage's, and this one
    assert [r.get("n") for r in records(path)] == [0, 1, None, 2]
    assert verify([path]).ok
    sink.close()


def test_a_batch_cut_by_a_failed_rotation_keeps_what_reached_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(orjson.dumps({"seq": 0, "prev": "0" * 64, **rec(0)})) + 1
    sink = FileAuditSink(path, max_bytes=2 * size, backups=3)
    disk = Disk(sink)
    real = disk.write

    def fails_in_the_new_file(fd: int, data: Any) -> int:
        if sink._size == 0 and disk.calls >= 1:
            raise ENOSPC
        return real(fd, data)

    sink._os_write = fails_in_the_new_file  # type: ignore[method-assign]
    for n in range(3):  # two fit, the third goes to a new file, which is full
        sink.write(rec(n)) if n < 2 else None
    with pytest.raises(AuditUnavailableError):
        sink.write(rec(2))
    assert [r["n"] for r in records(Path(f"{path}.1"))] == [0, 1] and path.read_bytes() == b""
    assert sink.head[0] == 1
    sink._os_write = os.write  # type: ignore[method-assign]
    sink.close()  # the kept record, then the outage's (too long for the file after it: in a file of its own)
    files = [Path(f"{path}.2"), Path(f"{path}.1"), path]
    assert [[r.get("n") for r in records(file)] for file in files] == [[0, 1], [2], [None]]
    assert verify(files).ok


def test_a_stream_that_cannot_be_written_fails_closed() -> None:
    stream = io.StringIO()
    sink = StderrAuditSink(stream)
    sink.write(rec(0))
    stream.close()  # the collector went away
    with pytest.raises(AuditUnavailableError, match="I/O operation on closed file"):
        sink.write(rec(1))
    assert sink.admit() == "I/O operation on closed file"
    sink._stream = io.StringIO()
    assert sink.admit() is None
    assert [orjson.loads(line).get("n") for line in sink._stream.getvalue().splitlines()] == [1, None]
    sink.close()


def test_a_record_that_cannot_be_made_is_logged_and_the_others_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> dict[str, Any]:
        raise ValueError("no such record")

    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    audit.write(rec(0))
    audit.write(broken)
    audit.write(rec(1))
    audit.close()
    assert [r["n"] for r in records(path)] == [0, 1]
    assert "a record could not be made: ValueError('no such record')" in caplog.text
