"""The ``TaskStore`` seam: where task records live between polls, and the rules every store enforces.

Implementations: ``MemoryTaskStore`` (memory.py; tests and stdio), ``SqliteTaskStore`` (sqlite.py; durable, and
shared by the processes that open one file) and ``RedisTaskStore`` (redis.py; shared by a fleet's processes wherever
they run). All pass the one parametrized suite in ``tests/tasks/test_store.py``.
The clock is the caller's: every method whose answer depends on time takes ``now`` (epoch seconds). A task is expired
from ``now >= created_at + ttl``; an expired task is gone for every method, whether or not it has been purged yet.

Leases (record.py): the node that runs a task's work holds the task and renews its lease (``renew``); another node
finds the tasks whose lease ran out (``expired``) and takes each over (``take_over``), atomically, so of several
nodes racing for one task exactly one wins.
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol

from .record import MAX_RUNS, STATUSES, TaskRecord


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
        node: str | None = None,
    ) -> TaskRecord | None:
        """Move the task to ``status``, atomically; return the record as it now stands.

        The move applies only if ``can_move(current, status)`` and, when ``node`` is given (the task's own work
        settling it), only while the task is held by ``node``; it then writes ``status``, ``status_message``,
        ``result`` and ``error`` exactly as given (None clears) and ``updated_at = now``, and a terminal status clears
        ``arguments``. A move to the same status applies only when it brings a ``status_message`` that differs from
        the current one. A move that does not apply returns the current record unchanged: compare its ``status`` to
        know whether this call won. Of two concurrent moves to terminal statuses exactly one wins. None when the task
        is unknown or expired. ``ValueError`` if ``status`` is not one of ``STATUSES``.
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

    async def renew(
        self, node: str, task_ids: builtins.list[str], now: float, lease_until: float
    ) -> builtins.list[str]:
        """Extend to ``lease_until`` the lease of each task of ``task_ids`` (the ones ``node`` runs) that ``node``
        holds, live and in a ``HELD`` status; return the ids renewed. An id left out was finished or taken over
        elsewhere, or is gone. A lease that ran out is renewed too, unless another node has taken the task over."""
        ...

    async def expired(self, now: float, limit: int = 100) -> builtins.list[TaskRecord]:
        """Up to ``limit`` live tasks whose lease has run out at ``now`` (``TaskRecord.lease_expired``): the ones
        another node may take over, oldest lease first."""
        ...

    async def take_over(
        self, seen: TaskRecord, *, node: str, now: float, lease_until: float, failure: str | None = None
    ) -> TaskRecord | None:
        """Take over the task ``seen`` (a record ``expired`` returned), atomically: only if it is still held by the
        node ``seen`` names, on the same attempt, still unfinished and live, and its lease has run out at ``now``.
        Then it becomes ``seen.taken_over(node, now, lease_until, failure)``: ``node``'s until ``lease_until``, and
        ``working`` with one more attempt (the caller runs it again) or, with a ``failure`` message, ``failed`` with
        it as statusMessage and an ``isError`` result carrying it. The record as taken over; None if it was not
        (another node was first, or the task was renewed, finished, or is gone)."""
        ...

    async def close(self) -> None:
        """Release the store; calling it again does nothing. Any other method then raises ``TaskStoreError``."""
        ...


def check_status(status: str) -> None:
    if status not in STATUSES:
        raise ValueError(f"unknown task status {status!r}: expected one of {', '.join(STATUSES)}")


def check_new(record: TaskRecord) -> None:
    """What ``create`` refuses in every store: an unknown status, a negative ttl, an attempt out of range."""
    check_status(record.status)
    if record.ttl_ms is not None and record.ttl_ms < 0:
        raise ValueError(f"task {record.task_id}: ttl_ms must be None or >= 0, got {record.ttl_ms}")
    if type(record.attempts) is not int or not 1 <= record.attempts <= MAX_RUNS:
        raise ValueError(f"task {record.task_id}: attempts must be from 1 to {MAX_RUNS}, got {record.attempts!r}")
