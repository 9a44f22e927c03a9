"""A 2026-07-28 POST that passed the ladder (``eras.py``): the request served by a peer of its own
(``server/peer.py``) and answered on one channel, as JSON or as an SSE stream by the rules a 2025 request follows
(``exchange.py``). No session is made, read or kept: the channel and the peer live as long as the exchange (the peer
longer only if the call continues as a task, which holds it), and the client's address goes with the peer for the
rate limits of anonymous callers. ``subscriptions/listen`` has its own module (``listen.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from ...protocol import codec
from ...protocol.envelope import Envelope
from ...protocol.errors import METHOD_NOT_FOUND
from ...protocol.jsonrpc import Request
from ...server.peer import RequestPeer
from .channels import Channel
from .responses import JSON, NO_HEADERS, SSE, Receive, Send, respond, start

STREAM = "1"  # the id of a modern request's one stream (its event ids are "1.1", "1.2", ...: not resumable)


class Outlet:
    """Where what a modern request sends goes: its response is kept here when it comes before anything else (an answer
    that needs no stream needs no channel); everything else goes to the request's channel, made when the exchange
    sees the request has more to send or its answer is not there yet (``stream``)."""

    __slots__ = ("backlog", "channel", "request_id", "response")

    def __init__(self, request_id: Any, backlog: int) -> None:
        self.request_id = request_id
        self.backlog = backlog
        self.channel: Channel | None = None
        self.response: Any = None

    def send(self, message: Any, related: Any) -> None:
        channel = self.channel
        if channel is not None:
            channel.put(message)
        elif self.response is None and "method" not in message:
            self.response = message  # the usual case: the answer, and nothing before it
        else:
            self.stream().put(message)

    def stream(self) -> Channel:
        """The request's channel (made on first use), holding the response kept so far, if any."""
        channel = self.channel
        if channel is None:
            channel = self.channel = Channel(STREAM, (self.request_id,), self.backlog)
            if self.response is not None:
                channel.put(self.response)
                self.response = None
        return channel

    def close_stream(self) -> None:
        if self.channel is not None:
            self.channel.close_connection()


async def serve(endpoint: Any, request: Request, env: Envelope, principal: Any, address: str | None,
                json_ok: bool, sse_ok: bool, receive: Receive, send: Send,
                where: tuple[str, bytes | None] | None = None) -> None:  # fmt: skip
    """Serve one modern request for ``endpoint`` (the exchange's ``Endpoint``: its server, backlog, SSE writer and
    ``json_response``)."""
    registry = endpoint.registry
    outlet = Outlet(request.id, registry.backlog)
    peer = RequestPeer(registry.server, outlet.send, address=address, close_stream=outlet.close_stream,
                       where=where)  # fmt: skip
    try:
        work = peer.serve(request, env, principal, inline=True)  # work that does not stream runs in this task
        if work is not None:
            await work
        if outlet.channel is None and outlet.response is not None:
            await answer_json(peer, outlet.response, send)  # answered, and nothing else was sent
            return
        # The request streams, or runs on: what it sends waits in its channel until the form of the answer is known.
        channel = outlet.stream()
        json_only = not sse_ok or (endpoint.json_response and json_ok)
        if not channel.finished:
            await channel.decided(json_only, sse_ok)
        if json_only or (channel.finished and not channel.sse and len(channel.queue) <= 1):
            await answer_json(peer, channel.take_response(), send)
        else:
            await start(send, 200, SSE)
            await endpoint.sse.stream(None, channel, receive, send, prime=True)
    finally:
        peer.close()  # a call still running lost its client; a task the call became runs on


def answer_json(peer: RequestPeer, response: Any, send: Send) -> Awaitable[None]:
    """The request's response as a JSON body: 202 with none (the request was cancelled); a refusal's HTTP status
    (401, 403, 429, a refused retry's 400) with its headers; 404 for a method the server does not serve. What to
    await to send it (a plain function: the chain of coroutines that sends it is one shorter)."""
    if response is None:
        return respond(send, 202, b"", NO_HEADERS)
    status, headers = 200, JSON
    refusal = peer.refusals.get(response.get("id")) if peer.refusals else None
    if refusal is not None:
        status, headers = refusal.http_status, [*JSON, *refusal.headers]
    if "error" in response and response["error"]["code"] == METHOD_NOT_FOUND:
        status = 404  # 2026-07-28: a method the server does not serve (a feature it does not offer) is a 404
    return respond(send, status, codec.encode(response), headers)
