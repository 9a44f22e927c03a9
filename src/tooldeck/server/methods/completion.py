"""completion/complete (spec: server/utilities/completion) for prompt arguments and resource template variables.

A completer is user code that answers with what a prompt or template holds, so completing goes through the call
pipeline as the thing it completes would: the same authorization (level and scopes; levels 8-10 need the same
authenticated, scoped caller, but no per-call confirmation, since a completion runs no action), the same limits,
the sanitiser and the audit trail. A prompt or template hidden from the caller (``hide_unusable``) answers exactly
as a name that does not exist, so completion cannot tell a caller which hidden names exist.
"""

from __future__ import annotations

import logging
from typing import Any

from ...model.completion import complete as complete_value
from ...protocol.errors import InternalError, InvalidParamsError
from ..pipeline import Call, standing_heard
from ..request import RequestContext, Work
from .listing import require, string_param

log = logging.getLogger("tooldeck.completion")


def complete(rctx: RequestContext) -> Work:
    require(rctx, "completions")
    params = rctx.params
    ref = params.get("ref")
    argument = params.get("argument")
    if type(ref) is not dict or type(argument) is not dict:
        raise InvalidParamsError('Invalid params: completion/complete needs "ref" and "argument" objects')
    name = string_param(argument, "name", "completion/complete argument")
    value = string_param(argument, "value", "completion/complete argument")
    context = params.get("context") or {}
    known = context.get("arguments") if type(context) is dict else None
    if known is not None and (type(known) is not dict or any(type(v) is not str for v in known.values())):
        raise InvalidParamsError('Invalid params: "context.arguments" must map names to strings')
    call = _call_for(rctx, ref, {**(known or {}), name: value})
    return Work(_complete(rctx, call, name, value, known or {}))


def _call_for(rctx: RequestContext, ref: dict[str, Any], arguments: dict[str, str]) -> Call:
    """The pipeline's Call for completing an argument of what ``ref`` names (-32602 if it names nothing the caller
    may see)."""
    server = rctx.server
    kind = ref.get("type")
    if kind == "ref/prompt":
        name = string_param(ref, "name", "ref/prompt")
        item: Any = server.prompts.get(name)
        if item is None or server.access.hides(rctx.principal, item):
            raise InvalidParamsError(f"Unknown prompt: {name}")
        return Call("completion", f"prompt:{name}", item, arguments)
    if kind == "ref/resource":
        uri = string_param(ref, "uri", "ref/resource")
        item = server.templates.get(uri)
        if item is None:
            item = server.resources.get(uri)  # a fixed URI has nothing to complete, but is still guarded
        if item is None or server.access.hides(rctx.principal, item):
            raise InvalidParamsError(f"Unknown resource template: {uri}")
        return Call("completion", f"resource:{uri}", item, arguments)
    raise InvalidParamsError(f'Invalid params: "ref.type" must be "ref/prompt" or "ref/resource", got {kind!r}')


async def _complete(rctx: RequestContext, call: Call, name: str, value: str, known: dict[str, str]) -> dict[str, Any]:
    pipeline = rctx.server.pipeline
    if pipeline.admits:
        await pipeline.admit_or_refuse(rctx, call)
    await standing_heard(rctx)  # the session's standing, heard before user code runs
    completer = getattr(call.item, "completers", {}).get(name)
    try:
        result = {"completion": await complete_value(completer, value, known)}
    except Exception as exc:  # the completer's own bug, or a result that is not a list of strings
        log.error("completer failed", exc_info=exc)
        result = None
    if result is None:
        await pipeline.finish(rctx, call, {"content": [], "isError": True})  # audited as an error
        raise InternalError("Internal error while completing the argument")
    return await pipeline.finish(rctx, call, result)
