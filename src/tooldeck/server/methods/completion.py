"""completion/complete (spec: server/utilities/completion) for prompt arguments and resource template variables."""

from __future__ import annotations

import logging
from typing import Any

from ...model.completion import complete as complete_value
from ...protocol.errors import InternalError, InvalidParamsError
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
    completers = _completers_for(rctx, ref)
    return Work(_complete(completers.get(name), value, known or {}))


def _completers_for(rctx: RequestContext, ref: dict[str, Any]) -> dict[str, Any]:
    server = rctx.server
    kind = ref.get("type")
    if kind == "ref/prompt":
        name = string_param(ref, "name", "ref/prompt")
        prompt = server.prompts.get(name)
        if prompt is None:
            raise InvalidParamsError(f"Unknown prompt: {name}")
        return prompt.completers
    if kind == "ref/resource":
        uri = string_param(ref, "uri", "ref/resource")
        template = server.templates.get(uri)
        if template is None:
            if uri in server.resources:
                return {}  # a fixed URI has nothing to complete
            raise InvalidParamsError(f"Unknown resource template: {uri}")
        return template.completers
    raise InvalidParamsError(f'Invalid params: "ref.type" must be "ref/prompt" or "ref/resource", got {kind!r}')


async def _complete(completer: Any, value: str, known: dict[str, str]) -> dict[str, Any]:
    try:
        return {"completion": await complete_value(completer, value, known)}
    except Exception as exc:  # the completer's own bug, or a result that is not a list of strings
        log.error("completer failed", exc_info=exc)
        raise InternalError("Internal error while completing the argument") from None
