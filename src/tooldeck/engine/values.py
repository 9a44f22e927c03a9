"""JSON values by name, with an optional time to live and a count of the live ones: ``JsonValues``.

Keys: ``<prefix><namespace>:<name>`` holds a value (JSON text); ``<prefix><namespace>`` is a sorted set of the
names, each scored with the time (Redis's clock, in ms) its value expires, +inf for one that does not, so counting
drops the expired names first and never walks the keyspace. With a ``ttl`` every write and every read renews it.
Each operation is one round trip (a Lua script: the value and its index change together).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from .connection import Engine

# KEYS: value, index. ARGV: JSON, ttl in ms ("" for none), name.
_PUT = """
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], '+inf', ARGV[3])
else
  local t = redis.call('TIME')
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2]), ARGV[3])
end
return 1
"""

# KEYS: value, index. ARGV: ttl in ms, name. (Only with a ttl: without one a read is a plain GET.)
_GET_RENEWING = """
local value = redis.call('GET', KEYS[1])
if value then
  local t = redis.call('TIME')
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1]), ARGV[2])
end
return value
"""

# KEYS: value, index. ARGV: name.
_DELETE = """
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""

# KEYS: index.
_COUNT = """
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (t[1] * 1000 + math.floor(t[2] / 1000)))
return redis.call('ZCARD', KEYS[1])
"""


class JsonValues:
    """JSON values by name under ``namespace``; ``ttl`` seconds after they were last written or read they are gone
    (None: until deleted)."""

    def __init__(self, engine: Engine, namespace: str, *, ttl: float | None = None) -> None:
        if ttl is not None and not ttl > 0:
            raise ValueError(f"ttl must be more than 0 seconds, or None, got {ttl!r}")
        self.engine = engine
        self.namespace = namespace
        self.ttl = ttl
        self._ttl_ms = "" if ttl is None else str(max(1, round(ttl * 1000)))
        self._index = engine.key(namespace)
        self._put = engine.script(_PUT)
        self._get = engine.script(_GET_RENEWING)
        self._delete = engine.script(_DELETE)
        self._count = engine.script(_COUNT)

    def key(self, name: str) -> str:
        return self.engine.key(self.namespace, name)

    async def get(self, name: str) -> Any:
        """The value, or None when there is none."""
        if self.ttl is None:
            data = await self.engine.command("GET", self.key(name))
        else:
            data = await self._get([self.key(name), self._index], [self._ttl_ms, name])
        return None if data is None else orjson.loads(data)

    async def put(self, name: str, value: Any) -> None:
        await self._put([self.key(name), self._index], [orjson.dumps(value), self._ttl_ms, name])

    async def delete(self, name: str) -> None:
        await self._delete([self.key(name), self._index], [name])

    async def count(self) -> int:
        return int(await self._count([self._index]))

    async def some(self, limit: int) -> list[tuple[str, Any]]:
        """Up to ``limit`` of the values with their names, those that expire last first (a listing for a person to
        read, in two round trips: not for a hot path)."""
        with self.engine.reaching():
            raw = await self.engine.client.zrevrange(self._index, 0, limit - 1)
            if not raw:
                return []
            names = [name.decode() if type(name) is bytes else str(name) for name in raw]
            found = await self.engine.client.mget([self.key(name) for name in names])
        return [(name, orjson.loads(data)) for name, data in zip(names, found, strict=True) if data is not None]
