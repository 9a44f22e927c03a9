"""``SqliteTaskStore``: the ``TaskStore`` in one SQLite table (WAL mode), for tasks that outlive the process.

Every statement runs in one dedicated worker thread that owns the connection, so the event loop never waits on the
disk and statements run in the order they were issued. Each statement commits on its own (autocommit); a status move
is a single ``UPDATE ... WHERE status IN (<allowed sources>)``, and a takeover a single ``UPDATE ... WHERE status IN
(<held statuses>) AND <lease ran out> AND node IS <seen> AND attempts = <seen>``, both written from record.py's tables,
so each is atomic even across processes sharing the file.

Schema versions (``PRAGMA user_version``): 1, the task table; 2 adds the lease (``node``, ``lease_until``,
``attempts``, ``arguments``). A file of version 1 is migrated when it is opened, under the write lock, so two
processes opening it at once migrate it once; its unfinished tasks have no lease, so the first node that looks takes
them over (they were left by a process of an older tooldeck, which held no lease).
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
from .record import HELD, STATUSES, TaskRecord, can_move
from .store import check_new, check_status

T = TypeVar("T")

SCHEMA_VERSION = 2  # PRAGMA user_version of a file this module created
_BUSY_TIMEOUT = 10.0  # seconds a statement waits for another process's write lock
_COLUMNS_V1 = (
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
_COLUMNS = (*_COLUMNS_V1, "node", "lease_until", "attempts", "arguments")
_COLUMNS_OF = {1: _COLUMNS_V1, 2: _COLUMNS}  # schema version -> the columns of its tasks table
_SELECT = ", ".join(_COLUMNS)
_ACTIVE = f"status IN ({', '.join(repr(s) for s in HELD)})"  # the statuses that hold a lease: 'working', ...
_TABLE = """
CREATE TABLE tasks (
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
)"""
_INDEXES_V1 = (
    "CREATE INDEX IF NOT EXISTS tasks_by_owner ON tasks (owner, created_at, task_id)",
    "CREATE INDEX IF NOT EXISTS tasks_by_expiry ON tasks (expires_at) WHERE expires_at IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS tasks_active ON tasks (owner) WHERE {_ACTIVE}",
)
_TO_V2 = (
    "ALTER TABLE tasks ADD COLUMN node TEXT",  # the node id holding the task (or that last held it)
    "ALTER TABLE tasks ADD COLUMN lease_until REAL",  # epoch seconds; NULL: no lease, anyone may take it over
    "ALTER TABLE tasks ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1",  # runs started
    "ALTER TABLE tasks ADD COLUMN arguments TEXT",  # JSON, kept while an idempotent tool's task may run again
    f"CREATE INDEX IF NOT EXISTS tasks_by_node ON tasks (node) WHERE {_ACTIVE}",
    f"CREATE INDEX IF NOT EXISTS tasks_by_lease ON tasks (lease_until) WHERE {_ACTIVE}",
)
_LIVE = "(expires_at IS NULL OR expires_at > :now)"
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
_RENEW = (
    "UPDATE tasks SET lease_until = :until WHERE task_id IN (SELECT value FROM json_each(:ids)) AND node = :node "
    f"AND {_ACTIVE} AND {_LIVE} RETURNING task_id"
)
# TaskRecord.lease_expired: held, and no lease or one that has run out (NULLs first: they have no holder at all)
_LEASE_EXPIRED = f"{_ACTIVE} AND (lease_until IS NULL OR lease_until <= :now)"
_EXPIRED = f"SELECT {_SELECT} FROM tasks WHERE {_LEASE_EXPIRED} AND {_LIVE} ORDER BY lease_until LIMIT :limit"
# TaskRecord.taken_over, guarded by what the taker saw: the same holder on the same attempt, the lease still out
_TAKE_OVER = (
    "UPDATE tasks SET node = :node, lease_until = :until, updated_at = :now, status = :status, "
    "status_message = :message, result = :result, error = NULL, arguments = :arguments, attempts = :attempts "
    f"WHERE task_id = :id AND {_LEASE_EXPIRED} AND {_LIVE} AND node IS :seen_node AND attempts = :seen_attempts "
    f"RETURNING {_SELECT}"
)


def _update_sql(status: str) -> str:
    # The allowed sources come from the status machine itself, so the WHERE clause is the atomic can_move check.
    sources = ", ".join(f"'{s}'" for s in STATUSES if can_move(s, status))
    arguments = ", arguments = NULL" if status not in HELD else ""  # a finished task never runs again
    return (
        "UPDATE tasks SET status = :status, status_message = :message, result = :result, error = :error, "
        f"updated_at = :now{arguments} WHERE task_id = :id AND {_LIVE} AND status IN ({sources}) "
        # a move to the same status is a new statusMessage, or nothing
        "AND (status != :status OR (:message IS NOT NULL AND status_message IS NOT :message)) "
        # the task's own work settles it only while its node holds it
        "AND (:node IS NULL OR node = :node) "
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
        node=row[12],
        lease_until=row[13],
        attempts=row[14],
        arguments=None if row[15] is None else orjson.loads(row[15]),
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
        node: str | None = None,
    ) -> TaskRecord | None:
        check_status(status)
        params = {
            "id": task_id,
            "status": status,
            "message": status_message,
            "result": _json(result),
            "error": _json(error),
            "now": now,
            "node": node,
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

    async def renew(
        self, node: str, task_ids: builtins.list[str], now: float, lease_until: float
    ) -> builtins.list[str]:
        params = {"ids": orjson.dumps(task_ids).decode(), "node": node, "now": now, "until": lease_until}
        return await self._run(self._column, _RENEW, params)

    async def expired(self, now: float, limit: int = 100) -> builtins.list[TaskRecord]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return await self._run(self._records, _EXPIRED, {"now": now, "limit": limit})

    async def take_over(
        self, seen: TaskRecord, *, node: str, now: float, lease_until: float, failure: str | None = None
    ) -> TaskRecord | None:
        taken = seen.taken_over(node, now, lease_until, failure)  # what the row becomes, if the WHERE lets it
        params = {
            "id": seen.task_id,
            "now": now,
            "node": node,
            "until": lease_until,
            "status": taken.status,
            "message": failure,
            "result": _json(taken.result),
            "arguments": _json(taken.arguments),
            "attempts": taken.attempts,
            "seen_node": seen.node,
            "seen_attempts": seen.attempts,
        }
        rows = await self._run(self._records, _TAKE_OVER, params)
        return rows[0] if rows else None

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
            record.node,
            record.lease_until,
            record.attempts,
            _json(record.arguments),
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

    def _column(self, sql: str, params: dict[str, Any]) -> builtins.list[Any]:
        return [row[0] for row in self._db.execute(sql, params).fetchall()]

    def _records(self, sql: str, params: dict[str, Any]) -> builtins.list[TaskRecord]:
        # fetchall, not fetchone: an UPDATE ... RETURNING commits only once its statement has run to the end
        return [_record(row) for row in self._db.execute(sql, params).fetchall()]


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
        version = _check_schema(db, path)
        if version < SCHEMA_VERSION:
            db.execute("BEGIN IMMEDIATE")  # the write lock: of two processes opening an old file, one migrates it
            try:
                _migrate(db, _check_schema(db, path))  # read again under the lock: it may be migrated already
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
    except sqlite3.Error as exc:
        db.close()
        raise TaskStoreError(_cannot_open(path, str(exc))) from None
    except BaseException:
        db.close()
        raise
    return db


def _check_schema(db: sqlite3.Connection, path: str) -> int:
    """The file's schema version, if this tooldeck can use it (or migrate it); ``TaskStoreError`` otherwise."""
    version: int = db.execute("PRAGMA user_version").fetchall()[0][0]
    if version > SCHEMA_VERSION:
        raise TaskStoreError(_cannot_open(path, f"schema version {version} is newer than this tooldeck's"))
    columns = tuple(row[1] for row in db.execute("PRAGMA table_info(tasks)").fetchall())
    if columns and sorted(columns) != sorted(_COLUMNS_OF.get(version, ())):
        raise TaskStoreError(_cannot_open(path, f"its tasks table is not a tooldeck one (columns {columns})"))
    return version


def _migrate(db: sqlite3.Connection, version: int) -> None:
    """Bring a file of schema ``version`` to ``SCHEMA_VERSION`` (inside the caller's transaction)."""
    if version < 1:
        db.execute(_TABLE)
        for index in _INDEXES_V1:
            db.execute(index)
    if version < 2:
        for statement in _TO_V2:
            db.execute(statement)


def _cannot_open(path: str, reason: str) -> str:
    if path != ":memory:":
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            reason = f"the directory {parent} does not exist"
        elif os.path.isdir(path):
            reason = "it is a directory"
    return f"cannot open the task store {path}: {reason}"
