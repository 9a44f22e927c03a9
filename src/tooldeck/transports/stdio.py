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
from ..server.session import Session
from .stdio_lines import SHUTDOWN_GRACE, LineReader, Output, pollable

if TYPE_CHECKING:
    import asyncio

    from ..server.core import Server

log = logging.getLogger("tooldeck.stdio")
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

    def _busy(self) -> bool:
        runner = self.session.runner
        return runner is not None and len(runner.in_flight) > 1

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
            server.busy = self._busy
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
                await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
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


def _restore_blocking(fd: int) -> None:
    try:
        os.set_blocking(fd, True)  # leave the terminal / parent's pipe as we found it
    except OSError:
        pass
