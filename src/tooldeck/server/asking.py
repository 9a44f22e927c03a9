"""How a running call asks its client something (elicitation, sampling, roots): one small ``Asker`` Protocol, and
the three ways a question reaches the client, one per kind of request.

- **A 2025 request** sends the client a request of its own (``ClientRequests``, here): the session's ``ask``, awaited
  with a time-out, and abandoned (notifications/cancelled) when the time runs out or the call is cancelled. In a 2025
  task the request names its task, and the task is ``input_required`` while it waits.
- **A 2026-07-28 request** may send the client nothing: the first question without an answer ends the run, and the
  request is answered with an input-required result (``rounds.Rounds``; the client's retry carries the answers).
- **A 2026-07-28 task** parks the question in its ``inputRequests`` until ``tasks/update`` answers it
  (``task_inputs.TaskInputs``).

``Context`` picks the asker for each question (``Context._asker``: the era of the request, and whether the call is
a task by then, which ``ctx.continue_as_task()`` may change between two questions) and then treats all three alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..protocol.errors import ClientRequestError
from ..protocol.jsonrpc import RequestId

RELATED_TASK = "io.modelcontextprotocol/related-task"


class Asker(Protocol):
    """Where a call's questions go. ``key`` names the question (2026-07-28 questions are keyed in ``inputRequests``:
    the tool's key or the next ``input-N``), ``memo`` keeps a value every round of the question must see again (a
    URL elicitation's id), ``ask`` returns the client's result for it or raises ``ClientRequestError``."""

    def key(self, key: str | None) -> str: ...

    def memo(self, name: str, make: Callable[[], Any]) -> Any: ...

    async def ask(self, key: str, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]: ...


class Requester(Protocol):
    """A peer that can send the client requests of its own: a 2025 session (``Session.ask``, ``Session.abandon``)."""

    def ask(self, method: str, params: dict[str, Any], related: RequestId | None) -> tuple[RequestId, Awaitable[Any]]:
        """Send a request to the client: its id, and an awaitable of its ``Response``."""
        ...

    def abandon(self, request_id: RequestId, reason: str, related: RequestId | None) -> None:
        """Stop waiting for a request sent to the client, and tell it so (notifications/cancelled)."""
        ...


class ClientRequests:
    """The asker of a 2025 request: each question is a request to the client, tied to the call's request
    (``related``); ``task`` is ``(TaskManager, task id)`` when the call runs as a 2025 task."""

    __slots__ = ("peer", "related", "task")

    def __init__(self, peer: Requester, related: RequestId, task: tuple[Any, str] | None = None) -> None:
        self.peer = peer
        self.related = related
        self.task = task

    def key(self, key: str | None) -> str:
        """A 2025 question is told apart by its request id: the tool's key is not sent."""
        return "" if key is None else key

    def memo(self, name: str, make: Callable[[], Any]) -> Any:
        """A 2025 question is asked once: nothing to remember between rounds."""
        return make()

    async def ask(self, key: str, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self.task is None:
            return await self._request(method, params, timeout)
        # In a task: the request names the task, and the task waits in "input_required" until it is answered.
        manager, task_id = self.task
        params["_meta"] = {RELATED_TASK: {"taskId": task_id}}
        await manager.settle(task_id, "input_required")
        try:
            return await self._request(method, params, timeout)
        finally:
            await manager.settle(task_id, "working")

    async def _request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``method`` to the client and return its result; errors and time-outs become ClientRequestError."""
        import asyncio  # not at import time: a session's handshake runs before the event loop loads

        peer, related = self.peer, self.related
        request_id, waiter = peer.ask(method, params, related)
        try:
            response = await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            peer.abandon(request_id, f"no answer within {timeout:g} s", related)
            raise ClientRequestError(f"the client did not answer {method} within {timeout:g} s") from None
        except asyncio.CancelledError:
            peer.abandon(request_id, "the tool call was cancelled", related)
            raise
        except ConnectionError as exc:
            raise ClientRequestError(f"{method} could not complete: {exc}") from None
        if response.error is not None:
            error = response.error
            raise ClientRequestError(f"the client refused {method}: {error.get('message')} ({error.get('code')})",
                                     code=error.get("code"))  # fmt: skip
        return response.result
