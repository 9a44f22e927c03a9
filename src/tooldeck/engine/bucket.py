"""Token buckets in Redis: ``TokenBuckets``, taking from one or several buckets atomically in one round trip.

A bucket holds at most ``burst`` tokens and refills at ``rate`` tokens per second (the arithmetic of
``security.limits.MemoryRateLimiter``, exactly). Key ``<prefix><namespace>:<name>`` is a hash: ``t`` the tokens left,
``u`` when they were counted, both as ``%.17g`` text so no bit of a double is lost. A missing bucket is a full one,
so a bucket expires when it would have refilled: memory holds only the buckets that are refilling.

Time is Redis's clock (``TIME``), the same for every process whatever their clocks say. A ``clock`` of one's own
(tests, with a clock they move) is passed in instead; Redis cannot expire keys by that clock, so its buckets are
kept a day at least.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.exceptions import NoScriptError

from .connection import UNREACHABLE, Engine, Prepared

KEEP_WITH_OWN_CLOCK_MS = 86_400_000
PREPARED_KEPT = 10_000  # takes kept packed; more, and they are all packed again

# KEYS: the buckets. ARGV[1]: now in seconds ("" for Redis's clock); ARGV[2]: "1" to take, "0" to look;
# ARGV[3]: the least expiry in ms; then rate, burst, cost for each bucket. Returns each bucket's wait ("0" when it
# has the tokens); takes from every bucket only when no wait is more than 0.
_TAKE = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[1])
end
local tokens, waits, short = {}, {}, false
for i = 1, #KEYS do
  local rate, burst, cost = tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2]), tonumber(ARGV[3 * i + 3])
  local have = burst
  local kept = redis.call('HMGET', KEYS[i], 't', 'u')
  if kept[1] then
    have = tonumber(kept[1]) + (now - tonumber(kept[2])) * rate
    if have > burst then have = burst end
  end
  tokens[i] = have
  if have >= cost then
    waits[i] = '0'
  else
    waits[i] = string.format('%.17g', (cost - have) / rate)
    short = true
  end
end
if ARGV[2] == '1' and not short then
  local least = tonumber(ARGV[3])
  for i = 1, #KEYS do
    local rate, burst, cost = tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2]), tonumber(ARGV[3 * i + 3])
    local left = tokens[i] - cost
    redis.call('HSET', KEYS[i], 't', string.format('%.17g', left), 'u', string.format('%.17g', now))
    redis.call('PEXPIRE', KEYS[i], math.max(least, math.ceil((burst - left) / rate * 1000) + 1))
  end
end
return waits
"""

Bucket = tuple[str, float, int, float]  # name, rate (tokens per second), burst, cost


class TokenBuckets:
    """Token buckets by name under ``namespace`` (see the module docstring)."""

    def __init__(self, engine: Engine, namespace: str = "bucket", *,
                 clock: Callable[[], float] | None = None) -> None:  # fmt: skip
        self.engine = engine
        self.namespace = namespace
        self.clock = clock
        self._least_expiry = KEEP_WITH_OWN_CLOCK_MS if clock is not None else 0
        self._take = engine.script(_TAKE)
        self._prepared: dict[tuple[tuple[Bucket, ...], bool], Prepared] = {}  # the takes made, packed (clock: none)

    async def take(self, buckets: Sequence[Bucket], *, take: bool = True) -> list[float]:
        """Each bucket's wait in seconds (0.0: it has the tokens); with ``take``, and only if every wait is 0.0, the
        tokens are taken from all of them, in the same atomic step. One round trip, however many buckets."""
        if self.clock is None:  # the script's arguments are the same at every take from these buckets
            prepared = self._prepared.get((tuple(buckets), take))
            if prepared is None:
                prepared = self._prepare(buckets, take)
            waits = await self._take.run(prepared)
        else:
            waits = await self._take(*self._arguments(buckets, take))
        return [float(wait) for wait in waits]

    def taking(self, buckets: Sequence[Bucket]) -> Awaitable[list[float]]:
        """``take(buckets)`` as an awaitable with one frame where it can: for buckets taken from before (the command
        is packed), the command is sent now and only its answer is awaited — the call's hot path, which a chain of
        coroutines would walk again when the answer comes."""
        if self.clock is None:
            prepared = self._prepared.get((tuple(buckets), True))
            if prepared is not None:
                pending = self._take.send(prepared)
                if pending is not None:
                    return self._waits(buckets, pending)
        return self.take(buckets)

    async def _waits(self, buckets: Sequence[Bucket], pending: asyncio.Future[Any]) -> list[float]:
        try:
            waits = await pending
        except NoScriptError:  # the server forgot the script (a restart): nothing ran; take loads it and asks again
            return await self.take(buckets)
        except UNREACHABLE as exc:
            raise self.engine.unavailable(exc) from exc
        return [float(wait) for wait in waits]

    def _prepare(self, buckets: Sequence[Bucket], take: bool) -> Prepared:
        if len(self._prepared) >= PREPARED_KEPT:
            self._prepared.clear()
        prepared = self._prepared[(tuple(buckets), take)] = self._take.prepare(*self._arguments(buckets, take))
        return prepared

    def _arguments(self, buckets: Sequence[Bucket], take: bool) -> tuple[list[str], list[float | int | str]]:
        args: list[float | int | str] = ["" if self.clock is None else self.clock(), "1" if take else "0",
                                         self._least_expiry]  # fmt: skip
        for _, rate, burst, cost in buckets:
            args += [float(rate), int(burst), float(cost)]
        return [self.engine.key(self.namespace, name) for name, *_ in buckets], args
