"""The stateless era (2026-07-28): one request served on its own, from what it carries, with no session.

A modern request names its revision and the client's capabilities in ``params._meta`` (``protocol/envelope.py``
checks them); this module makes the request context from that envelope and picks the handler (``serve``; the same
handlers as a 2025 session's, plus ``server/discover``; the methods 2026-07-28 removed are -32601), and finishes the
result the way the revision wants it (``finish``: ``resultType``, ``serverInfo`` in ``_meta``, cache hints on
discover, lists and reads; -32002 becomes -32602). ``answer`` is what drives it: the request's peer
(``peer.RequestPeer`` over HTTP, the connection's session over stdio: ``Session.receive_modern``) hands it the
request and runs the work it gets back, so the call pipeline — authorization, limits, sanitiser, audit — runs
exactly as it does for a 2025 request.

Logs: none unless the request set ``logLevel``. A tool, prompt or resource that asks the client for input
(elicitation, sampling) ends its request with an input-required result and is resumed by the client's retry
(``rounds.py``); asking for what the request's capabilities did not declare is -32021.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ..protocol import envelope, jsonrpc, versions
from ..protocol.envelope import Envelope
from ..protocol.errors import (
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    MissingClientCapabilityError,
    ProtocolError,
    RefusedError,
    ResourceNotFoundError,
    UrlElicitationRequiredError,
)
from ..protocol.jsonrpc import Request, RequestId
from . import rounds, subscriptions
from .options import LOG_LEVELS
from .request import Peer, RequestContext, Work
from .state import SessionState

log = logging.getLogger("tooldeck.session")

# What a modern request may ask for; tasks/* are the tasks extension's (task_extension.py).
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
METHODS = frozenset({"server/discover", "tools/list", "tools/call", "resources/list", "resources/templates/list",
                     "resources/read", "prompts/list", "prompts/get", "completion/complete",
                     "subscriptions/listen"}) | TASK_METHODS  # fmt: skip
REMOVED = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
                     "tasks/result", "tasks/list"})  # fmt: skip
LISTS = frozenset({"server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list"})
SILENT = len(LOG_LEVELS)  # a log rank no level reaches: the request set no logLevel, so it gets no logs


def known(method: str) -> bool:
    return method in METHODS


def refusal(method: str) -> MethodNotFoundError:
    """The -32601 of a method a modern request may not ask for."""
    if method in REMOVED:
        return MethodNotFoundError(f"Method not found: {method} is not part of protocol revision {versions.MODERN[0]}")
    return MethodNotFoundError(f"Method not found: {method}")


def answer(server: Any, peer: Peer, request: Request, env: Envelope, principal: Any, identifies_requestor: bool,
           reply: Callable[[dict[str, Any]], None],
           refused: Callable[[RequestId, RefusedError], None] | None,
           ) -> tuple[RequestContext, Work, Callable[[dict[str, Any]], None]] | None:  # fmt: skip
    """One modern request whose envelope was read and whose version is served, up to its work: the request context,
    the ``Work`` and the reply for the peer's runner (``reply``, observed when metrics or spans are on), or None when
    it was answered already (a result that needs no work, or an error; a ``RefusedError`` also goes to ``refused``,
    for its HTTP status)."""
    if server.metrics is not None or server.tracing is not None:
        reply = observed(server, reply, request, env.version, None, getattr(peer, "transport", "pipe"))
    try:
        rctx, outcome = serve(server, peer, request, env, principal, identifies_requestor)
    except ProtocolError as exc:
        if refused is not None and isinstance(exc, RefusedError):
            refused(request.id, exc)  # its HTTP status (a refused retry's 400)
        reply(jsonrpc.error(request.id, translate(exc)))
        return None
    except Exception:
        log.exception("handler for %s failed", request.method)
        reply(jsonrpc.error(request.id, InternalError(f"Internal error while handling {request.method}")))
        return None
    if type(outcome) is not Work:
        reply(jsonrpc.result(request.id, outcome))
        return None
    return rctx, outcome, reply


def observed(server: Any, reply: Any, request: Request, revision: str | None, session: str | None,
             transport: str) -> Any:  # fmt: skip
    """``reply`` that observes ``request`` for the deck's metrics and spans, whichever are on (``session``: the
    session id the span names; None for a 2026-07-28 request, which has none)."""
    if server.metrics is not None:
        reply = server.metrics.timed(reply, request.method, request.params, revision, transport)
    if server.tracing is not None:
        span = server.tracing.start(request.method, request.id, request.params, revision, session, transport)
        reply = server.tracing.traced(reply, span)
    return reply


def serve(server: Any, peer: Peer, request: Request, env: Envelope, principal: Any,
          identifies_requestor: bool) -> tuple[RequestContext, Any]:  # fmt: skip
    """One modern request: its request context (the envelope's revision, capabilities, client and log level; the
    principal of the connection it came on: the stdio user, or the HTTP request's bearer token) and what it gets, its
    finished result or the handler's ``Work``, whose result its runner finishes for the revision (``finishing``)."""
    method = request.method
    params = request.params
    state = SessionState.of_request(
        server, env.version, client_capabilities=env.client_capabilities, client_info=env.client_info,
        principal=principal, log_level=env.log_level, identifies_requestor=identifies_requestor,
    )  # fmt: skip
    if env.log_level is None:
        state.log_rank = SILENT  # the request set no logLevel: no logs for it
    rctx: RequestContext
    if method in rounds.ASKING:
        rctx = trip = rounds.RoundTrip(server, peer, request.id, method, params, state)
        if "inputResponses" in params or "requestState" in params:
            rounds.begin(trip)
        else:
            trip._rounds = None  # made if the function asks (RoundTrip.rounds)
    else:
        rctx = RequestContext(server, peer, request.id, method, params, state)
    if method == "server/discover":
        return rctx, discover(rctx)
    outcome = handler(server, method)(rctx)
    if type(outcome) is not Work:
        return rctx, finish(rctx, outcome)
    return rctx, outcome  # the handler's own Work: whoever runs it finishes it for the revision (``finishing``)


def handler(server: Any, method: str) -> Any:
    if method == "subscriptions/listen":  # change notifications reach modern clients only here
        return subscriptions.listen
    if method not in METHODS:
        raise refusal(method)
    if method in TASK_METHODS:
        from . import task_extension

        if not any(t.task_support != "forbidden" for t in server.tools):
            raise MethodNotFoundError(f"Method not found: {method} (this server offers no tasks)")
        return task_extension.METHODS[method]
    row = server.methods[method]
    return row.handler or row.resolve()


def discover(rctx: RequestContext) -> dict[str, Any]:
    """server/discover, finished: the versions, capabilities (with ``extensions``) and instructions of this server.
    Made once per revision, capabilities and cache hints (the server forgets it when what it registers changes)."""
    state = rctx.state
    hint = hints(rctx)
    key = ("server/discover", state.revision, state.identifies_requestor or state.principal is not None, hint)
    return rctx.server.cached(key, _discover, rctx, hint)


def _discover(rctx: RequestContext, hint: tuple[int, str]) -> dict[str, Any]:
    server = rctx.server
    result: dict[str, Any] = {"supportedVersions": list(versions.MODERN), "capabilities": capabilities(rctx)}
    if server.instructions is not None:
        result["instructions"] = server.instructions
    import orjson

    from ..protocol.codec import Fragment

    # Encoded once: each discover answer splices these bytes in (as lists splice their cached items).
    return {key: Fragment(orjson.dumps(value)) if type(value) is not str else value
            for key, value in envelope.complete(result, server.server_info, hint).items()}  # fmt: skip


def capabilities(rctx: RequestContext) -> dict[str, Any]:
    """What initialize would declare at the revision (``listChanged``/``subscribe``: served through listen; the
    tasks extension under ``extensions`` instead of ``tasks``; see ``ServerCore.capabilities``)."""
    return rctx.capabilities


def hints(rctx: RequestContext) -> tuple[int, str] | None:
    """``(ttlMs, cacheScope)`` for a cacheable method's result, from the deck's options; None for the others."""
    method = rctx.method
    options = rctx.server.options
    if method == "resources/read":
        if rctx.retry:  # type: ignore[attr-defined]
            return 0, "private"  # the result of a retry must not be cached: the schema requires hints, so these
        return options.read_ttl_ms, options.cache_scope or "private"
    if method not in LISTS:
        return None
    scope = options.cache_scope
    if scope is None:  # lists may leave out what a caller cannot use: shared caches only where nobody is known
        scope = "private" if rctx.principal is not None or rctx.server.http_auth is not None else "public"
    return options.list_ttl_ms, scope


def finish(rctx: RequestContext, result: dict[str, Any]) -> dict[str, Any]:
    return envelope.complete(result, rctx.server.server_info, hints(rctx))


async def finishing(rctx: RequestContext, work: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """The result of a handler's work, finished for the revision (errors translated to its codes)."""
    try:
        result = await work
    except ProtocolError as exc:
        raise translate(exc) from None
    except rounds.InputRequired:
        return rctx.rounds.interim()  # type: ignore[attr-defined]
    return finished(rctx, result)


def finished(rctx: RequestContext, result: dict[str, Any]) -> dict[str, Any]:
    """What ``finishing`` makes of the result its work returned (a function awaiting the work itself calls it)."""
    if type(rctx) is rounds.RoundTrip:
        if rctx.asked:  # a function that swallowed the end of its run
            return rctx.rounds.interim()
        if rctx.method == "tools/call":  # a result made for this call alone: finished in place, no hints
            if result.get("resultType") == "task":  # a CreateTaskResult (task_extension.py): finished already
                return result
            return envelope.stamp(result, rctx.server.server_info)
    return finish(rctx, result)


def translate(exc: ProtocolError) -> ProtocolError:
    """A 2025-era error as 2026-07-28 words it: resource-not-found is -32602 (-32002 must not be sent), and the
    URL elicitation error -32042 does not exist (the client lacks what the tool needs)."""
    if type(exc) is ResourceNotFoundError:
        return InvalidParamsError(exc.message, exc.data)
    if type(exc) is UrlElicitationRequiredError:
        return MissingClientCapabilityError(f"{exc.message}: this request cannot ask for URL elicitation",
                                            {"elicitation": {"url": {}}})  # fmt: skip
    return exc


def missing(rctx: RequestContext, capability: dict[str, Any], what: str) -> MissingClientCapabilityError:
    """The -32021 for a tool that asks the client ``what`` (an elicitation, a sampling) in a modern request."""
    return MissingClientCapabilityError(
        f"{what} cannot be requested in this {rctx.revision} request: its clientCapabilities do not declare "
        "what it needs, so a tool that needs it cannot run",
        capability,
    )
