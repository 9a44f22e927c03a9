"""The durable state of one MCP task (``TaskRecord``), its status machine, its lease, and task ids.

The status machine (spec §7.4): a task starts ``working``; ``working`` and ``input_required`` move to each other or to
a terminal status; ``completed``, ``failed`` and ``cancelled`` never change again.

The lease: a task that is not finished is *held* by the node (the process) that runs its work, until ``lease_until``;
that node renews the lease while the work runs. Another node may take the task over only once the lease has run out
(the holder stopped renewing: it died or stalled), and only from a status that holds a lease (``HELD``): to
``working``, to run it once more (``attempts`` counts the runs started, so it never reaches ``MAX_RUNS`` + 1), or to
``failed``. A holder's own moves apply only while it still holds the task, so a stalled node that wakes up cannot
overwrite what the node that took over recorded.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..protocol.record import Record

STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL = frozenset({"completed", "failed", "cancelled"})

HELD = tuple(s for s in STATUSES if s not in TERMINAL)  # the statuses in which a node holds the task under a lease
MAX_RUNS = 2  # a task is run at most twice: once, and once more by a node that took it over (idempotent tools only)

_ANY = frozenset(STATUSES)
# old status -> the statuses it may move to. A non-terminal status may "move" to itself: that is how its
# statusMessage changes (the store applies such a move only when it carries a different message).
_MOVES: dict[str, frozenset[str]] = {
    "working": _ANY,
    "input_required": _ANY,
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}


def can_move(old: str, new: str) -> bool:
    """Whether a task in status ``old`` may take status ``new``; False for anything that is not a status."""
    moves = _MOVES.get(old)
    return moves is not None and new in moves


def new_task_id() -> str:
    """A fresh task id: 128 bits from the operating system's CSPRNG, as 32 hex digits.

    Without an auth context the id is the only thing that guards a task, so it must be unguessable (spec §7.9).
    The random bytes are fetched 4 KiB at a time (one system call per 256 ids), each used once; a forked child
    starts afresh, so parent and child never hand out the same id.
    """
    global _random_hex, _unused
    if _unused == 0:
        _random_hex = os.urandom(4096).hex()
        _unused = len(_random_hex)
    _unused -= 32
    return _random_hex[_unused : _unused + 32]


_random_hex = ""
_unused = 0  # hex digits of _random_hex not handed out yet (they are taken from the end)


def _forget_random() -> None:
    global _unused
    _unused = 0


os.register_at_fork(after_in_child=_forget_random)


_formatted: dict[float, str] = {}  # the last few timestamps formatted: a task's are formatted again and again


def iso_utc(epoch: float) -> str:
    """``epoch`` seconds as ISO 8601 UTC with milliseconds: ``2025-11-25T10:30:00.123Z``."""
    text = _formatted.get(epoch)
    if text is None:
        seconds, millis = divmod(round(epoch * 1000), 1000)
        text = f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}.{millis:03d}Z"
        if len(_formatted) >= 256:
            _formatted.clear()
        _formatted[epoch] = text
    return text


class TaskRecord(Record):
    """One task as a store keeps it. A value: stores hand out new records on every change, never mutate one.

    - ``owner``: the authenticated principal the task is bound to (spec §7.9); None for an unbound task.
    - ``created_at`` / ``updated_at``: epoch seconds, from the caller's clock.
    - ``ttl_ms``: the actual retention from creation, in milliseconds; None keeps the task until it is deleted.
    - ``poll_interval_ms``: the pollInterval advertised when the task was created (a server whose interval adapts
      to the task's age advertises the current one instead: ``to_wire(poll_interval_ms=...)``).
    - ``tool``: the name of the tool the task runs.
    - ``result``: the final ``CallToolResult`` (``completed``, or ``failed`` with ``isError: true``).
    - ``error``: the JSON-RPC error object, when the call failed with a protocol error.
    - ``node``: the node id of the process that runs (or ran) the task's work; ``lease_until``: epoch seconds until
      which that node holds the task (None: no lease, so anyone may take the task over).
    - ``attempts``: how many times the work was started (1, or 2 once a node took the task over to run it again).
    - ``arguments``: the call's arguments, kept only for a tool that may be run again (``idempotentHint``) and only
      until the task ends; None otherwise.
    """

    __slots__ = (
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
        "node",
        "lease_until",
        "attempts",
        "arguments",
    )

    def __init__(
        self,
        *,
        task_id: str,
        tool: str,
        created_at: float,
        updated_at: float | None = None,
        status: str = "working",
        owner: str | None = None,
        status_message: str | None = None,
        ttl_ms: int | None = None,
        poll_interval_ms: int | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        node: str | None = None,
        lease_until: float | None = None,
        attempts: int = 1,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.task_id = task_id
        self.owner = owner
        self.status = status
        self.status_message = status_message
        self.created_at = created_at
        self.updated_at: float = created_at if updated_at is None else updated_at
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.tool = tool
        self.result = result
        self.error = error
        self.node = node
        self.lease_until = lease_until
        self.attempts = attempts
        self.arguments = arguments

    def moved(
        self,
        status: str,
        now: float,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord:
        """This task in ``status`` as of ``now``: a new record (whether the move is allowed is the store's check). A
        terminal status drops the arguments: the task will never run again."""
        return TaskRecord(
            task_id=self.task_id,
            owner=self.owner,
            status=status,
            status_message=status_message,
            created_at=self.created_at,
            updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
            tool=self.tool,
            result=result,
            error=error,
            node=self.node,
            lease_until=self.lease_until,
            attempts=self.attempts,
            arguments=None if status in TERMINAL else self.arguments,
        )

    def renewed(self, lease_until: float) -> TaskRecord:
        """This task with its lease extended to ``lease_until``: a new record, nothing else changed."""
        record = TaskRecord.__new__(TaskRecord)
        for name in TaskRecord.__slots__:
            setattr(record, name, getattr(self, name))
        record.lease_until = lease_until
        return record

    def lease_expired(self, now: float) -> bool:
        """Whether another node may take this task over at ``now``: it is held (not finished) and its holder's lease
        has run out (``now >= lease_until``), or it has none."""
        return self.status in HELD and (self.lease_until is None or now >= self.lease_until)

    def taken_over(self, node: str, now: float, lease_until: float, failure: str | None) -> TaskRecord:
        """This task taken over by ``node`` at ``now`` (whether it may be is the store's check): held by ``node`` until
        ``lease_until`` and ``working`` on its next run; or, with a ``failure`` message, ended ``failed`` with it."""
        if failure is not None:
            taken = self.moved("failed", now, failure, interrupted_result(failure))
        else:
            taken = self.moved("working", now)
            taken.attempts = self.attempts + 1
        taken.node = node
        taken.lease_until = lease_until
        return taken

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON: its fields by name, those that are None left out (``from_dict`` reads it back). What
        a record is when it crosses processes, on a bus."""
        return {name: value for name in TaskRecord.__slots__ if (value := getattr(self, name)) is not None}

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> TaskRecord:
        """The record ``to_dict`` made (a missing field is None, or its default)."""
        return cls(**fields)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float | None:
        """When the task may be deleted (epoch seconds), or None if it never expires."""
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    def is_expired(self, now: float) -> bool:
        """True from the instant its ttl has run out (``now >= expires_at``)."""
        return self.ttl_ms is not None and now >= self.created_at + self.ttl_ms / 1000

    def to_wire(self, poll_interval_ms: int | None = None) -> dict[str, Any]:
        """The MCP ``Task`` object (``tasks/get``, ``tasks/list``, ``CreateTaskResult.task``); ``poll_interval_ms``:
        the pollInterval to advertise instead of the stored one."""
        return self._wire("ttl", "pollInterval", poll_interval_ms)

    def to_modern(self, poll_interval_ms: int | None = None) -> dict[str, Any]:
        """The ``Task`` of the 2026-07-28 tasks extension (``ttlMs``, ``pollIntervalMs``); ``poll_interval_ms`` as in
        ``to_wire``."""
        return self._wire("ttlMs", "pollIntervalMs", poll_interval_ms)

    def _wire(self, ttl: str, poll: str, poll_interval_ms: int | None) -> dict[str, Any]:
        if poll_interval_ms is None:
            poll_interval_ms = self.poll_interval_ms
        wire: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message is not None:
            wire["statusMessage"] = self.status_message
        wire["createdAt"] = iso_utc(self.created_at)
        wire["lastUpdatedAt"] = iso_utc(self.updated_at)
        wire[ttl] = self.ttl_ms
        if poll_interval_ms is not None:
            wire[poll] = poll_interval_ms
        return wire


def interrupted_result(message: str) -> dict[str, Any]:
    """The ``CallToolResult`` of a task whose work was lost."""
    return {"content": [{"type": "text", "text": message}], "isError": True}
