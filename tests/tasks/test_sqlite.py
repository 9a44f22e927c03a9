"""What only the SQLite store promises: durability through SIGKILL, clear open errors, atomicity across connections."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from samples import T0
from tooldeck.protocol.errors import TooldeckError
from tooldeck.tasks import SqliteTaskStore, TaskRecord, TaskStoreError

RESULT = {"content": [{"type": "text", "text": "42"}], "isError": False}
ROOT = Path(__file__).resolve().parents[2]

# Creates task t1 (and completes it when asked), then kills its own process: no close, no checkpoint, no atexit.
DIE_AFTER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from tooldeck.tasks import SqliteTaskStore, TaskRecord

    async def main(path, complete):
        store = await SqliteTaskStore.open(path)
        await store.create(TaskRecord(task_id="t1", tool="slow", owner="alice", created_at=1764066600.0,
                                      node="dead", lease_until=1764066630.0))
        if complete:
            await store.update("t1", status="completed", now=1764066601.5, result={complete_result})
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main(sys.argv[1], sys.argv[2] == "complete"))
    """
).replace("{complete_result}", repr(RESULT))


def die_after_writing(path: Path, mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", DIE_AFTER, str(path), mode], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout == "written\n"
    assert Path(f"{path}-wal").exists()  # the process died with its writes still in the WAL, never checkpointed


async def test_a_completed_task_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    die_after_writing(path, "complete")
    store = await SqliteTaskStore.open(path)
    try:
        assert await store.get("t1", T0 + 2) == TaskRecord(
            task_id="t1",
            tool="slow",
            owner="alice",
            status="completed",
            created_at=T0,
            updated_at=T0 + 1.5,
            result=RESULT,
            node="dead",
            lease_until=T0 + 30,
        )
        assert await store.expired(T0 + 1000) == []
    finally:
        await store.close()


async def test_a_task_left_working_by_a_killed_process_is_taken_over_after_its_lease(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    die_after_writing(path, "leave-working")
    store = await SqliteTaskStore.open(path)
    try:
        left = await store.get("t1", T0 + 2)
        assert left is not None and (left.status, left.node, left.lease_until) == ("working", "dead", T0 + 30)
        assert await store.expired(T0 + 29.9) == []  # its lease: the dead process's tasks wait for it to run out
        (seen,) = await store.expired(T0 + 30)
        failed = await store.take_over(seen, node="alive", now=T0 + 30, lease_until=T0 + 60, failure="it stopped")
        assert failed is not None
        assert await store.get("t1", T0 + 31) == failed
        assert (failed.status, failed.status_message, failed.updated_at, failed.node) == (
            "failed",
            "it stopped",
            T0 + 30,
            "alive",
        )
        assert failed.result == {"content": [{"type": "text", "text": "it stopped"}], "isError": True}
    finally:
        await store.close()


async def test_tasks_persist_across_a_clean_close(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = await SqliteTaskStore.open(path, synchronous="FULL")
    record = TaskRecord(task_id="t1", tool="add", owner="alice", created_at=T0, ttl_ms=60_000, poll_interval_ms=5)
    await store.create(record)
    await store.close()
    again = await SqliteTaskStore.open(path)
    try:
        assert await again.get("t1", T0) == record
        assert [r.task_id for r in await again.list("alice", T0)] == ["t1"]
    finally:
        await again.close()


async def test_complete_versus_cancel_across_two_connections_has_one_winner(tmp_path: Path) -> None:
    # Two stores on one file: two connections in two threads, so only the UPDATE's own WHERE clause decides.
    path = tmp_path / "tasks.db"
    first, second = await SqliteTaskStore.open(path), await SqliteTaskStore.open(path)
    try:
        for n in range(100):
            task_id = f"race-{n}"
            await first.create(TaskRecord(task_id=task_id, tool="add", created_at=T0))
            got = await asyncio.gather(
                first.update(task_id, status="completed", now=T0 + 1, result=RESULT),
                second.update(task_id, status="cancelled", now=T0 + 1, status_message="Cancelled"),
            )
            assert all(r is not None for r in got)
            won = [r for r, status in zip(got, ("completed", "cancelled"), strict=True) if r and r.status == status]
            assert len(won) == 1, got
            assert await first.get(task_id, T0 + 2) == await second.get(task_id, T0 + 2) == won[0]
    finally:
        await first.close()
        await second.close()


async def test_takeover_across_two_connections_has_one_winner(tmp_path: Path) -> None:
    # Two stores on one file, as two processes: each sees every task expired and tries to take all of them over.
    path = tmp_path / "tasks.db"
    first, second = await SqliteTaskStore.open(path), await SqliteTaskStore.open(path)
    try:
        for n in range(100):
            await first.create(TaskRecord(task_id=f"t{n:03d}", tool="add", created_at=T0, node="dead",
                                          lease_until=T0 + 30, arguments={"n": n}))  # fmt: skip
        seen = await first.expired(T0 + 30), await second.expired(T0 + 30)
        assert seen[0] == seen[1] and len(seen[0]) == 100

        async def take_all(store: SqliteTaskStore, node: str) -> list[str]:
            taken = await asyncio.gather(*(store.take_over(r, node=node, now=T0 + 30, lease_until=T0 + 60)
                                           for r in seen[0]))  # fmt: skip
            return [r.task_id for r in taken if r is not None]

        won = await asyncio.gather(take_all(first, "a"), take_all(second, "b"))
        assert sorted(won[0] + won[1]) == [f"t{n:03d}" for n in range(100)]  # every task taken over exactly once
        for store, node, ids in ((first, "a", won[0]), (second, "b", won[1])):
            for task_id in ids:
                record = await store.get(task_id, T0 + 31)
                assert record is not None and (record.node, record.attempts, record.status) == (node, 2, "working")
    finally:
        await first.close()
        await second.close()


async def test_renewal_against_takeover_across_two_connections_never_loses_both_ways(tmp_path: Path) -> None:
    # The holder renews while another process takes over: either the renewal lands first (the takeover is refused)
    # or the takeover does (the renewal leaves the task out, and the holder knows it lost it). Never both.
    path = tmp_path / "tasks.db"
    holder, taker = await SqliteTaskStore.open(path), await SqliteTaskStore.open(path)
    try:
        for n in range(100):
            task_id = f"t{n:03d}"
            await holder.create(TaskRecord(task_id=task_id, tool="add", created_at=T0, node="h", lease_until=T0 + 30))
            (seen,) = await taker.expired(T0 + 30)
            renewed, taken = await asyncio.gather(holder.renew("h", [task_id], T0 + 30, T0 + 60),
                                                  taker.take_over(seen, node="t", now=T0 + 30, lease_until=T0 + 60,
                                                                  failure="stopped"))  # fmt: skip
            assert (renewed == [task_id]) != (taken is not None), (renewed, taken)
            record = await holder.get(task_id, T0 + 31)
            assert record is not None and record.node == ("h" if renewed else "t")
    finally:
        await holder.close()
        await taker.close()


# A tasks table as tooldeck wrote it before leases (schema version 1), with one finished and one unfinished task.
SCHEMA_V1 = """
CREATE TABLE tasks (task_id TEXT PRIMARY KEY NOT NULL, owner TEXT, status TEXT NOT NULL, status_message TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, ttl_ms INTEGER, poll_interval_ms INTEGER, tool TEXT NOT NULL,
    result TEXT, error TEXT, expires_at REAL);
CREATE INDEX tasks_by_owner ON tasks (owner, created_at, task_id);
CREATE INDEX tasks_by_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX tasks_active ON tasks (owner) WHERE status IN ('working', 'input_required');
INSERT INTO tasks VALUES ('done', 'alice', 'completed', NULL, 1764066600.0, 1764066601.0, NULL, 50, 'add',
    '{"content":[],"isError":false}', NULL, NULL);
INSERT INTO tasks VALUES ('left', 'alice', 'working', 'step 1', 1764066600.0, 1764066600.5, 60000, 50, 'slow',
    NULL, NULL, 1764066660.0);
PRAGMA user_version = 1;
"""


def version_1_file(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA_V1)
    db.close()


async def test_a_version_1_file_is_migrated_and_its_tasks_kept(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    version_1_file(path)
    store = await SqliteTaskStore.open(path)
    try:
        done = await store.get("done", T0 + 2)
        assert done == TaskRecord(task_id="done", owner="alice", status="completed", created_at=T0, updated_at=T0 + 1,
                                  poll_interval_ms=50, tool="add", result={"content": [], "isError": False})  # fmt: skip
        left = await store.get("left", T0 + 2)
        assert left is not None and (left.status, left.node, left.lease_until, left.attempts) == (
            "working", None, None, 1)  # fmt: skip
        # Left by a process without a lease: the first node that looks takes it over.
        assert [r.task_id for r in await store.expired(T0 + 2)] == ["left"]
        await store.create(TaskRecord(task_id="new", tool="add", created_at=T0, node="n1", lease_until=T0 + 30,
                                      arguments={"a": 1}))  # fmt: skip
        assert (await store.get("new", T0)).arguments == {"a": 1}  # type: ignore[union-attr]
    finally:
        await store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (2,)
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"tasks_by_node", "tasks_by_lease", "tasks_active"} <= indexes
    finally:
        db.close()
    again = await SqliteTaskStore.open(path)  # a migrated file opens as it is
    await again.close()


async def test_two_processes_opening_a_version_1_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    version_1_file(path)
    stores = await asyncio.gather(*(SqliteTaskStore.open(path) for _ in range(4)))  # four connections, four threads
    try:
        for store in stores:
            assert [r.task_id for r in await store.list("alice", T0 + 2)] == ["done", "left"]
    finally:
        for store in stores:
            await store.close()


async def test_statements_run_off_the_event_loop_thread(tmp_path: Path) -> None:
    store = await SqliteTaskStore.open(tmp_path / "tasks.db")
    try:
        with pytest.raises(sqlite3.ProgrammingError, match="thread"):
            store._db.execute("SELECT 1")  # the connection belongs to the worker thread
        assert any(t.name.startswith("tooldeck-tasks") for t in threading.enumerate())
    finally:
        await store.close()


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    return text


async def test_a_missing_directory_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "tasks.db"
    with pytest.raises(TaskStoreError) as caught:
        await SqliteTaskStore.open(path)
    assert isinstance(caught.value, TooldeckError)
    assert one_line(caught.value) == f"cannot open the task store {path}: the directory {path.parent} does not exist"


async def test_a_file_that_is_not_a_database_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the tasks you are looking for\n" * 100)
    with pytest.raises(TaskStoreError) as caught:
        await SqliteTaskStore.open(path)
    assert one_line(caught.value) == f"cannot open the task store {path}: file is not a database"
    assert path.read_text().startswith("these are not")  # left as it was


async def test_a_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskStoreError) as caught:
        await SqliteTaskStore.open(tmp_path)
    assert one_line(caught.value) == f"cannot open the task store {tmp_path}: it is a directory"


async def test_another_applications_tasks_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT)")
    db.close()
    with pytest.raises(TaskStoreError, match=r"other\.db: its tasks table is not a tooldeck one"):
        await SqliteTaskStore.open(path)


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(TaskStoreError, match="schema version 99 is newer than this tooldeck's"):
        await SqliteTaskStore.open(path)


async def test_synchronous_must_be_normal_or_full(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous must be 'NORMAL' or 'FULL'"):
        await SqliteTaskStore.open(tmp_path / "tasks.db", synchronous="OFF")  # type: ignore[arg-type]


async def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = await SqliteTaskStore.open(path)
    await store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()


def test_open_files_are_released_on_close(tmp_path: Path) -> None:
    async def cycle() -> None:
        for _ in range(50):
            store = await SqliteTaskStore.open(tmp_path / "tasks.db")
            await store.close()

    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    asyncio.run(cycle())
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) <= before + 2
