"""``MemoryTaskStore``: the ``TaskStore`` in dicts, for tests and for servers whose tasks need not outlive them.

Every method runs to completion without awaiting, so on one event loop each call is atomic by construction.
"""

from __future__ import annotations

import builtins
from bisect import bisect_left, bisect_right, insort
from typing import Any

from ..protocol.errors import TaskStoreError, UnknownCursorError
from .record import TaskRecord, can_move
from .store import check_new, check_status


class MemoryTaskStore:
    """Keeps tasks in memory; nothing survives the process. Use it from one event loop (it is not thread-safe)."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskRecord] = {}
        # per owner: (created_at, task_id) of every stored task, sorted, so a page is a bisect and a slice
        self._order: dict[str | None, list[tuple[float, str]]] = {}
        # per owner: ids of the non-terminal tasks, so count_active does not walk finished ones
        self._active: dict[str | None, set[str]] = {}
        self._closed = False

    async def create(self, record: TaskRecord) -> None:
        self._check_open()
        check_new(record)
        if record.task_id in self._tasks:
            raise ValueError(f"task {record.task_id} already exists")
        self._tasks[record.task_id] = record
        keys = self._order.setdefault(record.owner, [])
        key = (record.created_at, record.task_id)
        if not keys or keys[-1] < key:
            keys.append(key)  # the usual case: tasks are created in time order
        else:
            insort(keys, key)
        if not record.is_terminal:
            self._active.setdefault(record.owner, set()).add(record.task_id)

    async def get(self, task_id: str, now: float) -> TaskRecord | None:
        self._check_open()
        return self._live(task_id, now)

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
        self._check_open()
        check_status(status)
        current = self._live(task_id, now)
        if current is None:
            return None
        if not can_move(current.status, status) or (node is not None and current.node != node):
            return current
        if status == current.status and (status_message is None or status_message == current.status_message):
            return current
        moved = current.moved(status, now, status_message, result, error)
        self._tasks[task_id] = moved
        if moved.is_terminal:
            self._deactivate(moved)
        return moved

    async def list(
        self, owner: str | None, now: float, after: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRecord]:
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        keys = self._order.get(owner, [])
        start = 0
        if after is not None:
            cursor = self._tasks.get(after)
            if cursor is None or cursor.owner != owner or cursor.is_expired(now):
                raise UnknownCursorError()
            start = bisect_right(keys, (cursor.created_at, cursor.task_id))
        page: builtins.list[TaskRecord] = []
        for index in range(start, len(keys)):
            record = self._tasks[keys[index][1]]
            if not record.is_expired(now):
                page.append(record)
                if len(page) == limit:
                    break
        return page

    async def count_active(self, owner: str | None, now: float) -> int:
        self._check_open()
        tasks = self._tasks
        count = 0
        for task_id in self._active.get(owner, ()):
            if not tasks[task_id].is_expired(now):
                count += 1
        return count

    async def purge_expired(self, now: float) -> int:
        self._check_open()
        expired = [record for record in self._tasks.values() if record.is_expired(now)]
        for record in expired:
            self._delete(record)
        return len(expired)

    async def renew(
        self, node: str, task_ids: builtins.list[str], now: float, lease_until: float
    ) -> builtins.list[str]:
        self._check_open()
        renewed = []
        for task_id in task_ids:
            record = self._live(task_id, now)
            if record is not None and record.node == node and not record.is_terminal:
                self._tasks[task_id] = record.renewed(lease_until)
                renewed.append(task_id)
        return renewed

    async def expired(self, now: float, limit: int = 100) -> builtins.list[TaskRecord]:
        self._check_open()
        found = [r for r in self._held() if r.lease_expired(now) and not r.is_expired(now)]
        found.sort(key=lambda r: (r.lease_until is not None, r.lease_until or 0.0))
        return found[:limit]

    async def take_over(
        self, seen: TaskRecord, *, node: str, now: float, lease_until: float, failure: str | None = None
    ) -> TaskRecord | None:
        self._check_open()
        current = self._live(seen.task_id, now)
        if (current is None or current.node != seen.node or current.attempts != seen.attempts
                or not current.lease_expired(now)):  # fmt: skip
            return None
        taken = current.taken_over(node, now, lease_until, failure)
        self._tasks[taken.task_id] = taken
        if taken.is_terminal:
            self._deactivate(taken)
        return taken

    async def close(self) -> None:
        self._closed = True
        self._tasks.clear()
        self._order.clear()
        self._active.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise TaskStoreError("the task store is closed")

    def _live(self, task_id: str, now: float) -> TaskRecord | None:
        record = self._tasks.get(task_id)
        if record is not None and record.is_expired(now):
            self._delete(record)
            return None
        return record

    def _delete(self, record: TaskRecord) -> None:
        del self._tasks[record.task_id]
        keys = self._order[record.owner]
        del keys[bisect_left(keys, (record.created_at, record.task_id))]
        if not keys:
            del self._order[record.owner]
        self._deactivate(record)

    def _held(self) -> builtins.list[TaskRecord]:
        tasks = self._tasks
        return [tasks[task_id] for ids in self._active.values() for task_id in ids]

    def _deactivate(self, record: TaskRecord) -> None:
        active = self._active.get(record.owner)
        if active is not None:
            active.discard(record.task_id)
            if not active:
                del self._active[record.owner]
