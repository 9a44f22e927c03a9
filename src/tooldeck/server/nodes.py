"""Calls between the processes of a fleet, over the bus: one process asks another (a *node*, named by its
``Server.node_id``) to do something that only it can do, because the work or the connection it concerns lives there.

Each process listens on one topic, ``node/<its id>``, and serves the operations registered with ``serve``. A call is
``{"op": name, "args": ...}``, plus ``{"from": node, "call": n}`` when the caller waits for an answer, which comes
back on the caller's topic as ``{"re": n, "result": ...}`` or ``{"re": n, "error": {...}}`` (a JSON-RPC error,
raised again at the caller as a ``ProtocolError``). Everything is JSON, as every bus payload is.

What the bus cannot promise, these calls cannot either: a node that died, or a publication lost while Redis was out
of reach, is an answer that never comes, which ``ask`` turns into ``NodeUnreachableError`` after its timeout. The
operations in use (``task_relay.py``, ``transports/http/relay.py``) each say what they do without an answer.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from collections.abc import Callable
from typing import Any

from ..protocol.errors import InternalError, ProtocolError, TooldeckError
from .bus import Bus, Subscription

log = logging.getLogger("tooldeck.nodes")

Handler = Callable[[Any], Any]  # the args -> the result (or an awaitable of it); raises ProtocolError to refuse


class NodeUnreachableError(TooldeckError):
    """No answer came from another process in time (it died, or the bus lost the call)."""


class Nodes:
    """This process's end of the calls between the processes of a fleet (see the module docstring)."""

    def __init__(self, bus: Bus, node: str) -> None:
        self.bus = bus
        self.node = node
        self.handlers: dict[str, Handler] = {}
        self._calls = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._subscription: Subscription | None = None
        self._running: set[asyncio.Task[Any]] = set()

    def serve(self, op: str, handler: Handler) -> None:
        """Answer the calls of ``op`` from other processes with ``handler``."""
        self.handlers[op] = handler
        self._listen()

    def tell(self, node: str, op: str, args: Any) -> None:
        """Ask ``node`` to do ``op`` and wait for nothing."""
        self.bus.publish(f"node/{node}", {"op": op, "args": args})

    async def ask(self, node: str, op: str, args: Any, timeout: float = 2.0) -> Any:
        """Ask ``node`` to do ``op``; its result. Raises the node's ``ProtocolError``, or ``NodeUnreachableError``
        when no answer comes within ``timeout`` seconds."""
        self._listen()
        call = next(self._calls)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[call] = answer
        try:
            self.bus.publish(f"node/{node}", {"op": op, "args": args, "from": self.node, "call": call})
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            raise NodeUnreachableError(f"process {node} did not answer {op} within {timeout:g} s") from None
        finally:
            self._waiting.pop(call, None)

    def close(self) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None
        for task in list(self._running):
            task.cancel()

    # --- what arrives on this node's topic ----------------------------------------------------------------------

    def _listen(self) -> None:
        if self._subscription is None:
            self._subscription = self.bus.subscribe(f"node/{self.node}", self._heard)

    def _heard(self, message: Any) -> None:
        if type(message) is not dict:
            return
        if "re" in message:
            answer = self._waiting.get(message["re"])
            if answer is not None and not answer.done():
                error = message.get("error")
                if error is None:
                    answer.set_result(message.get("result"))
                else:
                    answer.set_exception(ProtocolError(error.get("message", ""), error.get("data"),
                                                       code=error.get("code")))  # fmt: skip
            return
        handler = self.handlers.get(message.get("op", ""))
        if handler is None:
            log.debug("no operation %r on this process", message.get("op"))
            return
        task = asyncio.get_running_loop().create_task(self._run(handler, message))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, handler: Handler, message: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"re": message.get("call")}
        try:
            result = handler(message.get("args"))
            if inspect.isawaitable(result):
                result = await result
            reply["result"] = result
        except ProtocolError as exc:
            reply["error"] = exc.to_error()
        except Exception:
            log.exception("operation %r asked by process %s failed", message.get("op"), message.get("from"))
            reply["error"] = InternalError("Internal error").to_error()
        if "from" in message:
            self.bus.publish(f"node/{message['from']}", reply)
