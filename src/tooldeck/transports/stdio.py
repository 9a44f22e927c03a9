"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, and nothing else on stdout, ever.

``run_stdio`` takes the real stdout for protocol messages and points file descriptor 1 at stderr, so a stray
``print()`` in a tool, a C extension or a child process cannot corrupt the stream. A line longer than the limit is
answered with an error and discarded without being buffered. EOF on stdin, SIGTERM or SIGINT end the server: work
in flight is cancelled, pending output is flushed, and the process exits with status 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol.codec import encode_line
from ..protocol.errors import InvalidRequestError, ParseError
from ..server.session import Session

if TYPE_CHECKING:
    from ..server.deck import Deck

log = logging.getLogger("tooldeck.stdio")
_SHUTDOWN_GRACE = 5.0  # seconds to let cancelled work unwind before exiting


def run_stdio(deck: Deck, *, max_message_bytes: int | None = None, stdout_fd: int | None = None) -> None:
    """Serve ``deck`` on this process's stdin/stdout until EOF or a termination signal.

    ``stdout_fd``: the protocol's output if ``claim_stdout`` was already called (the CLI claims it before it
    imports the user's module, so even import-time prints stay off the protocol stream).
    """
    out_fd = stdout_fd if stdout_fd is not None else claim_stdout()
    main = serve_stdio(deck, stdin_fd=0, stdout_fd=out_fd, max_message_bytes=max_message_bytes, handle_signals=True)
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(main)
    except KeyboardInterrupt:
        pass


def claim_stdout() -> int:
    """Keep the real stdout for protocol messages; anything else written to fd 1 goes to stderr from now on."""
    sys.stdout.flush()
    out_fd = os.dup(1)
    os.dup2(2, 1)
    return out_fd


def _loop_factory() -> Any:
    if os.environ.get("TOOLDECK_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return None
    return uvloop.new_event_loop


async def serve_stdio(
    deck: Deck,
    *,
    stdin_fd: int = 0,
    stdout_fd: int = 1,
    max_message_bytes: int | None = None,
    handle_signals: bool = False,
) -> None:
    """Serve one session on the given file descriptors until EOF (or a signal, with ``handle_signals``)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    writer = await _open_writer(loop, stdout_fd)
    session = Session(deck, writer.send)
    limit = max_message_bytes if max_message_bytes is not None else deck.max_message_bytes
    reader = LineReader(session, limit, stop.set)
    writer.reader = reader
    closer = await _open_reader(loop, stdin_fd, reader)
    if handle_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        closer()
        tasks = session.close()
        if tasks:
            await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE)
        await writer.close()
        for fd in (stdin_fd, stdout_fd):
            _restore_blocking(fd)


class LineReader(asyncio.Protocol):
    """Splits the byte stream into lines and feeds each decoded message to the session."""

    def __init__(self, session: Session, limit: int, on_eof: Any) -> None:
        self.session = session
        self.limit = limit
        self.on_eof = on_eof
        self.transport: Any = None
        self._partial = bytearray()
        self._discarding = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
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
            message = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if line.strip():  # blank lines between messages are tolerated
                self.session.receive_error(ParseError(f"Parse error: {exc}"))
            return
        self.session.receive(message)

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


class _Writer(asyncio.Protocol):
    """Writes framed messages to stdout; stops reading stdin while the client is not reading stdout."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.reader: LineReader | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._fallback_fd: int | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self, message: Any) -> None:
        data = encode_line(message)
        if self._fallback_fd is not None:
            _write_all(self._fallback_fd, data)
        elif not self.transport.is_closing():
            self.transport.write(data)

    def pause_writing(self) -> None:
        if self.reader is not None:
            self.reader.pause()

    def resume_writing(self) -> None:
        if self.reader is not None:
            self.reader.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    async def close(self) -> None:
        if self.transport is None:
            return
        if not self.transport.is_closing():
            self.transport.close()  # flushes what is buffered, then closes
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), _SHUTDOWN_GRACE)
        except TimeoutError:
            self.transport.abort()


async def _open_writer(loop: asyncio.AbstractEventLoop, fd: int) -> _Writer:
    writer = _Writer()
    try:
        await loop.connect_write_pipe(lambda: writer, os.fdopen(fd, "wb", buffering=0, closefd=False))
    except (ValueError, OSError):
        writer._fallback_fd = fd  # a regular file cannot be polled: plain blocking writes are right for it
    return writer


async def _open_reader(loop: asyncio.AbstractEventLoop, fd: int, reader: LineReader) -> Any:
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, os.fdopen(fd, "rb", buffering=0, closefd=False))
    except (ValueError, OSError):
        return _read_in_thread(loop, fd, reader)  # stdin redirected from a regular file
    return transport.close


def _read_in_thread(loop: asyncio.AbstractEventLoop, fd: int, reader: LineReader) -> Any:
    stopped = threading.Event()

    def pump() -> None:
        while not stopped.is_set():
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            loop.call_soon_threadsafe(reader.data_received, chunk)
        if not stopped.is_set():
            loop.call_soon_threadsafe(reader.eof_received)

    threading.Thread(target=pump, name="tooldeck-stdin", daemon=True).start()
    return stopped.set


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _restore_blocking(fd: int) -> None:
    try:
        os.set_blocking(fd, True)  # leave the terminal / parent's pipe as we found it
    except OSError:
        pass
