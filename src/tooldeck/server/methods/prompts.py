"""prompts/list and prompts/get (spec: server/prompts). Served only when the server declared the capability.
Getting a prompt runs user code, so it goes through the call pipeline; bad arguments are -32602 naming them.
"""

from __future__ import annotations

import logging
from typing import Any

from ...prompts.messages import render
from ...prompts.prompt import check_arguments
from ...protocol import revisions
from ...protocol.errors import InternalError, InvalidParamsError
from ..pipeline import Call
from ..request import RequestContext, Work
from .listing import listing, require, string_param

log = logging.getLogger("tooldeck.prompts")


def list_prompts(rctx: RequestContext) -> dict[str, Any]:
    require(rctx, "prompts")
    return listing(rctx, rctx.server.prompts, "prompts")


def get_prompt(rctx: RequestContext) -> Work:
    require(rctx, "prompts")
    name = string_param(rctx.params, "name", rctx.method)
    prompt = rctx.server.prompts.get(name)
    if prompt is None:
        raise InvalidParamsError(f"Unknown prompt: {name}")
    rctx.progress_token()  # a malformed progress token is a -32602 now
    arguments = rctx.params.get("arguments")
    call = Call("prompt", name, prompt, {} if arguments is None else arguments)  # checked after authorize
    return Work(_get(rctx, call), streams=bool(prompt.injected) or rctx.server.access.asks(prompt))


async def _get(rctx: RequestContext, call: Call) -> dict[str, Any]:
    prompt = call.item
    pipeline = rctx.server.pipeline
    value = await pipeline.invoke(rctx, call, f"prompt {prompt.name!r}", check_arguments)
    try:
        messages = render(value)
    except (TypeError, ValueError) as exc:
        log.error("prompt %r returned an unusable value: %s", prompt.name, exc)
        raise InternalError(f"Internal error: prompt {prompt.name!r} returned something that is not messages") from None
    result: dict[str, Any] = {"messages": messages}
    if prompt.description is not None:
        result["description"] = prompt.description
    return revisions.prompt_result(await pipeline.finish(rctx, call, result), rctx.revision)
