"""One page of a registry as a list result, and the capability check every feature's methods share."""

from __future__ import annotations

from typing import Any

from ...protocol.errors import InvalidParamsError, MethodNotFoundError
from ..request import RequestContext


def listing(rctx: RequestContext, catalog: Any, key: str) -> dict[str, Any]:
    """``{key: [...], "nextCursor"?: ...}`` for the page the request's cursor names."""
    server = rctx.server
    principal = rctx.principal
    visibility = server.access.view_key(principal, catalog)
    if visibility is not None:  # leave out what this principal can never use
        catalog = catalog.view(visibility, lambda item: server.access.can_use(principal, item))
    items, next_cursor = catalog.page(rctx.params.get("cursor"), server.options.page_size, server.cursors,
                                      rctx.revision)  # fmt: skip
    if next_cursor is None:
        return {key: items}
    return {key: items, "nextCursor": next_cursor}


def require(rctx: RequestContext, capability: str) -> None:
    """-32601 unless the server declared ``capability`` to this client (as for any method it does not offer)."""
    if capability not in rctx.capabilities:
        raise MethodNotFoundError(f"Method not found: {rctx.method} (this server offers no {capability})")


def string_param(params: dict[str, Any], name: str, where: str) -> str:
    value = params.get(name)
    if type(value) is not str:
        raise InvalidParamsError(f'Invalid params: {where} needs "{name}" (a string)')
    return value
