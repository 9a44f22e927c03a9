"""``RedisRateLimiter``: token buckets in Redis or Valkey, exact across every process of a fleet.

Each call is one round trip running one Lua script (``engine/bucket.py``), which reads, refills and takes atomically:
of any number of processes taking from one bucket at once, never more are admitted than it holds. Taking from several
buckets (``acquire_all_async``, which ``RateLimits`` uses) is one script too, so a call is admitted by every bucket
or takes from none. Key ``<prefix>bucket:<key>``; a bucket expires once it would have refilled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ..engine.bucket import TokenBuckets
from ..engine.connection import Engine
from .limits import _check


class RedisRateLimiter:
    """An ``AsyncRateLimiter`` over an ``Engine``. Time is Redis's clock unless a ``clock`` is given (tests)."""

    def __init__(self, engine: Engine, *, clock: Callable[[], float] | None = None) -> None:
        self._buckets = TokenBuckets(engine, "bucket", clock=clock)

    async def acquire_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        _check(rate, burst, cost)
        (wait,) = await self._buckets.take([(key, rate, burst, cost)])
        return wait

    async def peek_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        _check(rate, burst, cost)
        (wait,) = await self._buckets.take([(key, rate, burst, cost)], take=False)
        return wait

    def acquire_all_async(self, buckets: Sequence[tuple[str, float, int, float]]) -> Awaitable[list[float]]:
        """Take from every one of ``buckets`` (distinct ``(key, rate, burst, cost)``) or from none, atomically: the
        waits, all 0.0 when taken (``MemoryRateLimiter.acquire_all``, awaited). Not a coroutine of its own: what it
        returns is the one frame that waits for the answer (``TokenBuckets.taking``)."""
        for _, rate, burst, cost in buckets:
            _check(rate, burst, cost)
        return self._buckets.taking(buckets)
