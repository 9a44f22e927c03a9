"""tasks/get, tasks/result, tasks/list and tasks/cancel (spec §7), answered by the server's TaskManager."""

from __future__ import annotations

from typing import Any

from ...protocol.errors import MethodNotFoundError
from ..request import RequestContext, Work


def _manager(rctx: RequestContext) -> Any:
    capability = rctx.capabilities.get("tasks")
    if capability is None:
        raise MethodNotFoundError(f"Method not found: {rctx.method} (this server offers no tasks)")
    if rctx.method == "tasks/list" and "list" not in capability:
        raise MethodNotFoundError("Method not found: tasks/list (tasks are not bound to an identifiable requestor)")
    return rctx.server.task_manager()


# tooldeck's own coroutines over the task store: the runner may start them eagerly.


def get(rctx: RequestContext) -> Work:
    return Work(_manager(rctx).get(rctx, rctx.params), own=True)


def result(rctx: RequestContext) -> Work:
    return Work(_manager(rctx).result(rctx, rctx.params), own=True)


def list_tasks(rctx: RequestContext) -> Work:
    return Work(_manager(rctx).list(rctx, rctx.params), own=True)


def cancel(rctx: RequestContext) -> Work:
    return Work(_manager(rctx).cancel(rctx, rctx.params), own=True)
