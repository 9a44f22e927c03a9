"""tools/list and tools/call (spec: server/tools), plain or task-augmented (spec §7)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from ...protocol import revisions
from ...protocol.errors import InvalidParamsError, MethodNotFoundError
from ..pipeline import Call
from ..request import RequestContext, Work
from .listing import listing


def list_tools(rctx: RequestContext) -> dict[str, Any]:
    return listing(rctx, rctx.server.tools, "tools")


def call_tool(rctx: RequestContext) -> Work:
    """Look the tool up (unknown: -32602 at once) and hand the rest of the call to the pipeline."""
    params = rctx.params
    name = params.get("name")
    if type(name) is not str:
        raise InvalidParamsError('Invalid params: tools/call needs "name" (a string)')
    server = rctx.server
    tool = server.tools.get(name)
    if tool is None:
        return _unknown(rctx, name)
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict:
        raise InvalidParamsError('Invalid params: tools/call "arguments" must be an object')
    if "_meta" in params:
        rctx.progress_token()  # a malformed progress token is a -32602 now, not a failure later
    state = rctx.state  # (what rctx.capabilities and rctx.revision read: one attribute each, on every call)
    capabilities = state.capabilities
    if "tasks" in capabilities:  # without the capability a "task" field is ignored (MUST)
        task = params.get("task")
        if task is not None:
            if tool.task_support == "forbidden":
                raise MethodNotFoundError(f"Tool {name!r} does not support task-augmented calls")
            if type(task) is not dict or not _valid_ttl(task.get("ttl")):
                raise InvalidParamsError('Invalid params: "task" must be an object with an optional integer "ttl" >= 0')
            # tooldeck's own code up to the point where the tool runs in a task of its own: it may start eagerly
            return Work(server.task_manager().create(rctx, tool, arguments, task), own=True)
        if tool.task_support == "required":
            raise MethodNotFoundError(f'Tool {name!r} must be called as a task (add "task": {{}} to the params)')
    elif "extensions" in capabilities and tool.task_support != "forbidden":  # 2026-07-28, where tasks are offered
        from .. import task_extension

        extended = task_extension.call(rctx, tool, arguments)
        if extended is not None:
            return extended
    work = server.pipeline.call_tool(rctx, tool, arguments)
    if state.revision in revisions.CUTS_CALL_RESULTS:
        work = _for_revision(work, state.revision)
    # A call that may stop to ask for a level 8-10 confirmation streams like one with a Context: the question must
    # reach the client while the call waits for its answer.
    return Work(work, True if tool.injected else server.access.asks(tool))


def _unknown(rctx: RequestContext, name: str) -> Work:
    """-32602 for a name that is not a tool — with an audit trail, once the refusal is recorded."""
    refusal = InvalidParamsError(f"Unknown tool: {name}")
    pipeline = rctx.server.pipeline
    if not pipeline.auditors:
        raise refusal
    arguments = rctx.params.get("arguments")
    call = Call("tool", name, None, arguments if type(arguments) is dict else {})
    return Work(pipeline.unknown(rctx, call, refusal), own=True)


async def _for_revision(work: Coroutine[Any, Any, dict[str, Any]], revision: str | None) -> dict[str, Any]:
    """The result cut down to what an older revision defines (no structuredContent in 2025-03-26, say)."""
    return revisions.call_result(await work, revision)


def _valid_ttl(ttl: Any) -> bool:
    return ttl is None or (type(ttl) is int and ttl >= 0)
