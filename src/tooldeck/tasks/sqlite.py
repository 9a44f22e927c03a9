"""``SqliteTaskStore``: the ``TaskStore`` in one SQLite table (WAL mode), for tasks that outlive the process.

Every statement runs in one dedicated worker thread that owns the connection, so the event loop never waits on the
disk and statements run in the order they were issued. Each statement commits on its own (autocommit); a status move
is a single ``UPDATE ... WHERE status IN (<allowed sources>)``, so it is atomic even across processes sharing the file.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import sqlite3
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, Literal, TypeVar

import orjson

from ..protocol.errors import TaskStoreError, UnknownCursorError
from .record import STATUSES, TaskRecord, can_move
from .store import check_new, check_status, interrupted_result

T = TypeVar("T")

SCHEMA_VERSION = 1  # PRAGMA user_version of a file this module created
_BUSY_TIMEOUT = 10.0  # seconds a statement waits for another process's write lock
_COLUMNS = (
    "task_id",
    "owner",
    "status",
    "status_message",
    "created_at",
    "updated_at",
    "ttl_ms",
    "poll_interval_ms",
    "tool",
    "result",
    "error",
    "expires_at",
)
_SELECT = ", ".join(_COLUMNS)
_SCHEMA = """
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY NOT NULL,
    owner TEXT,                 -- NULL: an unbound task
    status TEXT NOT NULL,
    status_message TEXT,
    created_at REAL NOT NULL,   -- epoch seconds
    updated_at REAL NOT NULL,
    ttl_ms INTEGER,             -- NULL: never expires
    poll_interval_ms INTEGER,
    tool TEXT NOT NULL,
    result TEXT,                -- JSON
    error TEXT,                 -- JSON
    expires_at REAL             -- created_at + ttl (NULL: never), what expiry compares
);
CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, created_at, task_id);
CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_active ON tasks (owner) WHERE status IN ('working', 'input_required');
PRAGMA user_version = 1;
COMMIT;
"""
_LIVE = "(expires_at IS NULL OR expires_at > :now)"
_ACTIVE = "status IN ('working', 'input_required')"
_GET = f"SELECT {_SELECT} FROM tasks WHERE task_id = ?"
_GET_LIVE = f"SELECT {_SELECT} FROM tasks WHERE task_id = :id AND {_LIVE}"
_INSERT = f"INSERT INTO tasks ({_SELECT}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_LIST = f"SELECT {_SELECT} FROM tasks WHERE owner IS :owner AND {_LIVE} ORDER BY created_at, task_id LIMIT :limit"
_LIST_AFTER = (
    f"SELECT {_SELECT} FROM tasks WHERE owner IS :owner AND {_LIVE} AND (created_at, task_id) > (:created, :id) "
    "ORDER BY created_at, task_id LIMIT :limit"
)
_CURSOR = f"SELECT created_at FROM tasks WHERE task_id = :id AND owner IS :owner AND {_LIVE}"
_COUNT_ACTIVE = f"SELECT count(*) FROM tasks WHERE owner IS :owner AND {_ACTIVE} AND {_LIVE}"
_INTERRUPT = (
    "UPDATE tasks SET status = 'failed', status_message = :message, result = :result, error = NULL, "
    f"updated_at = :now WHERE {_ACTIVE}"
)


def _update_sql(status: str) -> str:
    # The allowed sources come from the status machine itself, so the WHERE clause is the atomic can_move check.
    sources = ", ".join(f"'{s}'" for s in STATUSES if can_move(s, status))
    return (
        "UPDATE tasks SET status = :status, status_message = :message, result = :result, error = :error, "
        f"updated_at = :now WHERE task_id = :id AND {_LIVE} AND status IN ({sources}) "
        # a move to the same status is a new statusMessage, or nothing
        "AND (status != :status OR (:message IS NOT NULL AND status_message IS NOT :message)) "
        f"RETURNING {_SELECT}"
    )


_UPDATES = {status: _update_sql(status) for status in STATUSES}


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _record(row: tuple[Any, ...]) -> TaskRecord:
    return TaskRecord(
        task_id=row[0],
        owner=row[1],
        status=row[2],
        status_message=row[3],
        created_at=row[4],
        updated_at=row[5],
        ttl_ms=row[6],
        poll_interval_ms=row[7],
        tool=row[8],
        result=None if row[9] is None else orjson.loads(row[9]),
        error=None if row[10] is None else orjson.loads(row[10]),
    )


class SqliteTaskStore:
    """Tasks in a SQLite file. Open it with ``store = await SqliteTaskStore.open(path)``; ``await store.close()``.

    ``synchronous="NORMAL"`` (the default) keeps every committed write through a crash or kill of the process;
    ``"FULL"`` also through a power loss, at the price of an fsync per write. ``":memory:"`` is accepted (tests).
    A call whose awaiting task is cancelled may still be applied: the statement is already queued to the worker.
    """

    def __init__(self, path: str, connection: sqlite3.Connection, worker: _Worker) -> None:
        """Internal: use ``open``, which makes the connection in the worker's thread."""
        self.path = path
        self._db = connection
        self._worker = worker
        self._closed = False

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    ) -> SqliteTaskStore:
        """Open (creating it if needed) the task store at ``path``; ``TaskStoreError`` naming it if that fails."""
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        name = os.fspath(path)
        worker = _Worker()
        try:
            connection = await worker.run(_connect, name, synchronous)
        except BaseException:
            worker.stop()
            raise
        return cls(name, connection, worker)

    async def create(self, record: TaskRecord) -> None:
        check_new(record)
        await self._run(self._create, record)

    async def get(self, task_id: str, now: float) -> TaskRecord | None:
        return await self._run(self._get, task_id, now)

    async def update(
        self,
        task_id: str,
        *,
        status: str,
        now: float,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        check_status(status)
        params = {
            "id": task_id,
            "status": status,
            "message": status_message,
            "result": _json(result),
            "error": _json(error),
            "now": now,
        }
        return await self._run(self._update, status, params)

    async def list(
        self, owner: str | None, now: float, after: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRecord]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return await self._run(self._list, owner, now, after, limit)

    async def count_active(self, owner: str | None, now: float) -> int:
        return await self._run(self._scalar, _COUNT_ACTIVE, {"owner": owner, "now": now})

    async def purge_expired(self, now: float) -> int:
        return await self._run(self._changes, "DELETE FROM tasks WHERE expires_at <= ?", (now,))

    async def interrupt_running(self, now: float, message: str) -> int:
        params = {"message": message, "result": _json(interrupted_result(message)), "now": now}
        return await self._run(self._changes, _INTERRUPT, params)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True  # refuse new calls; the ones already queued run before the connection closes
        try:
            await self._worker.run(self._db.close)
        finally:
            self._worker.stop()

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise TaskStoreError(f"the task store {self.path} is closed")
        try:
            return await self._worker.run(call, *args)
        except sqlite3.Error as exc:
            raise TaskStoreError(f"task store {self.path}: {exc}") from exc

    # Everything below runs in the worker thread.

    def _create(self, record: TaskRecord) -> None:
        row = (
            record.task_id,
            record.owner,
            record.status,
            record.status_message,
            record.created_at,
            record.updated_at,
            record.ttl_ms,
            record.poll_interval_ms,
            record.tool,
            _json(record.result),
            _json(record.error),
            record.expires_at,
        )
        try:
            self._db.execute(_INSERT, row)
        except sqlite3.IntegrityError:
            raise ValueError(f"task {record.task_id} already exists") from None

    def _get(self, task_id: str, now: float) -> TaskRecord | None:
        rows = self._db.execute(_GET, (task_id,)).fetchall()
        if not rows:
            return None
        expires_at = rows[0][11]
        if expires_at is not None and now >= expires_at:
            self._db.execute("DELETE FROM tasks WHERE task_id = ? AND expires_at <= ?", (task_id, now))
            return None
        return _record(rows[0])

    def _update(self, status: str, params: dict[str, Any]) -> TaskRecord | None:
        # fetchall, not fetchone: the UPDATE commits only once its statement has run to the end
        rows = self._db.execute(_UPDATES[status], params).fetchall()
        if not rows:  # unknown, expired, or a move that does not apply: report the task as it stands
            rows = self._db.execute(_GET_LIVE, params).fetchall()
        return _record(rows[0]) if rows else None

    def _list(self, owner: str | None, now: float, after: str | None, limit: int) -> builtins.list[TaskRecord]:
        params: dict[str, Any] = {"owner": owner, "now": now, "limit": limit}
        if after is None:
            rows = self._db.execute(_LIST, params).fetchall()
        else:
            params["id"] = after
            cursor = self._db.execute(_CURSOR, params).fetchall()
            if not cursor:
                raise UnknownCursorError()
            params["created"] = cursor[0][0]
            rows = self._db.execute(_LIST_AFTER, params).fetchall()
        return [_record(row) for row in rows]

    def _scalar(self, sql: str, params: dict[str, Any]) -> int:
        value: int = self._db.execute(sql, params).fetchall()[0][0]
        return value

    def _changes(self, sql: str, params: Any) -> int:
        return self._db.execute(sql, params).rowcount


class _Worker:
    """One daemon thread running calls in submission order, each answered on the caller's event loop.

    Leaner than a one-thread ``ThreadPoolExecutor`` + ``run_in_executor`` (no ``concurrent.futures.Future`` to wrap):
    about a quarter less per round trip (measured ~30 against ~43 µs on a 2-core VM). A daemon, so a store that was
    never closed does not keep the process alive; dying mid-statement is a crash that SQLite's WAL recovers from.
    """

    def __init__(self) -> None:
        self._calls: SimpleQueue[tuple[Any, ...] | None] = SimpleQueue()
        threading.Thread(target=self._serve, name="tooldeck-tasks", daemon=True).start()

    def run(self, call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, call, args))
        return future

    def stop(self) -> None:
        """The thread ends once the calls already queued have run."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            loop, future, call, args = item
            value, error = None, None
            try:
                value = call(*args)
            except BaseException as exc:  # handed to the caller, whatever it is
                error = exc
            try:
                loop.call_soon_threadsafe(_settle, future, value, error)
            except RuntimeError:  # that event loop is closed: nobody is waiting any more
                pass


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


def _connect(path: str, synchronous: str) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT)
    except sqlite3.Error as exc:
        raise TaskStoreError(_cannot_open(path, str(exc))) from None
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {synchronous}")
        version = db.execute("PRAGMA user_version").fetchall()[0][0]
        if version > SCHEMA_VERSION:
            raise TaskStoreError(_cannot_open(path, f"schema version {version} is newer than this tooldeck's"))
        columns = tuple(row[1] for row in db.execute("PRAGMA table_info(tasks)").fetchall())
        if columns and sorted(columns) != sorted(_COLUMNS):
            raise TaskStoreError(_cannot_open(path, f"its tasks table is not a tooldeck one (columns {columns})"))
        if version < SCHEMA_VERSION:
            db.executescript(_SCHEMA)
    except sqlite3.Error as exc:
        db.close()
        raise TaskStoreError(_cannot_open(path, str(exc))) from None
    except BaseException:
        db.close()
        raise
    return db


def _cannot_open(path: str, reason: str) -> str:
    if path != ":memory:":
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            reason = f"the directory {parent} does not exist"
        elif os.path.isdir(path):
            reason = "it is a directory"
    return f"cannot open the task store {path}: {reason}"
