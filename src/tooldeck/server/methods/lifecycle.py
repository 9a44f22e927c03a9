"""initialize and ping (spec: basic/lifecycle, basic/utilities/ping)."""

from __future__ import annotations

from typing import Any

from ...protocol import versions
from ...protocol.errors import InvalidParamsError
from ..request import RequestContext


def initialize(rctx: RequestContext) -> dict[str, Any]:
    """Negotiate the revision and remember the client; the session moves on when this answer leaves."""
    params = rctx.params
    requested = params.get("protocolVersion")
    if type(requested) is not str:
        raise InvalidParamsError('Invalid params: initialize needs "protocolVersion" (a string)')
    capabilities = params.get("capabilities")
    if type(capabilities) is not dict:
        raise InvalidParamsError('Invalid params: initialize needs "capabilities" (an object)')
    client_info = params.get("clientInfo")
    if type(client_info) is not dict or type(client_info.get("name")) is not str:
        raise InvalidParamsError('Invalid params: initialize needs "clientInfo" with a string "name"')
    if type(client_info.get("version")) is not str:
        raise InvalidParamsError('Invalid params: "clientInfo.version" must be a string')
    revision = versions.negotiate(requested)
    result: dict[str, Any] = rctx.server.initialize_result(revision, rctx.identifies_requestor)
    state = rctx.state
    state.revision = revision
    state.client_capabilities = capabilities
    state.client_info = client_info
    state.capabilities = result["capabilities"]
    state.changed()
    return result


def ping(rctx: RequestContext) -> dict[str, Any]:
    return {}
