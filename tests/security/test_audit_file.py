"""security/audit_file.py: one writer per trail (a second is refused, naming the first), files created 0600, the chain
continued across reopening and rotation, a cut-short last line cut off and recorded when the trail is reopened, a
device that is not a regular file, and the three fsync modes."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tooldeck.security.audit import AuditError, AuditUnavailableError, FileAuditSink, MemoryAuditSink, line_hash, verify


def rec(n: int, **more: Any) -> dict[str, Any]:
    return {"event": "call", "tool": "deploy", "n": n, **more}


def records(path: Path | str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines()]


def size_of_one() -> int:
    return len(MemoryAuditSink()._chain.encode(rec(0))) + 1


# --- one writer, 0600 ---------------------------------------------------------------------------------------------


def test_a_second_writer_of_a_trail_is_refused_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = FileAuditSink(path)
    with pytest.raises(AuditError) as caught:
        FileAuditSink(path)
    assert str(caught.value) == (
        f"{path}: the audit trail is in use by another process (pid {os.getpid()}); two writers would interleave two "
        "chains: give each server its own [audit] file"
    )
    first.write(rec(0))
    first.close()  # and with it the lock
    second = FileAuditSink(path)
    second.write(rec(1))
    second.close()
    assert [r["seq"] for r in records(path)] == [0, 1]


def test_rotation_keeps_the_one_lock(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = FileAuditSink(path, max_bytes=size_of_one(), backups=3)
    for n in range(3):
        first.write(rec(n))  # each record in a file of its own: the trail was moved aside twice
    with pytest.raises(AuditError, match="in use by another process"):
        FileAuditSink(path)
    first.close()


def test_the_trail_and_its_lock_file_are_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    umask = os.umask(0)  # what the files get is then exactly the mode they are created with
    try:
        sink = FileAuditSink(path, max_bytes=size_of_one(), backups=2)
        sink.write(rec(0))
        sink.write(rec(1))  # rotated: the new file too
        sink.close()
    finally:
        os.umask(umask)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"audit.jsonl": 0o600, "audit.jsonl.1": 0o600, ".audit.jsonl.lock": 0o600}


def test_a_trail_that_is_not_a_regular_file_is_locked_itself_and_cannot_rotate(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes needs a regular file: /dev/full is not one"):
        FileAuditSink("/dev/full", max_bytes=100)
    sink = FileAuditSink("/dev/full")
    with pytest.raises(AuditError, match="/dev/full: the audit trail is in use by another process;"):
        FileAuditSink("/dev/full")
    with pytest.raises(AuditUnavailableError, match=r"\(No space left on device\)"):  # a real failed write
        sink.write(rec(0))
    with pytest.raises(AuditError, match="could not be written"):
        sink.close()


def test_a_trail_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match=rf"^{tmp_path}/missing/.audit.jsonl.lock: cannot open the audit trail's lock "
                       "file: No such file or directory$"):  # fmt: skip
        FileAuditSink(tmp_path / "missing" / "audit.jsonl")


# --- continuing the chain -----------------------------------------------------------------------------------------


def test_close_writes_what_is_queued(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)

    async def on_a_loop() -> None:
        for n in range(300):
            audit.write(rec(n))  # queued for the end of the loop turn
        audit.close()  # before the turn ends

    asyncio.run(on_a_loop())
    assert len(records(path)) == 300


def test_rotation_keeps_the_chain_across_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path, max_bytes=3 * size_of_one() + 10, backups=10)
    for n in range(10):
        audit.write(rec(n))
    audit.close()
    names = sorted(p.name for p in tmp_path.glob("audit.jsonl*"))  # the lock file is hidden: the glob leaves it out
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    assert [len(records(tmp_path / n)) for n in names] == [1, 3, 3, 3]
    older, newer = Path(f"{path}.1").read_bytes().splitlines(), path.read_bytes().splitlines()
    assert orjson.loads(newer[0])["prev"] == line_hash(older[-1])
    report = verify([tmp_path / n for n in reversed(names)])
    assert (report.ok, report.records, report.files, report.problem) == (True, 10, 4, None)


def test_rotation_deletes_past_backups_and_the_rest_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path, max_bytes=2 * size_of_one() + 10, backups=2)
    for n in range(10):
        audit.write(rec(n))
    audit.close()
    assert sorted(p.name for p in tmp_path.glob("audit.jsonl*")) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    report = verify([path, f"{path}.2", f"{path}.1"])
    assert (report.ok, report.records, report.first_seq) == (True, 6, 4)


def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for run in ([0, 1, 2], [3, 4], [5, 6, 7]):
        audit = FileAuditSink(path)
        for n in run:
            audit.write(rec(n))
        audit.close()
    assert [r["seq"] for r in records(path)] == list(range(8))
    assert verify([path]).ok


def test_reopening_an_emptied_file_after_rotation_continues_from_the_backup(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    audit.write(rec(0, big="x" * 200_000))  # longer than one block read back
    audit.write(rec(1, big="y" * 200_000))
    audit.close()
    os.replace(path, f"{path}.1")
    path.write_bytes(b"")  # rotated, then the process stopped before writing
    audit = FileAuditSink(path, max_bytes=10**7)
    audit.write(rec(2))
    audit.close()
    assert records(path)[0]["seq"] == 2
    assert verify([path, f"{path}.1"]).records == 3


def test_reopening_after_an_interrupted_write_cuts_the_torn_record_off_and_records_that(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    for n in range(3):
        audit.write(rec(n))
    audit.close()
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # the writer was killed in the middle of its last write
    lost = data[data.rindex(b"\n", 0, len(data) - 1) + 1 : -40]
    assert (
        verify([path]).torn
        == f"{path}:3: a record cut short by an interrupted write ({len(lost)} bytes) is not counted"
    )

    audit = FileAuditSink(path)
    audit.write(rec(3))
    audit.close()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 4 and lines[:2] == data.splitlines()[:2]  # the torn bytes are gone
    interrupted = orjson.loads(lines[2])
    assert interrupted == {
        "seq": 2, "prev": line_hash(lines[1]), "time": interrupted["time"], "event": "interrupted-write",
        "reason": "the last line was a record cut short by an interrupted write (its call was never answered)",
        "line": 3, "lost_bytes": len(lost), "lost_sha256": hashlib.sha256(lost).hexdigest(),
    }  # fmt: skip
    assert records(path)[3]["n"] == 3
    report = verify([path])
    assert (report.ok, report.records, report.breaks, report.torn) == (True, 4, [], None)  # no break in the chain


def test_a_file_that_is_not_a_trail_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text("hello\n")
    with pytest.raises(AuditError, match=r"audit.jsonl: the last complete line is not an audit record"):
        FileAuditSink(path)
    FileAuditSink(tmp_path / "other.jsonl").close()  # the refused one let go of its lock: nothing is left held


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fsync": "always"}, "fsync must be one of 'never', 'each', 'interval', got 'always'"),
        ({"fsync_interval": 0}, "fsync_interval must be a positive number of seconds, got 0"),
        ({"max_bytes": 0}, "max_bytes must be a positive number of bytes (or None: never rotate), got 0"),
        ({"max_bytes": 100, "backups": 0}, "backups must be at least 1 when max_bytes is set"),
    ],
)
def test_bad_file_sink_options_are_refused(options: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        FileAuditSink(tmp_path / "audit.jsonl", **options)
    assert str(caught.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


# --- fsync --------------------------------------------------------------------------------------------------------


class Syncs:
    """os.fsync, noting the thread of each call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[threading.Thread] = []
        self.synced = threading.Event()
        real = os.fsync

        def fsync(fd: int) -> None:
            self.threads.append(threading.current_thread())
            real(fd)
            self.synced.set()

        monkeypatch.setattr(os, "fsync", fsync)


