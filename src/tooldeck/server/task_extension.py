"""The tasks extension ``io.modelcontextprotocol/tasks`` of 2026-07-28 (SEP-2663): a modern tools/call answered with
a task handle, and ``tasks/get``, ``tasks/update``, ``tasks/cancel``.

- **Negotiation, per request.** server/discover declares the extension when a tool may run as a task. A request
  that declares it in its own ``clientCapabilities.extensions`` may get a ``CreateTaskResult`` (``resultType:
  "task"``) for a task tool; one that does not gets the plain result, or -32021 naming the extension for a
  ``task="required"`` tool, and -32021 for tasks/get, tasks/update and tasks/cancel. The 2025 ``task`` param means
  nothing here.
- **The server decides.** A task tool called with the extension becomes a task at once. One declared
  ``ask_before_task=True`` first runs in its request — its questions are input-required rounds (rounds.py) — and
  becomes a task where it calls ``ctx.continue_as_task()``; if it never does, the request gets its result.
- **Questions inside a task** wait under ``inputRequests`` until ``tasks/update`` answers them (task_inputs.py).
- **Outcomes.** Any result (``isError`` too) is ``completed`` and tasks/get inlines it as ``result``; a JSON-RPC
  error is ``failed`` with ``error``. tasks/cancel acknowledges whatever the task's state.
- **Eras apart.** Tasks of this extension share the deck's task store (and its durability) with 2025 tasks, under
  an owner of their own (``owner_of``): each era's methods find only their own era's tasks, and another principal's
  task is as unknown as a task that never existed (-32602).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..protocol import envelope
from ..protocol.errors import InternalError, InvalidParamsError, MissingClientCapabilityError
from ..security.approvals import awaits_approver
from ..tasks.record import TaskRecord
from .request import RequestContext, Work

if TYPE_CHECKING:
    from ..tools.tool import Tool

TaskManager = Any  # task_manager.py's (which reaches this module through stateless.py: not imported here)

EXTENSION = envelope.TASKS_EXTENSION
NOT_FOUND = "Failed to retrieve task: Task not found"


def declared(rctx: RequestContext) -> bool:
    """Whether the request declared the tasks extension in its own clientCapabilities."""
    extensions = rctx.client_capabilities.get("extensions")
    return type(extensions) is dict and EXTENSION in extensions


def required(what: str) -> MissingClientCapabilityError:
    return MissingClientCapabilityError(
        f"{what} needs the {EXTENSION} extension: declare it in this request's clientCapabilities.extensions",
        {"extensions": {EXTENSION: {}}},
    )


def owner_of(rctx: RequestContext) -> str:
    """Who the request's extension tasks belong to in the store: the principal's id, in the extension's namespace
    (2025 tasks are stored under the bare id, or None), so neither era's methods reach the other's tasks."""
    owner = rctx.owner()
    return EXTENSION if owner is None else f"{EXTENSION}|{owner}"


# --- tools/call -------------------------------------------------------------------------------------------------


def call(rctx: RequestContext, tool: Tool, arguments: dict[str, Any]) -> Work | None:
    """A modern tools/call of a task tool: the work that makes its task (or, for an ``ask_before_task`` tool, runs it
    in the request until it becomes one); None when the request did not declare the extension (a plain call)."""
    if not declared(rctx):
        if tool.task_support == "required":
            raise required(f"Tool {tool.name!r} runs only as a task: calling it")
        return None
    manager = rctx.server.task_manager()
    if tool.ask_before_task:
        return Work(_ask_first(manager, rctx, tool, arguments), streams=bool(tool.injected))
    return Work(_create(manager, rctx, tool, arguments), own=True)


async def _create(manager: TaskManager, rctx: RequestContext, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    record = await manager.open(rctx, tool, arguments, owner_of(rctx))
    problem = await manager.recorded(rctx, record, tool, arguments)
    if problem is not None:
        return problem
    manager.launch(rctx, record.task_id, tool, arguments, admitted=not awaits_approver(record))
    return created(rctx, manager, record)


async def _ask_first(manager: TaskManager, rctx: RequestContext, tool: Tool,
                     arguments: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Run the call in its request; if the function calls ``ctx.continue_as_task()``, the task is opened there, the
    request gets its CreateTaskResult, and the rest of the run settles the task."""
    loop = asyncio.get_running_loop()
    became: asyncio.Future[TaskRecord] = loop.create_future()

    async def escalate() -> tuple[Any, str]:
        record = await manager.open(rctx, tool, arguments, owner_of(rctx), admit=False)  # admitted by the call
        became.set_result(record)
        return manager, record.task_id

    rctx.rounds.escalate = escalate  # type: ignore[attr-defined]
    job = loop.create_task(manager.pipeline.call_tool(rctx, tool, arguments))
    try:
        await asyncio.wait((job, became), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the request was cancelled while the call still ran in it
        if not became.done():
            job.cancel()
        raise
    if not became.done():
        became.cancel()
        return job.result()  # finished in its request: its result, or the end of a round (InputRequired)
    record = became.result()
    manager.adopt(rctx, record.task_id, job)
    return created(rctx, manager, record)


def created(rctx: RequestContext, manager: TaskManager, record: TaskRecord) -> dict[str, Any]:
    """The CreateTaskResult: the task itself, flat, with ``resultType: "task"``."""
    result = record.to_modern(manager.poll_interval.at(0))
    result["resultType"] = "task"
    result["_meta"] = {envelope.SERVER_INFO: rctx.server.server_info}
    return result


# --- tasks/get, tasks/update, tasks/cancel ------------------------------------------------------------------------


def get(rctx: RequestContext) -> Work:
    return Work(_get(rctx, _manager(rctx)), own=True)


def update(rctx: RequestContext) -> Work:
    return Work(_update(rctx, _manager(rctx)), own=True)


def cancel(rctx: RequestContext) -> Work:
    return Work(_cancel(rctx, _manager(rctx)), own=True)


METHODS = {"tasks/get": get, "tasks/update": update, "tasks/cancel": cancel}


def _manager(rctx: RequestContext) -> TaskManager:
    if not declared(rctx):
        raise required(rctx.method)
    if type(rctx.params.get("taskId")) is not str:
        raise InvalidParamsError(f'Invalid params: {rctx.method} needs "taskId" (a string)')
    return rctx.server.task_manager()


async def _find(rctx: RequestContext, manager: TaskManager) -> TaskRecord:
    record = await manager.lookup(rctx.params["taskId"], owner_of(rctx))
    if record is None:
        raise InvalidParamsError(NOT_FOUND)  # another principal's (or era's) task is indistinguishable from none
    return record


async def _get(rctx: RequestContext, manager: TaskManager) -> dict[str, Any]:
    record = await _find(rctx, manager)
    questions = None
    if record.status == "input_required" and manager.relay is not None and manager.relay.elsewhere(record):
        questions = await manager.relay.questions(record)  # kept by the process running the task
    return detailed(rctx, manager, record, questions)


def detailed(rctx: RequestContext, manager: TaskManager, record: TaskRecord,
             questions: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The GetTaskResult: the task as it stands, with what its status carries (``inputRequests``, ``result`` or
    ``error``), as a complete result. ``questions``: the ``inputRequests`` another process keeps for it."""
    wire = record.to_modern(manager.poll_interval.at(manager.clock() - record.created_at))
    if record.is_terminal:
        del wire["pollIntervalMs"]  # nothing left to poll for
    status = record.status
    if status == "input_required":
        inputs = manager.inputs.get(record.task_id)
        wire["inputRequests"] = (questions or {}) if inputs is None else inputs.requests()
    elif status == "completed" and record.result is not None:
        wire["result"] = {**record.result, "resultType": "complete"}
    elif status == "failed":
        error = record.error
        if error is None:  # work lost with its process (interrupted at start-up): there is no JSON-RPC error of its own
            error = InternalError(record.status_message or "The task failed").to_error()
        wire["error"] = error
    return envelope.complete(wire, rctx.server.server_info)


async def _update(rctx: RequestContext, manager: TaskManager) -> dict[str, Any]:
    responses = rctx.params.get("inputResponses")
    if type(responses) is not dict:
        raise InvalidParamsError('Invalid params: tasks/update needs "inputResponses", an object mapping the keys of '
                                 "the task's inputRequests to the client's results")  # fmt: skip
    record = await _find(rctx, manager)
    inputs = manager.inputs.get(record.task_id)
    if inputs is not None:
        if inputs.answer(responses):
            await manager.settle(record.task_id, "working")
    elif manager.relay is not None and manager.relay.elsewhere(record):
        await manager.relay.answer(record, responses)  # the task waits in the process running it
    return envelope.complete({}, rctx.server.server_info)


async def _cancel(rctx: RequestContext, manager: TaskManager) -> dict[str, Any]:
    record = await _find(rctx, manager)
    if not record.is_terminal:
        await manager.stop(record.task_id)
    return envelope.complete({}, rctx.server.server_info)
