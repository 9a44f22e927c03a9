"""Single-use marks: the ``SpentStore`` seam, and its bounded in-memory version.

What may be used only once — the sealed ``requestState`` of a 2026-07-28 confirmation, say — is spent by marking a
key: the first ``spend`` of a key answers True, every later one False, until the mark expires (a mark never needs
to outlive what it guards: an expired state is refused anyway). Every process serving a deck must share one store
for "once" to mean once across them (``server/backends.py``); the in-memory one is this process's.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class SpentStore(Protocol):
    async def spend(self, key: str, until: float) -> bool:
        """Mark ``key`` spent until ``until`` (seconds since the epoch): True if it was not spent before."""
        ...


class MemorySpentStore:
    """Spent keys of this process, each until its expiry, at most ``max_keys`` of them: past that the oldest mark is
    forgotten early (it guards something that expires soon after)."""

    def __init__(self, max_keys: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        self.max_keys = max_keys
        self.clock = clock
        self._spent: OrderedDict[str, float] = OrderedDict()  # key -> until, oldest first

    async def spend(self, key: str, until: float) -> bool:
        spent = self._spent
        now = self.clock()
        while spent and next(iter(spent.values())) <= now:
            spent.popitem(last=False)
        if key in spent:
            return False
        if len(spent) >= self.max_keys:
            spent.popitem(last=False)
        spent[key] = until
        return True
