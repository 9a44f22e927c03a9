"""The questions a running 2026-07-28 task waits on (tasks extension ``io.modelcontextprotocol/tasks``).

In a task, ``ctx.elicit``/``ctx.sample``/``ctx.list_roots`` send nothing: the question waits under its key in the
task's ``inputRequests`` (``tasks/get`` shows them all), the task is ``input_required`` while any waits, and
``tasks/update`` delivers the client's results (``answer``). Keys are never reused within a task: the next in call
order (``input-1``, ``input-2``, ...) or the tool's own, suffixed (``confirm-2``) when the tool asks under it again.
An answer for a key that is not waiting is ignored, as the extension asks; a malformed answer to one that is waiting
refuses the whole update (-32602) and answers nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..protocol.errors import ClientRequestError
from .rounds import checked_answer


class TaskInputs:
    """The outstanding questions of one task, the keys it has used, and the values it must see again (``memo``)."""

    __slots__ = ("_count", "_memos", "_used", "manager", "pending", "task_id")

    def __init__(self, manager: Any, task_id: str) -> None:  # the TaskManager (task_manager.py imports this module)
        self.manager = manager
        self.task_id = task_id
        self.pending: dict[str, tuple[str, dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}
        self._used: set[str] = set()
        self._count = 0
        self._memos: dict[str, Any] = {}

    # --- what Context calls (an asking.Asker, as server/rounds.py's Rounds is) -----------------------------------

    def key(self, key: str | None) -> str:
        """A key this task has never used: the next ``input-N``, or ``key`` (suffixed ``-2``, ``-3``... if used)."""
        if key is not None and (type(key) is not str or not key):
            raise ValueError(f"an input request key must be a non-empty string, got {key!r}")
        if key is None:
            self._count += 1
            key = f"input-{self._count}"
        found, n = key, 1
        while found in self._used:
            n += 1
            found = f"{key}-{n}"
        self._used.add(found)
        return found

    def memo(self, name: str, make: Callable[[], Any]) -> Any:
        if name not in self._memos:
            self._memos[name] = make()
        return self._memos[name]

    async def ask(self, key: str, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Park the question under ``key`` until ``tasks/update`` answers it (the task is ``input_required`` while
        any question waits); ``ClientRequestError`` if no answer comes within ``timeout`` seconds."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[key] = (method, params, future)
        if len(self.pending) == 1:
            await self.manager.settle(self.task_id, "input_required", status_message="Waiting for the client's input")
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            if self.pending.pop(key, None) is not None and not self.pending:
                await self.manager.settle(self.task_id, "working")
            raise ClientRequestError(f"the client did not answer {method} within {timeout:g} s") from None

    # --- what tasks/get and tasks/update call ---------------------------------------------------------------------

    def requests(self) -> dict[str, dict[str, Any]]:
        """``inputRequests``: every question still waiting, by key."""
        return {key: {"method": method, "params": params} for key, (method, params, _) in self.pending.items()}

    def answer(self, responses: dict[str, Any]) -> bool:
        """Deliver the results for waiting keys (others are ignored); True if this answered the last waiting one.
        A malformed result for a waiting key raises -32602 before anything is delivered."""
        taken = []
        for key, value in responses.items():
            entry = self.pending.get(key)
            if entry is None or entry[2].done():
                continue
            taken.append((key, entry[2], checked_answer(key, entry[0], value)))
        for key, future, result in taken:
            del self.pending[key]
            future.set_result(result)
        return bool(taken) and not self.pending

    def close(self) -> None:
        """The task ended: nothing waits any more."""
        for _, _, future in self.pending.values():
            future.cancel()
        self.pending.clear()
