"""The engine's command line to Redis: one connection that carries every command of the process at once, each
answered in the order it was sent (RESP pipelining), parsed by hiredis.

Why not the client's pool for these: a pooled command of ``redis.asyncio`` takes a connection, wraps its write and
its read in timeouts and gives the connection back, which costs several times the round trip itself on a call
whose only shared work is one script. Here a command is a write and a future: commands sent while others wait ride
the same connection, and the commands of one turn of the event loop go out in one write, so many calls in flight
cost one connection and few system calls.

What it guarantees:

- **In order.** Redis answers a connection's commands in the order they came, so the answers fill the waiting
  futures front to back. A waiter that gave up (its request was cancelled) still takes its answer off the line.
- **A stuck server is noticed once.** A watchdog looks at the oldest unanswered command every ``timeout`` seconds;
  if it was sent longer ago than ``timeout``, nothing behind it can be answered either, so the connection is dropped
  and every waiter fails with ``TimeoutError``.
- **Never sent twice.** A command is retried on a new connection only if it was never written (the line was
  already down when it was sent); one written on a connection that was then lost fails with ``ConnectionError``,
  since it may have run (a take or a spend run twice would be wrong).

Both errors are ``OSError``s, which ``Engine.reaching`` turns into ``BackendUnavailableError``, as it does a
server's ``LOADING`` answer (it restarted and is still reading its data back; the client's ``BusyLoadingError``).
``rediss://`` (TLS) is not carried here: the engine keeps its client's pool for it.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import hiredis
from redis.exceptions import BusyLoadingError, NoScriptError, ResponseError


def pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP: an array of bulk strings (str as UTF-8, int and float as their digits, bytes as they
    are)."""
    return b"*%d\r\n" % len(args) + bulk(args)


def bulk(args: tuple[Any, ...] | list[Any]) -> bytes:
    """``args`` as RESP bulk strings, with no array header: the parts of a command packed once (``pack``'s head and
    these, joined, are the command)."""
    parts: list[bytes] = []
    append = parts.append
    for arg in args:
        kind = type(arg)
        if kind is str:
            data = arg.encode()
        elif kind is bytes:
            data = arg
        elif kind is int or kind is float:
            data = repr(arg).encode()
        else:
            data = _other(arg)
        append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _other(arg: Any) -> bytes:
    """An argument of a subclass of bytes, str, int or float (not bool) as ``pack`` writes it; else TypeError."""
    if isinstance(arg, bytes):
        return bytes(arg)
    if isinstance(arg, str):
        return str(arg).encode()
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(float(arg) if isinstance(arg, float) else int(arg)).encode()
    raise TypeError(f"a Redis argument must be bytes, str, int or float, got {type(arg).__name__}")


def _error(reply: ResponseError) -> Exception:
    message = str(reply)
    if message.startswith("NOSCRIPT"):
        return NoScriptError(message)
    if message.startswith("LOADING "):  # a server that restarted and is reading its data back: not there yet
        return BusyLoadingError(message.removeprefix("LOADING "))
    return reply


class _Line(asyncio.Protocol):
    """One connection: futures waiting for their answers, in the order their commands were written."""

    observe: Callable[[float], None] | None = None  # told each answer's wait in seconds (the deck's metrics)

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self.loop = loop
        self.timeout = timeout
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.outgoing: list[bytes] = []  # commands sent in this turn of the loop, written together at its end
        self._watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        waiting = self.waiting
        while True:
            reply = reader.gets()
            if reply is False:
                return
            if not waiting:  # an answer to nothing: the line cannot be trusted any more
                self.drop(ConnectionError("Redis answered a command that was not sent"))
                return
            future, sent = waiting.popleft()
            if self.observe is not None:
                self.observe(time.monotonic() - sent)
            if not future.done():
                if isinstance(reply, ResponseError):
                    future.set_exception(_error(reply))
                else:
                    future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError(f"the connection was lost{f': {exc}' if exc else ''}"))

    def send(self, packed: bytes, *, hold: bool = False) -> asyncio.Future[Any]:
        """Send one command: at once on an idle line (no command written waits for its answer: one call at a time
        costs no turn of the loop), together with the commands held so far; while others wait, or with ``hold``, at
        the end of this turn of the loop, with the others of the turn (a command whose answer is wanted later rides
        with the one the turn sends next)."""
        future = self.loop.create_future()
        outgoing = self.outgoing
        idle = len(self.waiting) == len(outgoing) and not hold  # every command waiting is one not written yet
        self.waiting.append((future, time.monotonic()))
        if idle and not self.closed:
            outgoing.append(packed)
            self._flush()  # with what the turn held: its scheduled flush, if any, finds nothing left
        else:
            if not outgoing:
                self.loop.call_soon(self._flush)
            outgoing.append(packed)
        if self._watchdog is None:
            self._watchdog = self.loop.call_later(self.timeout, self._watch)
        return future

    def _flush(self) -> None:
        """Write what this turn of the loop sent, in one system call."""
        outgoing, self.outgoing = self.outgoing, []
        if outgoing and not self.closed:
            self.transport.write(b"".join(outgoing))  # type: ignore[union-attr]

    def _watch(self) -> None:
        self._watchdog = None
        if not self.waiting:
            return
        sent = self.waiting[0][1]
        overdue = time.monotonic() - sent
        if overdue >= self.timeout:
            self.drop(TimeoutError(f"no answer within {self.timeout:g} s"))
        else:
            self._watchdog = self.loop.call_later(self.timeout - overdue, self._watch)

    def drop(self, exc: Exception) -> None:
        self.fail(exc)
        if self.transport is not None:
            self.transport.abort()

    def fail(self, exc: Exception) -> None:
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        while self.waiting:
            future = self.waiting.popleft()[0]
            if not future.done():
                future.set_exception(exc)


