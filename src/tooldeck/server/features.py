"""The resources, prompts and completion methods: list, read, subscribe, get, complete.

Each is served only when the deck declared the capability at initialize (else -32601, as for any method the
server does not offer). Reading a resource and getting a prompt run user code, so they run as tasks like tools/call;
their failures are JSON-RPC errors: -32002 for an unknown resource (with ``data.uri``), -32602 for bad arguments,
-32603 (masked like tool errors) for a function that raised.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from ..model.completion import complete
from ..prompts.messages import render
from ..prompts.prompt import check_arguments
from ..protocol.errors import (
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    ProtocolError,
    ResourceNotFoundError,
)
from ..protocol.jsonrpc import Request
from ..resources.contents import contents_for
from ..tools.call import describe_failure
from .context import Context
from .handlers import listing, progress_token

if TYPE_CHECKING:
    from .session import Reply, Session

log = logging.getLogger("tooldeck.features")


def _require(session: Session, capability: str, method: str) -> None:
    if capability not in session.server_capabilities:
        raise MethodNotFoundError(f"Method not found: {method} (this server offers no {capability})")


def _string_param(params: dict[str, Any], name: str, method: str) -> str:
    value = params.get(name)
    if type(value) is not str:
        raise InvalidParamsError(f'Invalid params: {method} needs "{name}" (a string)')
    return value


async def _invoke(session: Session, request: Request, source: Any, kwargs: dict[str, Any], what: str) -> Any:
    """Call the function of a resource, template or prompt (sync ones in the worker pool) with its Context, if it
    asks for one."""
    deck = session.deck
    context = None
    if source.injected:
        context = Context(session, request.id, what, progress_token(request.params))
        kwargs = {**kwargs, **dict.fromkeys(source.injected, context)}
    try:
        if source.is_async:
            return await source.fn(**kwargs)
        return await deck.run_sync(functools.partial(source.fn, **kwargs))
    except ProtocolError:
        raise
    except Exception as exc:
        raise InternalError(describe_failure(what, exc, deck.mask_errors)) from None
    finally:
        if context is not None:
            context.finished = True  # nothing may follow the response


# --- resources --------------------------------------------------------------------------------------------------


def list_resources(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    _require(session, "resources", request.method)
    return listing(session, session.deck.resources, request.params, "resources")


def list_templates(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    _require(session, "resources", request.method)
    return listing(session, session.deck.templates, request.params, "resourceTemplates")


def read_resource(session: Session, request: Request, reply: Reply) -> None:
    _require(session, "resources", request.method)
    uri = _string_param(request.params, "uri", request.method)
    deck = session.deck
    source: Any = deck.resources.get(uri)
    arguments: dict[str, Any] = {}
    if source is None:
        found = deck.templates.match(uri)
        if found is None:
            raise ResourceNotFoundError(f"Resource not found: {uri}", {"uri": uri})
        source, arguments = found
    if source.fn is None:  # static content (templates always have a function)
        session.spawn(request, reply, _static(uri, source.value, source.mime_type))
    else:
        session.spawn(request, reply, _read(session, request, source, arguments, uri))


async def _static(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    return {"contents": contents_for(uri, value, mime_type)}


async def _read(session: Session, request: Request, source: Any, arguments: dict[str, Any], uri: str) -> dict[str, Any]:
    value = await _invoke(session, request, source, arguments, f"resource {uri!r}")
    try:
        return {"contents": contents_for(uri, value, source.mime_type)}
    except TypeError as exc:
        log.error("resource %r returned an unusable value: %s", uri, exc)
        raise InternalError(
            f"Internal error: resource {uri!r} returned a value that is not resource contents"
        ) from None


def subscribe(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    _require(session, "resources", request.method)
    uri = _string_param(request.params, "uri", request.method)
    deck = session.deck
    if uri not in deck.resources and deck.templates.match(uri) is None:
        raise ResourceNotFoundError(f"Resource not found: {uri}", {"uri": uri})
    session.subscriptions.add(uri)
    return {}


def unsubscribe(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    _require(session, "resources", request.method)
    session.subscriptions.discard(_string_param(request.params, "uri", request.method))
    return {}


# --- prompts ----------------------------------------------------------------------------------------------------


def list_prompts(session: Session, request: Request, reply: Reply) -> dict[str, Any]:
    _require(session, "prompts", request.method)
    return listing(session, session.deck.prompts, request.params, "prompts")


def get_prompt(session: Session, request: Request, reply: Reply) -> None:
    _require(session, "prompts", request.method)
    name = _string_param(request.params, "name", request.method)
    prompt = session.deck.prompts.get(name)
    if prompt is None:
        raise InvalidParamsError(f"Unknown prompt: {name}")
    arguments = check_arguments(prompt, request.params.get("arguments"))
    session.spawn(request, reply, _get(session, request, prompt, arguments))


async def _get(session: Session, request: Request, prompt: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    value = await _invoke(session, request, prompt, arguments, f"prompt {prompt.name!r}")
    try:
        messages = render(value)
    except (TypeError, ValueError) as exc:
        log.error("prompt %r returned an unusable value: %s", prompt.name, exc)
        raise InternalError(f"Internal error: prompt {prompt.name!r} returned something that is not messages") from None
    result: dict[str, Any] = {"messages": messages}
    if prompt.description is not None:
        result["description"] = prompt.description
    return result


# --- completion -------------------------------------------------------------------------------------------------


def complete_argument(session: Session, request: Request, reply: Reply) -> None:
    _require(session, "completions", request.method)
    params = request.params
    ref = params.get("ref")
    argument = params.get("argument")
    if type(ref) is not dict or type(argument) is not dict:
        raise InvalidParamsError('Invalid params: completion/complete needs "ref" and "argument" objects')
    name = _string_param(argument, "name", "completion/complete argument")
    value = _string_param(argument, "value", "completion/complete argument")
    context = params.get("context") or {}
    known = context.get("arguments") if type(context) is dict else None
    if known is not None and (type(known) is not dict or any(type(v) is not str for v in known.values())):
        raise InvalidParamsError('Invalid params: "context.arguments" must map names to strings')
    completers = _completers_for(session, ref)
    session.spawn(request, reply, _complete(completers.get(name), value, known or {}))


def _completers_for(session: Session, ref: dict[str, Any]) -> dict[str, Any]:
    deck = session.deck
    kind = ref.get("type")
    if kind == "ref/prompt":
        name = _string_param(ref, "name", "ref/prompt")
        prompt = deck.prompts.get(name)
        if prompt is None:
            raise InvalidParamsError(f"Unknown prompt: {name}")
        return prompt.completers
    if kind == "ref/resource":
        uri = _string_param(ref, "uri", "ref/resource")
        template = deck.templates.get(uri)
        if template is None:
            if uri in deck.resources:
                return {}  # a fixed URI has nothing to complete
            raise InvalidParamsError(f"Unknown resource template: {uri}")
        return template.completers
    raise InvalidParamsError(f'Invalid params: "ref.type" must be "ref/prompt" or "ref/resource", got {kind!r}')


async def _complete(completer: Any, value: str, known: dict[str, str]) -> dict[str, Any]:
    try:
        return {"completion": await complete(completer, value, known)}
    except Exception as exc:  # the completer's own bug, or a result that is not a list of strings
        log.error("completer failed", exc_info=exc)
        raise InternalError("Internal error while completing the argument") from None


HANDLERS = {
    "resources/list": list_resources,
    "resources/templates/list": list_templates,
    "resources/read": read_resource,
    "resources/subscribe": subscribe,
    "resources/unsubscribe": unsubscribe,
    "prompts/list": list_prompts,
    "prompts/get": get_prompt,
    "completion/complete": complete_argument,
}
