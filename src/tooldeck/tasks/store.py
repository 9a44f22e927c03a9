"""The ``TaskStore`` seam: where task records live between polls, and the rules every store enforces.

Implementations: ``MemoryTaskStore`` (memory.py; tests and stdio) and ``SqliteTaskStore`` (sqlite.py; durable).
Both pass the one parametrized suite in ``tests/tasks/test_store.py``. The clock is the caller's: every method whose
answer depends on time takes ``now`` (epoch seconds). A task is expired from ``now >= created_at + ttl``; an expired
task is gone for every method, whether or not it has been purged yet.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from .record import STATUSES, TaskRecord


class TaskStore(Protocol):
    """Task records by id, bound to an owner, with atomic status moves and ttl expiry."""

    async def create(self, record: TaskRecord) -> None:
        """Store a new task. A task id that is already stored (even expired) raises ``ValueError``."""
        ...

    async def get(self, task_id: str, now: float) -> TaskRecord | None:
        """The task, or None when it is unknown or expired (an expired task may be purged on the way)."""
        ...

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
        """Move the task to ``status``, atomically; return the record as it now stands.

        The move applies only if ``can_move(current, status)``; it then writes ``status``, ``status_message``,
        ``result`` and ``error`` exactly as given (None clears) and ``updated_at = now``. A move to the same status
        applies only when it brings a ``status_message`` that differs from the current one. A move that does not
        apply returns the current record unchanged: compare its ``status`` to know whether this call won. Of two
        concurrent moves to terminal statuses exactly one wins. None when the task is unknown or expired.
        ``ValueError`` if ``status`` is not one of ``STATUSES``.
        """
        ...

    async def list(
        self, owner: str | None, now: float, after: str | None = None, limit: int = 50
    ) -> builtins.list[TaskRecord]:
        """Up to ``limit`` live tasks of ``owner`` in (created_at, task_id) order, starting after task ``after``.

        ``owner`` is the requestor's identity; None lists the unbound tasks (and only those). Ask for one more than
        a page to learn whether there is a next page. An ``after`` that is not a live task of ``owner`` raises
        ``UnknownCursorError``.
        """
        ...

    async def count_active(self, owner: str | None, now: float) -> int:
        """How many of ``owner``'s tasks are unexpired and not terminal (for a per-requestor cap)."""
        ...

    async def purge_expired(self, now: float) -> int:
        """Delete every expired task, whatever its status; return how many."""
        ...

    async def interrupt_running(self, now: float, message: str) -> int:
        """At start-up of a durable store: every non-terminal task (work that died with its process) becomes
        ``failed`` with ``message`` as statusMessage and an ``isError`` result carrying it; return how many."""
        ...

    async def close(self) -> None:
        """Release the store; calling it again does nothing. Any other method then raises ``TaskStoreError``."""
        ...


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"unknown task status {status!r}: expected one of {', '.join(STATUSES)}")


def check_new(record: TaskRecord) -> None:
    """What ``create`` refuses in every store: an unknown status, a negative ttl."""
    check_status(record.status)
    if record.ttl_ms is not None and record.ttl_ms < 0:
        raise ValueError(f"task {record.task_id}: ttl_ms must be None or >= 0, got {record.ttl_ms}")


def interrupted_result(message: str) -> dict[str, Any]:
    """The ``CallToolResult`` of a task whose work was lost."""
    return {"content": [{"type": "text", "text": message}], "isError": True}