async def test_fsync_each_syncs_off_the_loop_before_the_batch_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs = Syncs(monkeypatch)
    audit = FileAuditSink(tmp_path / "audit.jsonl", fsync="each")
    batch = audit.write(rec(0))
    await batch  # type: ignore[misc]
    assert len(syncs.threads) == 1 and syncs.threads[0] is not threading.current_thread()
    await asyncio.gather(*{audit.write(rec(n)) for n in range(1, 4)})  # type: ignore[misc]
    assert len(syncs.threads) == 2
    audit.close()


async def test_with_fsync_each_a_call_cancelled_while_its_batch_syncs_leaves_the_others_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    real = os.fsync

    def slow(fd: int) -> None:
        started.set()
        assert release.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow)
    audit = FileAuditSink(tmp_path / "audit.jsonl", fsync="each")

    async def call(n: int) -> str:
        await audit.write(rec(n))  # type: ignore[misc]
        return "answered"

    first, second = asyncio.ensure_future(call(0)), asyncio.ensure_future(call(1))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    assert not first.done() and not second.done()  # both wait for the fsync
    first.cancel()
    release.set()
    assert await second == "answered"
    with pytest.raises(asyncio.CancelledError):
        await first
    audit.close()


async def test_fsync_interval_syncs_off_the_loop_when_it_falls_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs = Syncs(monkeypatch)
    audit = FileAuditSink(tmp_path / "audit.jsonl", fsync="interval", fsync_interval=0.01)
    assert audit.write(rec(0)) is None  # written at once, and answered before any fsync
    assert syncs.threads == []
    assert await asyncio.get_running_loop().run_in_executor(None, syncs.synced.wait, 10)
    assert syncs.threads[0] is not threading.current_thread()
    audit.close()


@pytest.mark.parametrize("mode", ["never", "each", "interval"])
def test_flush_fsyncs_unless_the_mode_is_never(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    audit = FileAuditSink(tmp_path / "audit.jsonl", fsync=mode, fsync_interval=3600)
    syncs = Syncs(monkeypatch)
    audit.write(rec(0))  # without a loop: "each" fsyncs at once, "interval" when it is due (not yet)
    assert len(syncs.threads) == (mode == "each")
    audit.flush()
    assert len(syncs.threads) == {"never": 0, "each": 2, "interval": 1}[mode]
    audit.close()
