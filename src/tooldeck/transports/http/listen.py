"""A 2026-07-28 ``subscriptions/listen`` POST: its answer is a long-lived SSE stream, whatever the endpoint's
``json_response`` option says, that opens with the acknowledgement and carries the subscription's notifications
(``server/subscriptions.py``), with keep-alive comments between them.

The request is served by a peer of its own (``server/peer.py``), for the request's principal (the stream is bound to
it: what it carries is decided for that principal). When the client closes the stream, the peer closes, which
cancels the subscription and drops its bus subscriptions; when the server ends it (shutdown), its result ends the
stream.
"""

from __future__ import annotations

from typing import Any

from ...protocol.envelope import Envelope
from ...protocol.errors import INVALID_REQUEST, HttpError
from ...protocol.jsonrpc import Request
from ...server.peer import RequestPeer
from .channels import Channel
from .modern import STREAM, answer_json
from .responses import SSE, Receive, Send, start


async def serve(endpoint: Any, request: Request, env: Envelope, principal: Any, address: str | None, sse_ok: bool,
                receive: Receive, send: Send) -> None:  # fmt: skip
    """Serve one listen request for ``endpoint`` (the exchange's ``Endpoint``, whose server, backlog and SSE writer
    it shares)."""
    if not sse_ok:
        raise HttpError(406, INVALID_REQUEST, "Not Acceptable: subscriptions/listen answers with a stream; accept "
                                              "text/event-stream")  # fmt: skip
    registry = endpoint.registry
    channel = Channel(STREAM, (request.id,), registry.backlog)
    peer = RequestPeer(registry.server, channel.put, address=address)
    try:
        peer.serve(request, env, principal)
        while not channel.queue:  # the acknowledgement comes in the subscription's first step (a refusal at once)
            channel.wakeup.clear()
            await channel.wakeup.wait()
        if channel.finished:  # refused (a malformed filter): a plain JSON-RPC error
            await answer_json(peer, channel.take_response(), send)
            return
        await start(send, 200, SSE)
        await endpoint.sse.stream(None, channel, receive, send, prime=False)
    finally:
        peer.close()  # the client left (or the server ended it): the subscription ends with its peer
