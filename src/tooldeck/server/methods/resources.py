"""resources/list, resources/templates/list, resources/read, resources/subscribe and unsubscribe (spec:
server/resources). Served only when the server declared the capability (else -32601). Reading runs user code, so it
goes through the call pipeline; an unknown URI is -32002 with ``data.uri``.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol import revisions
from ...protocol.errors import InternalError, ResourceNotFoundError
from ...resources.contents import contents_for
from ..pipeline import Call
from ..request import RequestContext, Work
from .listing import listing, require, string_param

log = logging.getLogger("tooldeck.resources")


def list_resources(rctx: RequestContext) -> dict[str, Any]:
    require(rctx, "resources")
    return listing(rctx, rctx.server.resources, "resources")


def list_templates(rctx: RequestContext) -> dict[str, Any]:
    require(rctx, "resources")
    return listing(rctx, rctx.server.templates, "resourceTemplates")


def read_resource(rctx: RequestContext) -> Work:
    require(rctx, "resources")
    uri = string_param(rctx.params, "uri", rctx.method)
    server = rctx.server
    source: Any = server.resources.get(uri)
    arguments: dict[str, Any] = {}
    if source is None:
        found = server.templates.match(uri)
        if found is None:
            raise ResourceNotFoundError(f"Resource not found: {uri}", {"uri": uri})
        source, arguments = found
    rctx.progress_token()  # a malformed progress token is a -32602 now
    return Work(
        _read(rctx, Call("resource", uri, source, arguments)),
        streams=bool(source.injected) or server.access.asks(source),
    )


async def _read(rctx: RequestContext, call: Call) -> dict[str, Any]:
    source, uri = call.item, call.name
    pipeline = rctx.server.pipeline
    if source.fn is None:  # static content (templates always have a function): nothing to run, but still admitted
        if pipeline.admits:
            await pipeline.admit_or_refuse(rctx, call)
        value = source.value
    else:
        value = await pipeline.invoke(rctx, call, f"resource {uri!r}", _matched)
    try:
        result = {"contents": contents_for(uri, value, source.mime_type)}
    except TypeError as exc:
        log.error("resource %r returned an unusable value: %s", uri, exc)
        raise InternalError(
            f"Internal error: resource {uri!r} returned a value that is not resource contents"
        ) from None
    return revisions.read_result(await pipeline.finish(rctx, call, result), rctx.revision)


def _matched(source: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments  # a template's variables were converted when the URI matched it


def subscribe(rctx: RequestContext) -> Work:
    """Subscribing needs read access: a resource the caller may not read is refused as a read would be (a hidden one
    is not found, exactly as a URI that names nothing), and the refusal is audited."""
    require(rctx, "resources")
    uri = string_param(rctx.params, "uri", rctx.method)
    server = rctx.server
    item = server.readable_item(uri)
    if item is None or server.access.hides(rctx.principal, item):
        raise ResourceNotFoundError(f"Resource not found: {uri}", {"uri": uri})
    # tooldeck's own code (admission, no user code): it starts at once, and answers at once unless a limiter awaits
    return Work(_subscribe(rctx, Call("subscription", uri, item, {})), own=True)


async def _subscribe(rctx: RequestContext, call: Call) -> dict[str, Any]:
    pipeline = rctx.server.pipeline
    if pipeline.admits:
        await pipeline.admit_or_refuse(rctx, call)
    rctx.state.subscriptions.add(call.name)
    rctx.state.changed()
    return {}


def unsubscribe(rctx: RequestContext) -> dict[str, Any]:
    require(rctx, "resources")
    uri = string_param(rctx.params, "uri", rctx.method)
    if uri in rctx.state.subscriptions:
        rctx.state.subscriptions.discard(uri)
        rctx.state.changed()
    return {}
