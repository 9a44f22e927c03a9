"""MCP tasks (spec §7): the task record, its status machine, the ``TaskStore`` seam with its implementations, and
the ``PollInterval`` a task advertises.

``SqliteTaskStore`` is imported on first use, so a server without durable tasks never loads ``sqlite3``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import TaskStoreError, UnknownCursorError
from .memory import MemoryTaskStore
from .polling import PollInterval
from .record import STATUSES, TERMINAL, TaskRecord, can_move, new_task_id
from .store import TaskStore

if TYPE_CHECKING:
    from .sqlite import SqliteTaskStore

__all__ = [
    "STATUSES",
    "TERMINAL",
    "MemoryTaskStore",
    "PollInterval",
    "SqliteTaskStore",
    "TaskRecord",
    "TaskStore",
    "TaskStoreError",
    "UnknownCursorError",
    "can_move",
    "new_task_id",
]


def __getattr__(name: str) -> Any:
    if name == "SqliteTaskStore":
        from .sqlite import SqliteTaskStore

        return SqliteTaskStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
