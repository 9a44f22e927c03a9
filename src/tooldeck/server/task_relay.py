"""What a client asks of a task through another process than the one running it, carried to that process.

A task's work runs on the process that holds it (``takeover.py``); when the backends are shared, the client may ask
about it through any process. The store answers most of it (tasks/get, tasks/result, tasks/list); what only the
holder can do goes to it over the bus (``nodes.py``):

- ``tasks/cancel`` (both eras) records ``cancelled`` in the store where it arrives, then tells the holder
  (``task/halt``), which stops the work at once (else it would stop only at its next lease renewal) and tells the
  2025 session that created the task (``notifications/tasks/status``): the process that cancelled knows neither.
- ``tasks/get`` (2026-07-28) of a task waiting for input shows the questions its holder keeps (``task/questions``;
  none, if the holder does not answer in time).
- ``tasks/update`` (2026-07-28) delivers the client's answers to the holder (``task/answer``), which checks them (a
  malformed one refuses the update, -32602, as on the holder itself) and wakes the task.
"""

from __future__ import annotations

import logging
from typing import Any

from ..protocol import versions
from ..tasks.record import TaskRecord
from .nodes import Nodes, NodeUnreachableError

log = logging.getLogger("tooldeck.tasks")

HALT, QUESTIONS, ANSWER = "task/halt", "task/questions", "task/answer"


class TaskRelay:
    """One process's side: asks the holders of tasks, and answers for the tasks it holds. ``manager``: the
    TaskManager (task_manager.py, which makes the relay when the backends are shared)."""

    def __init__(self, manager: Any, nodes: Nodes) -> None:
        self.manager = manager
        self.nodes = nodes
        nodes.serve(HALT, self._halt)
        nodes.serve(QUESTIONS, self._questions)
        nodes.serve(ANSWER, self._answer)

    def elsewhere(self, record: TaskRecord) -> bool:
        """Whether another process holds the task (its work, its questions and the request that made it are there)."""
        return (
            record.node is not None and record.node != self.manager.node and record.task_id not in self.manager.running
        )

    # --- asking the holder --------------------------------------------------------------------------------------

    def cancelled(self, record: TaskRecord) -> None:
        """The task was recorded cancelled here: its holder stops the work."""
        if self.elsewhere(record):
            assert record.node is not None
            self.nodes.tell(record.node, HALT, record.task_id)

    async def questions(self, record: TaskRecord) -> dict[str, Any]:
        """The task's ``inputRequests``, as its holder keeps them (none if it does not answer)."""
        assert record.node is not None
        try:
            found = await self.nodes.ask(record.node, QUESTIONS, record.task_id)
        except NodeUnreachableError as exc:
            log.warning("task %s: %s", record.task_id, exc)
            return {}
        return found if type(found) is dict else {}

    async def answer(self, record: TaskRecord, responses: dict[str, Any]) -> None:
        """Deliver the client's answers to the holder; its refusal (-32602) is raised here."""
        assert record.node is not None
        try:
            await self.nodes.ask(record.node, ANSWER, {"task": record.task_id, "responses": responses})
        except NodeUnreachableError as exc:  # the holder is gone: its lease runs out and the task is taken over
            log.warning("task %s: %s", record.task_id, exc)

    # --- answering for the tasks held here ----------------------------------------------------------------------

    async def _halt(self, task_id: Any) -> None:
        manager = self.manager
        if type(task_id) is not str or task_id not in manager.running:
            return
        request = manager.requests.get(task_id)
        if request is not None and not versions.is_modern(request.revision):  # a 2026 task was announced already
            record = await manager.store.get(task_id, manager.clock())
            if record is not None and record.status == "cancelled":
                manager.announce(record)  # while its request is known here: to the session that created it
        manager.halt(task_id)

    def _questions(self, task_id: Any) -> dict[str, Any]:
        inputs = self.manager.inputs.get(task_id) if type(task_id) is str else None
        return {} if inputs is None else inputs.requests()

    async def _answer(self, args: Any) -> None:
        manager = self.manager
        task_id, responses = (args.get("task"), args.get("responses")) if type(args) is dict else (None, None)
        inputs = manager.inputs.get(task_id) if type(task_id) is str else None
        if inputs is not None and type(responses) is dict and inputs.answer(responses):
            await manager.settle(task_id, "working")
