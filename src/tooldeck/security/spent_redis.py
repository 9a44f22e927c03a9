"""The ``SpentStore`` of a fleet: single-use marks in Redis (``SET NX PX``), so a request state spent by one process
is refused by every other. Key ``<prefix>spent:<name>``, gone when what it guarded has expired."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.connection import Engine


class RedisSpentStore:
    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        from ..engine.spent import SpentMarks

        self.marks = SpentMarks(engine)
        self.clock = clock

    async def spend(self, key: str, until: float) -> bool:
        ttl = until - self.clock()
        if not ttl > 0:
            return True  # already expired: nothing it guards can be accepted any more, and nothing to remember
        return await self.marks.spend(key, ttl)
