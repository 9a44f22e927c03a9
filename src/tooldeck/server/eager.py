"""Running tooldeck's own request coroutines eagerly: most finish without ever waiting, and then need no task.

Only for tooldeck's handlers (task and listing methods), never for user code: during the first step there is no
current asyncio task, which user code may rely on (``asyncio.timeout``, task groups). A coroutine that does wait is
handed, mid-flight, to a real task through ``Resume``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any


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
