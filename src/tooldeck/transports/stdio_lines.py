"""The stdio transport's framing: ``LineReader`` splits what arrives on stdin into messages and hands each on, and
``Output`` frames messages onto stdout — blocking writes during the handshake, then an asyncio pipe transport, with
the messages of one turn of the loop in one write and an answer written in the turn that made it (``stdio.py`` runs
them).

Nothing here imports asyncio: the handshake is served before the event loop exists.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.codec import decode, encode_line
from ..protocol.errors import InvalidRequestError, ProtocolError

if TYPE_CHECKING:
    import asyncio

    from ..server.session import Session

SHUTDOWN_GRACE = 5.0  # seconds to let cancelled work unwind before exiting


class LineReader:
    """Splits the byte stream into lines and hands each decoded message on (to the session, normally)."""

    def __init__(self, session: Session, limit: int) -> None:
        self.session = session
        self.deliver: Callable[[Any], None] = session.receive
        self.limit = limit
        self.on_eof: Any = lambda: None
        self.transport: Any = None
        self.output: Output | None = None  # once the loop serves: the answers to a chunk's lines leave together
        self._partial = bytearray()
        self._discarding = False

    # asyncio.Protocol interface (duck-typed, so this module need not import asyncio)
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        """Hand on each whole line of ``data``. The answers sent meanwhile (a call that never waits is answered before
        its line is done) are written together when the chunk is done, in this turn of the loop: no further turn."""
        output = self.output
        if output is None:
            self._received(data)
            return
        output.holding = True
        try:
            self._received(data)
        finally:
            output.holding = False
            if output.batch:
                output.flush()

    def _received(self, data: bytes) -> None:
        start = 0
        if self._discarding or self._partial:
            newline = data.find(b"\n")
            if newline < 0:
                self._extend(data)
                return
            if self._discarding:
                self._discarding = False
            else:
                self._partial += data[:newline]
                if len(self._partial) > self.limit:
                    self._too_large()
                else:
                    self._line(bytes(self._partial))
            self._partial.clear()
            start = newline + 1
        limit = self.limit
        find = data.find
        while True:
            newline = find(b"\n", start)
            if newline < 0:
                break
            if newline - start > limit:
                self._too_large()
            else:
                self._line(data[start:newline])
            start = newline + 1
        if start < len(data):
            self._extend(data[start:])

    def _extend(self, data: bytes) -> None:
        if self._discarding:
            return
        self._partial += data
        if len(self._partial) > self.limit:
            self._partial.clear()
            self._discarding = True  # drop the rest of this line as it arrives; never buffer it
            self._too_large()

    def _too_large(self) -> None:
        error = InvalidRequestError(f"Invalid request: message exceeds the {self.limit}-byte limit and was discarded")
        self.session.receive_error(error)

    def _line(self, line: bytes) -> None:
        try:
            message = decode(line)
        except ProtocolError as exc:
            if line.strip():  # blank lines between messages are tolerated
                self.session.receive_error(exc, exc.request_id)
            return
        self.deliver(message)

    def eof_received(self) -> bool:
        self.on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_eof()

    def pause(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


def _never() -> bool:
    return False


class Output:
    """Framed messages to stdout: blocking writes during the handshake, then an asyncio pipe transport.

    While the client is not reading stdout, reading stdin pauses (back-pressure instead of unbounded buffers).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.count = 0
        self.transport: Any = None
        self.reader: LineReader | None = None
        self._closed: asyncio.Future[None] | None = None
        self._lock = threading.Lock()  # the handshake phase may be written to from a thread (list_changed)
        self.batch: list[bytes] = []  # sent in this turn of the loop, not yet written
        self.holding = False  # the reader is handing on a chunk's lines: it writes the batch when done (flush)
        self.quiet: Callable[[], bool] = _never  # no other request runs: a response is written at once
        self._loop: Any = None

    def send(self, message: Any, related: Any = None) -> None:
        data = encode_line(message)
        self.count += 1
        transport = self.transport
        if transport is None:
            with self._lock:
                _write_all(self.fd, data)
        elif not transport.is_closing():
            batch = self.batch
            if self.holding:  # the reader writes it with the rest of the chunk's answers
                batch.append(data)
            elif "method" not in message and self.quiet():  # the answer to the last request running: at once
                if batch:  # with what the turn held: its scheduled flush finds nothing left
                    batch.append(data)
                    self.flush()
                else:
                    transport.write(data)  # alone (a call at a time): no list made and dropped for it
            else:
                if not batch:
                    self._loop.call_soon(self.flush)  # everything sent in this turn of the loop goes in one write
                batch.append(data)

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if batch and self.transport is not None and not self.transport.is_closing():
            self.transport.write(batch[0] if len(batch) == 1 else b"".join(batch))

    async def start(self, loop: asyncio.AbstractEventLoop, reader: LineReader, watch: bool = True) -> None:
        self.reader = reader
        self._loop = loop
        self._closed = loop.create_future()
        if not watch or not pollable(self.fd):
            return  # a regular file or /dev/null cannot be polled (uvloop aborts on one): blocking writes are right
        try:
            pipe = os.fdopen(self.fd, "wb", buffering=0, closefd=False)
            await loop.connect_write_pipe(lambda: self, pipe)  # type: ignore[type-var]
        except (ValueError, OSError):
            self.transport = None

    # asyncio.Protocol interface
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def pause_writing(self) -> None:
        if self.reader is not None:
            self.reader.pause()

    def resume_writing(self) -> None:
        if self.reader is not None:
            self.reader.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    async def close(self) -> None:
        import asyncio

        if self.transport is None or self._closed is None:
            return
        if self.batch:
            self.flush()
        if not self.transport.is_closing():
            self.transport.close()  # flushes what is buffered, then closes
        try:
            await asyncio.wait_for(asyncio.shield(self._closed), SHUTDOWN_GRACE)
        except TimeoutError:
            self.transport.abort()


def pollable(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket or a terminal; not a regular file, a directory or
    a character device that is not a terminal (``/dev/null``, ``/dev/zero``: the kernel refuses to watch them).

    Asked before connecting, because uvloop aborts the process (libuv calls ``abort()`` when epoll refuses a
    descriptor) instead of raising. What is not pollable gets blocking writes and a reading thread, which never
    block on such files anyway.
    """
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if stat.S_ISCHR(mode):
        return os.isatty(fd)
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
