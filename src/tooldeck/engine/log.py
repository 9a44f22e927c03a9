"""Numbered logs: ``NumberedLogs``, per name a log whose entries are numbered 1, 2, 3... and of which the last
``max_len`` are kept; what SSE resumption needs.

Keys: ``<prefix><namespace>:<name>:n`` counts the entries ever appended; ``<prefix><namespace>:<name>`` is a list
of the kept ones (JSON text), the newest last, so the entry at position ``i`` of ``len`` kept ones has number
``n - len + 1 + i``. Both keys expire ``ttl`` seconds after the last append. Appending (number, push, trim, renew)
and reading what followed an entry are one round trip each (a Lua script).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from .connection import Engine

# KEYS: counter, list. ARGV: entry, max_len, ttl in ms. Returns the entry's number.
_APPEND = """
local n = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return n
"""

# KEYS: counter, list. ARGV: a number. Returns {newest number, the entries after it}, or nil when the log is unknown,
# the number was never issued, or entries after it were dropped already.
_AFTER = """
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
local after = tonumber(ARGV[1])
if newest == 0 or after > newest then return nil end
local first = newest - redis.call('LLEN', KEYS[2]) + 1
if first > after + 1 then return nil end
if after == newest then return {newest, {}} end
return {newest, redis.call('LRANGE', KEYS[2], after - first + 1, -1)}
"""


class NumberedLogs:
    """Numbered logs by name under ``namespace`` (see the module docstring)."""

    def __init__(self, engine: Engine, namespace: str, *, max_len: int, ttl: float) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len!r}")
        if not ttl > 0:
            raise ValueError(f"ttl must be more than 0 seconds, got {ttl!r}")
        self.engine = engine
        self.namespace = namespace
        self.max_len = max_len
        self.ttl = ttl
        self._ttl_ms = str(max(1, round(ttl * 1000)))
        self._append = engine.script(_APPEND)
        self._after = engine.script(_AFTER)

    def _keys(self, name: str) -> list[str]:
        return [self.engine.key(self.namespace, name, "n"), self.engine.key(self.namespace, name)]

    async def append(self, name: str, entry: Any) -> int:
        """Append ``entry`` (JSON) to the log ``name``; its number."""
        return int(await self._append(self._keys(name), [orjson.dumps(entry), self.max_len, self._ttl_ms]))

    async def after(self, name: str, number: int) -> list[tuple[int, Any]] | None:
        """The kept entries numbered above ``number`` with their numbers, oldest first; None if the log is unknown,
        ``number`` was never issued, or an entry after it is no longer kept."""
        found = await self._after(self._keys(name), [number])
        if found is None:
            return None
        newest, entries = found
        first = int(newest) - len(entries) + 1
        return [(first + i, orjson.loads(entry)) for i, entry in enumerate(entries)]

    async def forget(self, name: str) -> None:
        with self.engine.reaching():
            await self.engine.client.delete(*self._keys(name))
