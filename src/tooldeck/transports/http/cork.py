"""One write per connection per event-loop turn, for the HTTP server.

uvicorn writes a response's status line and headers when the app sends ``http.response.start``, and its body when
the app sends ``http.response.body``: two system calls, and two wake-ups of a client waiting for the answer. Each
wake-up can preempt the server mid-request, which on a busy server costs more than the write itself. ``Cork``
wraps the connection's transport and gathers what one loop turn writes into one ``write`` at the end of the turn
(a ``call_soon``), as tooldeck's stdio transport does: the response leaves whole, in one segment, a few µs sooner
than the next request would be read. Streams are unaffected in effect: every SSE event is flushed by the turn
that wrote it.
"""

from __future__ import annotations

from typing import Any


class Cork:
    """A transport whose writes are buffered until the end of the current loop turn; everything else passes
    through. ``close`` sends what is buffered first; ``abort`` drops it with the connection."""

    __slots__ = ("_chunks", "_loop", "_transport")

    def __init__(self, transport: Any, loop: Any) -> None:
        self._transport = transport
        self._loop = loop
        self._chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        chunks = self._chunks
        if chunks:  # the head was held back: it leaves now, with this (the body, or its first event)
            chunks.append(data)
            self.flush()
            return
        chunks.append(data)
        self._loop.call_soon(self.flush)  # nothing follows in this turn: it leaves alone at the turn's end

    def flush(self) -> None:
        chunks = self._chunks
        if not chunks:
            return
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._chunks = []
        if not self._transport.is_closing():
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return int(self._transport.get_write_buffer_size()) + sum(map(len, self._chunks))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._chunks = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, pause_reading, ...
        return getattr(self._transport, name)


def corked_protocol() -> type | None:
    """uvicorn's httptools protocol with its transport corked; None if httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class CorkedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(Cork(transport, self.loop))  # type: ignore[arg-type]

    return CorkedHttpToolsProtocol