class Wire:
    """Commands to one Redis over one multiplexed connection, made on first use and made again after a loss."""

    def __init__(self, parts: Any, *, db: int, timeout: float) -> None:
        self._parts = parts  # the URL's urlsplit() parts
        self._db = db
        self.timeout = timeout
        self._line: _Line | None = None
        self._connecting: asyncio.Future[_Line] | None = None
        self.observe: Callable[[float], None] | None = None  # each answer's wait, in seconds (the deck's metrics)

    async def command(self, *args: Any) -> Any:
        """Send one command and wait for its answer."""
        line = self._line
        if line is None or line.closed:
            line = await self._connect()
        return await line.send(pack(args))

    async def command_packed(self, packed: bytes) -> Any:
        """``command`` for a command already packed (``pack``): one sent again and again is packed once."""
        line = self._line
        if line is None or line.closed:
            line = await self._connect()
        return await line.send(packed)

    def watch(self, observe: Callable[[float], None] | None) -> None:
        """Have ``observe`` told each answer's wait in seconds, on this line and on any made again later."""
        self.observe = observe
        if self._line is not None:
            self._line.observe = observe

    def send_soon(self, *args: Any) -> asyncio.Future[Any] | None:
        """Send one command with the others of this turn of the loop (``_Line.send`` with ``hold``) and return its
        answer's future without waiting; None when the line is not up (then ``command`` connects)."""
        line = self._line
        if line is None or line.closed:
            return None
        return line.send(pack(args), hold=True)

    def send_packed(self, packed: bytes) -> asyncio.Future[Any] | None:
        """``command_packed`` without a coroutine: the command sent now (``_Line.send``), its answer's future; None
        when the line is not up (then ``command_packed`` connects)."""
        line = self._line
        if line is None or line.closed:
            return None
        return line.send(packed)

    def send_packed_soon(self, packed: bytes) -> asyncio.Future[Any] | None:
        """``send_soon`` for a command already packed."""
        line = self._line
        if line is None or line.closed:
            return None
        return line.send(packed, hold=True)

    async def _connect(self) -> _Line:
        if self._connecting is not None:
            return await asyncio.shield(self._connecting)
        loop = asyncio.get_running_loop()
        self._connecting = loop.create_future()
        try:
            line = await asyncio.wait_for(self._open(loop), self.timeout)
        except BaseException as exc:
            self._connecting.set_exception(exc)
            self._connecting.exception()  # retrieved: a failed connect with no other waiter is not "never retrieved"
            raise
        else:
            self._line = line
            line.observe = self.observe
            self._connecting.set_result(line)
            return line
        finally:
            self._connecting = None

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Line:
        parts = self._parts
        timeout = self.timeout
        if parts.scheme == "unix":
            _, line = await loop.create_unix_connection(lambda: _Line(loop, timeout), unquote(parts.path))
        else:
            _, line = await loop.create_connection(lambda: _Line(loop, timeout), parts.hostname or "127.0.0.1",
                                                   parts.port or 6379)  # fmt: skip
        hello: list[asyncio.Future[Any]] = []
        if parts.password is not None:
            user = unquote(parts.username) if parts.username else "default"
            hello.append(line.send(pack(("AUTH", user, unquote(parts.password)))))
        if self._db:
            hello.append(line.send(pack(("SELECT", self._db))))
        try:
            for answer in hello:
                await answer
        except BaseException:
            line.drop(ConnectionError("the connection was refused its AUTH or SELECT"))
            raise
        return line

    def close(self) -> None:
        if self._line is not None:
            self._line.drop(ConnectionError("the engine was closed"))
            self._line = None
