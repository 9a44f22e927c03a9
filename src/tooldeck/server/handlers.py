"""The method table: which function answers each MCP request, and the tools/* handlers themselves.

A handler takes ``(session, request, reply)`` and returns the result dict, or returns None after handing the work
to ``session.spawn`` (it then replies when the work ends). Raising a ``ProtocolError`` answers with that error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import InvalidParamsError, MethodNotFoundError
from ..protocol.jsonrpc import Request, is_request_id
from ..tools.call import call_tool
from .context import Context

if TYPE_CHECKING:
    from .session import Handler, Reply, Session


def initialize(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    return session.initialize(request.params)


def ping(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    return {}


def set_log_level(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    return session.set_log_level(request.params)


def list_tools(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    return listing(session, session.deck.tools, request.params, "tools")


def listing(session: Session, catalog: Any, params: dict[str, Any], key: str) -> dict[str, Any]:
    """One page of a catalog as a list result: ``{key: [...], "nextCursor"?: ...}``."""
    deck = session.deck
    items, next_cursor = catalog.page(params.get("cursor"), deck.page_size, deck.cursors)
    if next_cursor is None:
        return {key: items}
    return {key: items, "nextCursor": next_cursor}


def call(session: Session, request: Request, reply: Reply) -> None:
    params = request.params
    name = params.get("name")
    if type(name) is not str:
        raise InvalidParamsError('Invalid params: tools/call needs "name" (a string)')
    deck = session.deck
    tool = deck.tools.get(name)
    if tool is None:
        raise InvalidParamsError(f"Unknown tool: {name}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif type(arguments) is not dict:
        raise InvalidParamsError('Invalid params: tools/call "arguments" must be an object')
    token = progress_token(params)
    for policy in deck.policies:  # access control, rate limits: may raise a ProtocolError or ToolError
        policy(session, tool, arguments)
    if "tasks" in session.server_capabilities:  # without the capability a "task" field is ignored (MUST)
        task = params.get("task")
        if task is not None:
            if tool.task_support == "forbidden":
                raise MethodNotFoundError(f"Tool {name!r} does not support task-augmented calls")
            if type(task) is not dict or not _valid_ttl(task.get("ttl")):
                raise InvalidParamsError('Invalid params: "task" must be an object with an optional integer "ttl" >= 0')
            work = deck.task_manager().create(session, request, tool, arguments, task)
            session.run_eagerly(request, reply, work)  # tooldeck's own code: the tool itself runs in its own task
            return
        if tool.task_support == "required":
            raise MethodNotFoundError(f'Tool {name!r} must be called as a task (add "task": {{}} to the params)')
    context = None
    injected = None
    if tool.injected:
        context = Context(session, request.id, name, token)
        injected = dict.fromkeys(tool.injected, context)
    work = call_tool(tool, arguments, injected, deck.run_sync, mask_errors=deck.mask_errors)
    session.spawn(request, reply, work, context)


def _valid_ttl(ttl: Any) -> bool:
    return ttl is None or (type(ttl) is int and ttl >= 0)


def progress_token(params: dict[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    if meta is None:
        return None
    if type(meta) is not dict:
        raise InvalidParamsError('Invalid params: "_meta" must be an object')
    token = meta.get("progressToken")
    if token is not None and not is_request_id(token):
        raise InvalidParamsError('Invalid params: "_meta.progressToken" must be a string or an integer')
    return token


def _lazy(module: str, method: str) -> Handler:
    """A handler imported on first use, so the features a deck never serves cost nothing at start-up."""

    def handler(session: Session, request: Request, reply: Reply) -> Any:
        import importlib

        real = importlib.import_module(module, __package__).HANDLERS[method]
        session.deck.handlers[method] = real
        return real(session, request, reply)

    return handler


HANDLERS: dict[str, Handler] = {
    "initialize": initialize,
    "ping": ping,
    "logging/setLevel": set_log_level,
    "tools/list": list_tools,
    "tools/call": call,
    **{
        method: _lazy(".features", method)
        for method in (
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
            "prompts/list",
            "prompts/get",
            "completion/complete",
        )
    },
    **{method: _lazy(".tasks", method) for method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel")},
}
# Methods whose handlers run user code as tasks: everything else is answered without an event loop.
DEFERRED = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete", "tasks/get",
                      "tasks/result", "tasks/list", "tasks/cancel"})  # fmt: skip
