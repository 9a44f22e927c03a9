"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, and nothing else on stdout, ever.

``run_stdio`` takes the real stdout for protocol messages and points file descriptor 1 at stderr, so a stray
``print()`` in a tool, a C extension or a child process cannot corrupt the stream. A line longer than the limit is
answered with an error and discarded without being buffered. EOF on stdin ends the server the way the spec's stdio
shutdown expects (the client closes stdin and waits for the server to exit): the requests already received are
finished, within ``drain_timeout`` seconds, then the process exits with status 0. SIGTERM or SIGINT cancel work in
flight at once and exit with status 0, even while a sync tool is running (its late result is dropped). stdin and
stdout may be pipes, sockets, terminals, regular files or other character devices (``tooldeck serve <
requests.jsonl > /dev/null``).

The era of a connection is fixed by its first request (as the official SDKs do): 2026-07-28 (stateless, each request
on its own) iff that request is not ``initialize`` and its ``params._meta`` holds the protocolVersion key; the 2025
era otherwise. The check is made once; afterwards messages go straight to the session's input for that era.

Start-up is two-phase. The sans-IO session answers the handshake (initialize, ping, tools/list, ...) with plain
blocking reads and writes, before asyncio is even imported; the event loop starts when a message needs it (a
tools/call) or when the client goes quiet after its first answer. A host that starts a server and waits for the
initialize reply never waits for the event loop's ~30 ms of imports.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol import envelope
from ..protocol.codec import decode, encode_line
from ..protocol.errors import InvalidRequestError, ProtocolError
from ..server.session import Session

if TYPE_CHECKING:
    import asyncio

    from ..server.core import Server

log = logging.getLogger("tooldeck.stdio")
_SHUTDOWN_GRACE = 5.0  # seconds to let cancelled work unwind before exiting
DRAIN_TIMEOUT = 10.0  # seconds to finish the requests already received after EOF
_CHUNK = 65536


def run_stdio(
    deck: Server,
    *,
    max_message_bytes: int | None = None,
    stdout_fd: int | None = None,
    drain_timeout: float = DRAIN_TIMEOUT,
    stdin_fd: int = 0,
) -> None:
    """Serve ``deck`` on this process's stdin/stdout until EOF or a termination signal.

    ``stdout_fd``: the protocol's output if ``claim_stdout`` was already called (the CLI claims it before it
    imports the user's module, so even import-time prints stay off the protocol stream). ``drain_timeout``: how
    long the requests received before EOF may take to finish.
    """
    out_fd = stdout_fd if stdout_fd is not None else claim_stdout()
    connection = Connection(deck, stdin_fd, out_fd, max_message_bytes, drain_timeout)
    previous = signal.signal(signal.SIGTERM, _stop_handshake)  # until the event loop installs its own handler
    # Shared backends are reached first, in the loop that will serve (their connections belong to it): one that
    # cannot be reached ends the run with one line, before the client is answered anything.
    runner = _open_shared(deck) if deck.backends.engine is not None else None
    try:
        if not connection.handshake():
            connection.session.close()
            if runner is not None:
                runner.run(deck.aclose())
                runner.close()
            return  # EOF before anything needed the event loop
        # From here until serve() installs the loop's handlers, SIGTERM is noted, not raised: raised inside one of
        # the loop's callbacks it would be logged there and lost, and the server would keep running.
        signal.signal(signal.SIGTERM, connection.note_stop)
        import asyncio

        from ..server import heap

        heap.settle()
        with runner or asyncio.Runner(loop_factory=_loop_factory()) as running:
            running.run(connection.serve())
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _open_shared(deck: Server) -> Any:
    """A runner whose loop has opened the deck's shared backends; ``TargetError`` (one line) when it cannot."""
    import asyncio

    from ..protocol.errors import TargetError

    runner = asyncio.Runner(loop_factory=_loop_factory())
    try:
        runner.run(deck.open_backends())
    except Exception as exc:
        runner.run(deck.backends.aclose())
        runner.close()
        raise TargetError(str(exc)) from None
    return runner


class _Stopped(Exception):
    """SIGTERM arrived during the handshake phase (blocking reads, no event loop yet)."""


