"""``tooldeck call`` once the tool is known: the arguments converted through its inputSchema, progress and log
messages shown on stderr, a task-required tool (or any task-capable one with ``--task``) run as a task and polled to
its end, Ctrl-C passed on to the server (notifications/cancelled, or tasks/cancel for a task).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any

from ..protocol.errors import TargetError
from .arguments import tool_arguments
from .connection import Connection, RemoteError
from .listing import dumps, error_line, result_text
from .progress import Reporter

Output = tuple[list[str | bytes], int]


async def call_tool(
    connection: Connection, tool: dict[str, Any], tokens: list[str], *, as_json: bool, task: bool
) -> Output:
    name = tool["name"]
    arguments = tool_arguments(tokens, tool)
    support = (tool.get("execution") or {}).get("taskSupport") or "forbidden"
    if task and support == "forbidden":
        raise TargetError(f"{name} does not run as a task (its execution.taskSupport is forbidden); leave out --task")
    as_task = support == "required" or task
    if as_task and not connection.capability("tasks", "requests", "tools", "call"):
        raise TargetError(f"{name} {'needs' if support == 'required' else 'asks for'} a task, but the server does "
                          "not declare tasks for tools/call")  # fmt: skip
    reporter = Reporter()
    token = f"tooldeck-call-{os.getpid()}"
    watch = _Watch(token, reporter)
    connection.on_notification = watch.notified
    params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": {"progressToken": token}}
    try:
        result = await (_as_task(connection, params, watch) if as_task else _plainly(connection, params))
    except (RemoteError, TargetError) as exc:
        raise _with_hint(exc, connection) from None
    finally:
        reporter.clear()
    if result.get("isError"):
        print(f"tooldeck: {name}: {error_line(result)}", file=sys.stderr)
    text = dumps(result) if as_json else "" if result.get("isError") else result_text(result, tool)
    return [text] if text else [], 1 if result.get("isError") else 0


CONFIRM_HINT = (
    "tooldeck call asks for a confirmation only when stdin and stderr are terminals: run it there and type the code "
    "it shows"
)


def _with_hint(exc: RemoteError | TargetError, connection: Connection) -> Exception:
    """A refusal as the server worded it; when it wants the user's confirmation (security levels 8-10) and this
    command could not offer one (no terminal), it also says where the command can."""
    said = exc.message if isinstance(exc, RemoteError) else str(exc)
    if connection.interactive or "confirm" not in said:
        return exc
    return TargetError(f"{' '.join(said.split())}; {CONFIRM_HINT}")


class _Watch:
    """Routes the server's notifications during the call: progress for our token, log messages, our task's
    status (which also wakes the poll)."""

    def __init__(self, token: str, reporter: Reporter) -> None:
        self.token = token
        self.reporter = reporter
        self.task_id: str | None = None
        self.changed = asyncio.Event()

    def notified(self, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        method = message.get("method")
        if method == "notifications/progress" and params.get("progressToken") == self.token:
            self.reporter.progress(params.get("progress", 0), params.get("total"), params.get("message"))
        elif method == "notifications/message":
            self.reporter.log(params)
        elif method == "notifications/tasks/status" and self.task_id and params.get("taskId") == self.task_id:
            self.reporter.status(params)
            self.changed.set()


async def _plainly(connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
    request_id = connection.new_id()
    try:
        result: dict[str, Any] = await connection.request("tools/call", params, request_id)
    except asyncio.CancelledError:  # Ctrl-C: tell the server, which stops the work
        with contextlib.suppress(Exception):
            note = {"requestId": request_id, "reason": "interrupted from the command line"}
            await asyncio.wait_for(connection.notify("notifications/cancelled", note), 5)
        raise
    return result


async def _as_task(connection: Connection, params: dict[str, Any], watch: _Watch) -> dict[str, Any]:
    """Creates the task, shows its status while polling tasks/get at the server's pollInterval (or sooner, when a
    status notification comes), then fetches tasks/result."""
    await connection.listen()  # before the task exists: none of its notifications may go to a stream not yet open
    created = await connection.request("tools/call", {**params, "task": {}})
    task = created.get("task")
    if not isinstance(task, dict):
        return dict(created)  # the server ran it as a plain call
    watch.task_id = task_id = str(task["taskId"])
    watch.reporter.status(task)
    try:
        while task.get("status") == "working":
            watch.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.changed.wait(), (task.get("pollInterval") or 1000) / 1000)
            task = await connection.request("tasks/get", {"taskId": task_id})
            watch.reporter.status(task)
        result: dict[str, Any] = await connection.request("tasks/result", {"taskId": task_id})
    except asyncio.CancelledError:
        await _cancel(connection, task_id, watch.reporter)
        raise
    return result


async def _cancel(connection: Connection, task_id: str, reporter: Reporter) -> None:
    reporter.clear()
    try:
        task = await asyncio.wait_for(connection.request("tasks/cancel", {"taskId": task_id}), 5)
    except (RemoteError, TargetError, TimeoutError) as exc:
        print(f"tooldeck: task {task_id} could not be cancelled: {exc}", file=sys.stderr)
        return
    if task.get("status") != reporter.last_status:  # a status notification may have said it already
        print(f"tooldeck: task {task_id}: {task.get('status', 'cancelled')}", file=sys.stderr)
