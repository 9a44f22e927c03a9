"""The runner: the one place where a session's request work meets the event loop.

Contract. ``start(rctx, reply, work, inline=...)`` takes the ``Work`` a handler returned and guarantees:

- the request is tracked in ``in_flight`` (by request id) from ``start`` until its work ends, so
  ``cancel(request_id)`` can stop it;
- its reply is sent exactly once (the result, or the error its work raised: a ``ProtocolError`` as itself, anything
  else as a logged -32603) — unless it was cancelled first, and then never (the spec: no response to a cancelled
  request);
- how it runs is the runner's choice, from three shapes of work:
    * ``Work(own=True)`` (tooldeck's own coroutines, never user code) starts *eagerly*: its first step runs inside
      ``start``; if it finishes without waiting, the reply leaves before ``start`` returns and no task is made;
      otherwise it continues, mid-flight, in a task (``Resume``). User code never runs this way: during an eager
      first step there is no current task, which ``asyncio.timeout`` and task groups rely on;
    * ``inline=True`` for work that does not stream (no Context): ``start`` returns an awaitable that the transport
      awaits in the task it already has (HTTP: one task and one loop turn fewer per call);
    * anything else runs in a task of its own.

The runner also owns the session's requests *to* the client (``ask`` / ``resolve`` / ``abandon``): their ids are
``"<node>-<n>"`` strings, ``n`` counting up, so they never repeat — not even across the processes that serve one
session, each with its own node id (a response that reaches another process finds its way back through the bus) —
and each has a future that the client's response (or the session's end) settles.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

from ..protocol import jsonrpc
from ..protocol.errors import InternalError, ProtocolError, RefusedError
from ..protocol.jsonrpc import RequestId, Response
from . import logs, tracing
from .request import RequestContext, Work

# What asyncio.current_task(loop) reads, read directly on every inline request (3.11's current_task is a function of
# Python around this map: a call fewer); asyncio.current_task itself where no such map is kept.
_tasks_by_loop: Any = getattr(asyncio.tasks, "_current_tasks", None)
current_task_of: Callable[[asyncio.AbstractEventLoop], Any] = (
    asyncio.current_task if _tasks_by_loop is None else _tasks_by_loop.get
)

log = logging.getLogger("tooldeck.runner")


class Flight:
    """A request whose work is running."""

    __slots__ = ("reply", "request", "task")

    def __init__(self, request: RequestContext, reply: Any) -> None:
        self.request = request
        self.reply = reply
        self.task: asyncio.Task[Any] | None = None


class Runner:
    """Runs one session's request work on one event loop (bound at creation: ``get_running_loop()`` costs a system
    call on every use in Python 3.11)."""

    __slots__ = ("_next_id", "closed", "in_flight", "loop", "outgoing", "prefix", "refused")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, node: str = "0") -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.prefix = f"{node}-"  # of the ids of its requests to the client: the node id of its process
        self.in_flight: dict[RequestId, Flight] = {}
        self.outgoing: dict[RequestId, asyncio.Future[Response]] = {}
        self.refused: Callable[[RequestId, RefusedError], None] | None = None  # transport hook: HTTP status, headers
        self._next_id = 0
        self.closed = False

    # --- requests from the client -------------------------------------------------------------------------------

    def start(self, rctx: RequestContext, reply: Any, work: Work, inline: bool = False) -> Awaitable[None] | None:
        """Run ``work`` for the request ``rctx`` and reply when it ends (see the module's contract)."""
        request_id = rctx.request_id
        if work.own:
            coro = work.coro
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                reply(jsonrpc.result(request_id, stop.value))
                return None
            except Exception as exc:
                reply(failure(request_id, exc, self.refused))
                return None
            flight = Flight(rctx, reply)
            self.in_flight[request_id] = flight
            flight.task = self.loop.create_task(self._run(flight, Resume(coro, yielded)))
            return None
        flight = Flight(rctx, reply)
        self.in_flight[request_id] = flight
        run = self._run(flight, work.coro)
        if inline and not work.streams:
            flight.task = current_task_of(self.loop)
            return run
        flight.task = self.loop.create_task(run)
        return None

    async def _run(self, flight: Flight, work: Any) -> None:
        request_id = flight.request.request_id
        token = entered(flight.request, flight.reply) if logs.contextual or tracing.active else None
        try:
            try:
                message = {"jsonrpc": "2.0", "id": request_id, "result": await work}  # (jsonrpc.result, inline)
            except asyncio.CancelledError:
                return  # cancelled by the client or by shutdown: no response, as the spec asks
            except Exception as exc:
                message = failure(request_id, exc, self.refused)
            if self.in_flight.get(request_id) is not flight:
                return  # cancelled while finishing (the work swallowed the cancellation): still no response
            del self.in_flight[request_id]
            flight.reply(message)
        finally:
            if token is not None:
                flight.request.server.tracing.detach(token)

    def cancel(self, request_id: RequestId) -> Flight | None:
        """Stop a running request: no response will be sent. None if it is unknown or already answered."""
        flight = self.in_flight.pop(request_id, None)
        if flight is None:
            return None
        flight.request.cancel()
        drop = getattr(flight.reply, "drop", None)
        if drop is not None:
            drop()
        if flight.task is not None:
            flight.task.cancel()
        return flight

    # --- requests to the client ---------------------------------------------------------------------------------

    def ask(
        self, send: Callable[[Any, Any], None], method: str, params: dict[str, Any], related: RequestId | None
    ) -> tuple[RequestId, asyncio.Future[Response]]:
        """Send a request to the client through ``send``: its id, and a future that gets its ``Response``."""
        self._next_id += 1
        request_id = f"{self.prefix}{self._next_id}"
        waiter: asyncio.Future[Response] = self.loop.create_future()
        if self.closed:
            waiter.set_exception(ConnectionError("the session is closed"))
            return request_id, waiter
        self.outgoing[request_id] = waiter
        send(jsonrpc.request(request_id, method, params), related)
        return request_id, waiter

    def resolve(self, response: Response) -> bool:
        """The client answered one of our requests; False if nobody is waiting for that id."""
        waiter = self.outgoing.pop(response.id, None)
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(response)
        return True

    def abandon(self, request_id: RequestId) -> bool:
        """Stop waiting for one of our requests; True if it was still open (the caller then tells the client)."""
        return self.outgoing.pop(request_id, None) is not None

    # --- the end ------------------------------------------------------------------------------------------------

    def close(self) -> list[asyncio.Task[Any]]:
        """Cancel every running request and fail every open request to the client; the tasks, to be awaited."""
        self.closed = True
        tasks = []
        for flight in self.in_flight.values():
            flight.request.cancel()
            if flight.task is not None:
                flight.task.cancel()
                tasks.append(flight.task)
        self.in_flight.clear()
        for waiter in self.outgoing.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the session closed before the client answered"))
        self.outgoing.clear()
        return tasks

    def running(self) -> list[asyncio.Task[Any]]:
        """The tasks of the requests still running (for a transport that lets them finish before it goes)."""
        return [f.task for f in self.in_flight.values() if f.task is not None and not f.task.done()]


def entered(rctx: RequestContext, reply: Any) -> Any:
    """What running a request's work begins with: its JSON log lines name it (logs.py), and its span is current
    (tracing.py). The token to detach that span with when the work ends; None: no span."""
    if logs.contextual:
        logs.REQUEST.set(rctx)
    if tracing.active:
        span = getattr(reply, "span", None)
        if span is not None:
            return rctx.server.tracing.current(span)
    return None


def failure(request_id: RequestId, exc: Exception,
            refused: Callable[[RequestId, RefusedError], None] | None) -> dict[str, Any]:  # fmt: skip
    """The error response for work that raised: its own code for a ProtocolError (a refusal also told to ``refused``,
    for its HTTP status), else a logged -32603."""
    if isinstance(exc, ProtocolError):
        if isinstance(exc, RefusedError) and refused is not None:
            refused(request_id, exc)
        return jsonrpc.error(request_id, exc)
    log.error("request %r failed", request_id, exc_info=exc)
    return jsonrpc.error(request_id, InternalError("Internal error"))


class Resume:
    """Awaitable that continues a coroutine already started by hand, from the value its first step yielded."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, to_yield = self._coro, self._yielded
        while True:  # what `yield from coro` does, picked up after its first step
            try:
                sent = yield to_yield
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and other throws go into the coroutine
                try:
                    to_yield = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    to_yield = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
