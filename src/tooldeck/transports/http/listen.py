"""A 2026-07-28 ``subscriptions/listen`` POST: its answer is a long-lived SSE stream, whatever the endpoint's
``json_response`` option says, that opens with the acknowledgement and carries the subscription's notifications
(``server/subscriptions.py``), with keep-alive comments between them.

The request is served on a session of its own, made for the request's principal (the stream is bound to it: what
it carries is decided for that principal). When the client closes the stream, that session closes, which cancels
the subscription and drops its bus subscriptions; when the server ends it (shutdown), its result ends the stream.
"""

from __future__ import annotations

from typing import Any

from ...protocol.envelope import Envelope
from ...protocol.errors import INVALID_REQUEST, HttpError
from ...protocol.jsonrpc import Request
from .responses import NO_HEADERS, SSE, Receive, Send, start


async def serve(endpoint: Any, request: Request, env: Envelope, principal: Any, sse_ok: bool,
                receive: Receive, send: Send) -> None:  # fmt: skip
    """Serve one listen request for ``endpoint`` (the exchange's ``Endpoint``, whose registry, SSE writer and JSON
    answer it shares)."""
    if not sse_ok:
        raise HttpError(406, INVALID_REQUEST, "Not Acceptable: subscriptions/listen answers with a stream; accept "
                                              "text/event-stream")  # fmt: skip
    http_session = endpoint.registry.stateless(principal)
    channel = http_session.open_channel((request.id,))
    http_session.connections += 1
    try:
        http_session.session.receive_modern(request, env)
        while not channel.queue:  # the acknowledgement comes in the subscription's first step (a refusal at once)
            channel.wakeup.clear()
            await channel.wakeup.wait()
        if channel.finished:  # refused (a malformed filter): a plain JSON-RPC error
            await endpoint._answer_json(http_session, channel, send, NO_HEADERS, True)
            return
        await start(send, 200, SSE)
        await endpoint.sse.stream(http_session, channel, receive, send, prime=False)
    finally:
        http_session.connections -= 1
        http_session.close()  # the client left (or the server ended it): the subscription ends with the session
