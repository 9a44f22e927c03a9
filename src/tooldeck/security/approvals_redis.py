"""``RedisApprovalStore``: the approvals waiting in a fleet's processes, in Redis or Valkey (security/approvals.py).

Key ``<prefix>approval:<id>`` holds an approval as JSON until it expires; ``<prefix>approval`` is a sorted set of
the ids scored with the time (Redis's clock, in ms) each expires, so listing drops the expired first and never walks
the keyspace; ``<prefix>approval-miss:<id>`` counts wrong sign-ins on its page, gone with it;
``<prefix>approval-decided:<id>`` keeps the decision on an approval no process waits for (a 2026-07-28 call),
until its call's retry takes it (GETDEL: once). Taking is one script
(read, delete, unindex): of any number of processes taking one approval at once, exactly one gets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from .approvals import Approval, Decision

if TYPE_CHECKING:
    from ..engine.connection import Engine

# KEYS: value, index. ARGV: JSON, ttl in ms, id.
_ADD = """
local t = redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2]), ARGV[3])
return 1
"""

# KEYS: value, index, misses. ARGV: id. The value if this call removed it (false: gone already).
_TAKE = """
local value = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[1])
return value
"""

# KEYS: index. The ids of the approvals not expired.
_LIVE = """
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (t[1] * 1000 + math.floor(t[2] / 1000)))
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

# KEYS: misses, value. The count, kept as long as the approval (a second when it is gone).
_MISS = """
local count = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[2])
if left < 1 then left = 1000 end
redis.call('PEXPIRE', KEYS[1], left)
return count
"""


class RedisApprovalStore:
    """The ``ApprovalStore`` seam over an ``Engine``: each method is one round trip (``waiting``: two)."""

    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock  # how long an approval is kept: until its expiry by this clock (the waiting process's)
        self._index = engine.key("approval")
        self._add = engine.script(_ADD)
        self._take = engine.script(_TAKE)
        self._live = engine.script(_LIVE)
        self._miss = engine.script(_MISS)

    def _key(self, approval_id: str) -> str:
        return self.engine.key("approval", approval_id)

    async def add(self, approval: Approval) -> None:
        ttl_ms = max(1, round((approval.expires - self.clock()) * 1000))
        await self._add([self._key(approval.id), self._index], [orjson.dumps(approval.to_json()), ttl_ms, approval.id])

    async def get(self, approval_id: str) -> Approval | None:
        data = await self.engine.command("GET", self._key(approval_id))
        return None if data is None else Approval.from_json(orjson.loads(data))

    async def waiting(self) -> list[Approval]:
        ids = await self._live([self._index])
        if not ids:
            return []
        found = await self.engine.command("MGET", *(self._key(i.decode() if isinstance(i, bytes) else i) for i in ids))
        approvals = [Approval.from_json(orjson.loads(data)) for data in found if data is not None]
        return sorted(approvals, key=lambda approval: approval.requested)

    async def take(self, approval_id: str) -> Approval | None:
        keys = [self._key(approval_id), self._index, self.engine.key("approval-miss", approval_id)]
        data = await self._take(keys, [approval_id])
        return None if data is None else Approval.from_json(orjson.loads(data))

    async def delete(self, approval_id: str) -> None:
        await self.take(approval_id)

    async def miss(self, approval_id: str) -> int:
        return int(await self._miss([self.engine.key("approval-miss", approval_id), self._key(approval_id)]))

    async def keep_decision(self, approval_id: str, decision: Decision, ttl: float) -> None:
        await self.engine.command("SET", self.engine.key("approval-decided", approval_id), orjson.dumps(list(decision)),
                                  "PX", max(1, round(ttl * 1000)))  # fmt: skip

    async def decision(self, approval_id: str) -> Decision | None:
        data = await self.engine.command("GETDEL", self.engine.key("approval-decided", approval_id))
        if data is None:
            return None
        return Decision.from_json(orjson.loads(data))
