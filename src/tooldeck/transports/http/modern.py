"""A 2026-07-28 POST that passed the ladder (``eras.py``): the request served by a peer of its own
(``server/peer.py``) and answered on one channel, as JSON or as an SSE stream by the rules a 2025 request follows
(``exchange.py``). No session is made, read or kept: the channel and the peer live as long as the exchange (the peer
longer only if the call continues as a task, which holds it), and the client's address goes with the peer for the
rate limits of anonymous callers. ``subscriptions/listen`` has its own module (``listen.py``).
"""

from __future__ import annotations

from typing import Any

from ...protocol import codec
from ...protocol.envelope import Envelope
from ...protocol.errors import METHOD_NOT_FOUND
from ...protocol.jsonrpc import Request
from ...server.peer import RequestPeer
from .channels import Channel
from .responses import JSON, NO_HEADERS, SSE, Receive, Send, respond, start

STREAM = "1"  # the id of a modern request's one stream (its event ids are "1.1", "1.2", ...: not resumable)


async def serve(endpoint: Any, request: Request, env: Envelope, principal: Any, address: str | None,
                json_ok: bool, sse_ok: bool, receive: Receive, send: Send) -> None:  # fmt: skip
    """Serve one modern request for ``endpoint`` (the exchange's ``Endpoint``: its server, backlog, SSE writer and
    ``json_response``)."""
    registry = endpoint.registry
    channel = Channel(STREAM, (request.id,), registry.backlog)
    peer = RequestPeer(registry.server, channel.put, address=address, close_stream=channel.close_connection)
    try:
        work = peer.serve(request, env, principal, inline=True)  # work that does not stream runs in this task
        if work is not None:
            await work
        json_only = not sse_ok or (endpoint.json_response and json_ok)
        if not channel.finished:
            await channel.decided(json_only, sse_ok)
        if json_only or (channel.finished and not channel.sse and len(channel.queue) <= 1):
            await answer_json(peer, channel, send)
        else:
            await start(send, 200, SSE)
            await endpoint.sse.stream(None, channel, receive, send, prime=True)
    finally:
        peer.close()  # a call still running lost its client; a task the call became runs on


async def answer_json(peer: RequestPeer, channel: Channel, send: Send) -> None:
    """The request's response as a JSON body: 202 with none (the request was cancelled); a refusal's HTTP status
    (401, 403, 429, a refused retry's 400) with its headers; 404 for a method the server does not serve."""
    response = channel.take_response()
    if response is None:
        await respond(send, 202, b"", NO_HEADERS)
        return
    status, headers = 200, JSON
    refusal = peer.refusals.get(response.get("id")) if peer.refusals else None
    if refusal is not None:
        status, headers = refusal.http_status, [*JSON, *refusal.headers]
    if "error" in response and response["error"]["code"] == METHOD_NOT_FOUND:
        status = 404  # 2026-07-28: a method the server does not serve (a feature it does not offer) is a 404
    await respond(send, status, codec.encode(response), headers)