def _stop_handshake(signum: int, frame: Any) -> None:
    raise _Stopped


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
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class Connection:
    """One stdio client: the session, the line reader and the output, across both phases."""

    def __init__(self, server: Server, stdin_fd: int, stdout_fd: int, max_message_bytes: int | None,
                 drain_timeout: float = DRAIN_TIMEOUT) -> None:  # fmt: skip
        self.stdin_fd = stdin_fd
        self.output = Output(stdout_fd)
        self.session = Session(server, self.output.send, principal=server.local_principal())
        limit = max_message_bytes if max_message_bytes is not None else server.options.max_message_bytes
        self.reader = LineReader(self.session, limit)
        self.drain_timeout = drain_timeout
        self._deferred: list[Any] = []
        self.stop_noted = False  # SIGTERM came between the handshake and the loop's own handlers
        self.dispatch: Callable[[Any], None] = self._first  # the session's input once the era is known
        self.reader.deliver = self.dispatch

    def _first(self, message: Any) -> None:
        """Until the first request: decide the connection's era from it, then hand everything on directly."""
        if type(message) is dict and "id" in message and type(message.get("method")) is str:
            session = self.session
            if message["method"] != "initialize" and envelope.claims_modern(message.get("params")):
                self.dispatch = session.receive_stateless
            else:
                session.refuse_envelope = True
                self.dispatch = session.receive
            if self.reader.deliver == self._first:
                self.reader.deliver = self.dispatch
        if self.dispatch == self._first:
            self.session.receive(message)  # no request yet (a notification, something invalid): the 2025 rules
        else:
            self.dispatch(message)

    def _quiet(self) -> bool:
        runner = self.session.runner
        return runner is None or not runner.in_flight

    def note_stop(self, signum: int, frame: Any) -> None:
        self.stop_noted = True

    def handshake(self) -> bool:
        """Serve what needs no event loop with blocking I/O; False if the client hung up meanwhile."""
        session, deferred = self.session, self._deferred

        def gate(message: Any) -> None:
            if deferred or not session.answers_now(message):
                deferred.append(message)  # kept in order for the event loop
            else:
                self.dispatch(message)

        self.reader.deliver = gate
        try:
            while not deferred:
                if self.output.count and not _readable(self.stdin_fd):
                    break  # answered, and the client is quiet: a good moment to load the event loop
                chunk = os.read(self.stdin_fd, _CHUNK)
                if not chunk:
                    return False
                self.reader.data_received(chunk)
        finally:
            self.reader.deliver = self.dispatch
        return True

    async def serve(self) -> None:
        """Serve on the event loop until EOF (then finish what was asked), SIGTERM or SIGINT (then stop at once)."""
        import asyncio

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()  # a termination signal
        eof = asyncio.Event()  # the client closed stdin
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        from .signals import reload_on_hangup

        reload_on_hangup(loop, self.session.server)  # SIGHUP: the policy file read again
        if self.stop_noted:
            stop.set()
        server = self.session.server
        server.bind_loop()  # list changes from other threads are announced on this loop from now on
        self.reader.on_eof = eof.set
        closer: Any = _nothing
        try:
            # One socket for both (inetd, socket activation): read and written without the loop's pipe transports,
            # since one that writes takes data arriving on its socket for the peer hanging up, and closes.
            watch = not one_socket(self.stdin_fd, self.output.fd)
            await self.output.start(loop, self.reader, watch)
            self.reader.output = self.output
            self.output.quiet = self._quiet
            deferred, self._deferred = self._deferred, []
            for message in deferred:
                self.dispatch(message)
            closer = await _open_reader(loop, self.stdin_fd, self.reader, watch)
            await _first(stop.wait(), eof.wait())
            if not stop.is_set():
                await self._drain(stop)
        finally:
            closer()
            tasks = self.session.close()
            if tasks:
                await asyncio.wait(tasks, timeout=_SHUTDOWN_GRACE)
            await server.aclose()
            await self.output.close()
            for fd in (self.stdin_fd, self.output.fd):
                _restore_blocking(fd)

    async def _drain(self, stop: Any) -> None:
        """After EOF: let the requests already received finish (answers included), unless a signal or the drain
        time-out comes first."""
        import asyncio

        running = self.session.drain()
        if running and not await _first(asyncio.wait(running), stop.wait(), timeout=self.drain_timeout):
            log.warning("stdin closed: %d request(s) still running after %g s are cancelled",
                        len(self.session.drain()), self.drain_timeout)  # fmt: skip


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
            if self.holding:
                batch.append(data)
            elif "method" not in message and self.quiet():  # the answer to the last request running: at once
                if batch:
                    batch.append(data)
                    self.flush()  # the turn's scheduled flush finds nothing left
                else:
                    transport.write(data)
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
            await asyncio.wait_for(asyncio.shield(self._closed), _SHUTDOWN_GRACE)
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


def one_socket(a: int, b: int) -> bool:
    """Whether descriptors ``a`` and ``b`` are the same socket."""
    try:
        first, second = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return stat.S_ISSOCK(first.st_mode) and (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


async def _open_reader(loop: asyncio.AbstractEventLoop, fd: int, reader: LineReader, watch: bool = True) -> Any:
    """Start reading ``fd`` into ``reader``; the function that stops it."""
    if not watch or not pollable(fd):
        return _read_in_thread(loop, fd, reader)  # a regular file, /dev/null, or the socket stdout is too
    try:
        pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
        transport, _ = await loop.connect_read_pipe(lambda: reader, pipe)  # type: ignore[type-var]
    except (ValueError, OSError):
        return _read_in_thread(loop, fd, reader)
    return transport.close


def _read_in_thread(loop: asyncio.AbstractEventLoop, fd: int, reader: LineReader) -> Any:
    stopped = threading.Event()

    def pump() -> None:
        try:
            while not stopped.is_set():
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    break
                loop.call_soon_threadsafe(reader.data_received, chunk)
            if not stopped.is_set():
                loop.call_soon_threadsafe(reader.eof_received)
        except (OSError, RuntimeError):  # stdin closed under us, or the loop ended first: the server is going
            pass

    threading.Thread(target=pump, name="tooldeck-stdin", daemon=True).start()
    return stopped.set


def _nothing() -> None:
    return None


async def _first(*waits: Any, timeout: float | None = None) -> bool:
    """Wait until the first of ``waits`` is done (False if ``timeout`` seconds pass first); cancel the others."""
    import asyncio

    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        return bool(done)
    finally:
        for task in tasks:
            task.cancel()


def _readable(fd: int) -> bool:
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True


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
