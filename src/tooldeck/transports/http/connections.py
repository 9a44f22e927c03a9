"""Limits on connections, enforced beneath the ASGI app: how long a request head may take to arrive, and how many
connections may be open at once.

uvicorn (0.30 to 0.54, httptools and h11 alike) never times out a request head: its only read timer is
``timeout_keep_alive``, armed when a response completes and cancelled by the next byte received. A connection that
sends nothing, or half a request line or half its headers and then stalls, is held forever; the app never hears of
it, since a request reaches ASGI only once its head is complete. Nor does uvicorn cap connections:
``limit_concurrency`` answers 503 to *requests* once open connections (idle ones included) or tasks reach it, so
stalled connections would turn every real request away rather than be turned away themselves.

``limited_protocol`` wraps uvicorn's protocol class with both limits, using only the ``asyncio.Protocol`` calls
(``connection_made``, ``data_received``, ``connection_lost``) and the ``cycle`` uvicorn makes for each complete head,
so it works the same over httptools and h11. A body that stalls is the endpoint's business (``body_timeout`` in
exchange.py): there the app can still answer 408 in JSON-RPC.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...protocol.codec import encode
from ...protocol.errors import INVALID_REQUEST, SERVER_ERROR

log = logging.getLogger("tooldeck.http")


def _raw_response(status: bytes, code: int, message: str) -> bytes:
    """A whole HTTP/1.1 response with a JSON-RPC error body, for the protocol level where no ASGI ``send`` exists."""
    body = encode({"jsonrpc": "2.0", "error": {"code": code, "message": message}})
    head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
    return head % (status, len(body)) + body


def limited_protocol(base: type[asyncio.Protocol], *, header_timeout: float, max_connections: int) -> type:
    """``base`` (one of uvicorn's HTTP protocol classes) with a time limit on request heads and a connection cap.

    A connection opened when ``max_connections`` are already open is answered 503 and closed at once, before it is
    read. A request head (request line and headers) must arrive whole within ``header_timeout`` seconds: of the
    connection opening, for its first request, or of the first byte of the head, for the next one on a kept-alive
    connection (uvicorn's ``timeout_keep_alive`` bounds the silence between requests). Otherwise the connection is
    closed, with a 408 if part of a head had arrived and no response is in progress.
    """
    if header_timeout <= 0:
        raise ValueError(f"header_timeout must be positive, got {header_timeout}")
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, got {max_connections}")
    refused = _raw_response(b"503 Service Unavailable", SERVER_ERROR,
                            f"Service Unavailable: the server has {max_connections} connections open")  # fmt: skip
    timed_out = _raw_response(b"408 Request Timeout", INVALID_REQUEST,
                              f"Request Timeout: the request headers did not arrive within {header_timeout:g} s")  # fmt: skip

    class LimitedProtocol(base):  # type: ignore[valid-type, misc]
        # Set by uvicorn's protocols: the server's live connections, this connection's transport, its loop, and the
        # request/response cycle of the latest complete head (None before the first).
        connections: set[Any]
        transport: Any
        loop: asyncio.AbstractEventLoop
        cycle: Any

        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = False  # some bytes of the awaited head have arrived
        _refused = False
        _draining = False  # the next response closes the connection (``drain``)

        def drain(self) -> None:
            """Answer the request in progress, or the next one if one comes, with ``Connection: close``, then close:
            a client is never sent a close while its request may be on the way (what closing an idle connection
            risks), and it opens its next connection elsewhere."""
            self._draining = True
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= max_connections:  # counted before this one joins them
                self._refused = True
                log.warning("refused a connection: %d connections are open (max_connections)", max_connections)
                transport.write(refused)
                transport.close()
                return
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def data_received(self, data: bytes) -> None:
            if self._refused:  # what a refused client sent before the close took effect: it is not read
                return
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle:  # a head arrived whole (uvicorn made its cycle): its time limit is met
                self._stop_head_timer()
                self._head_bytes = False
                if self._draining:
                    self.cycle.keep_alive = False
            elif data and (cycle is None or cycle.response_complete):  # bytes of a head still incomplete
                self._head_bytes = True
                if self._head_timer is None:
                    self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:  # uvicorn never knew of this connection: there is nothing of it to release
                return
            self._stop_head_timer()
            super().connection_lost(exc)

        def _stop_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            transport = self.transport
            if transport.is_closing():
                return
            cycle = self.cycle
            if self._head_bytes and (cycle is None or cycle.response_complete):  # never inside another response
                transport.write(timed_out)
            log.info("closed a connection whose request headers did not arrive within %g s", header_timeout)
            transport.close()

    LimitedProtocol.__name__ = LimitedProtocol.__qualname__ = f"Limited{base.__name__}"
    return LimitedProtocol
