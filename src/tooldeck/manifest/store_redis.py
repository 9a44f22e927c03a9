"""The ``DefinitionStore`` of a fleet, in Redis or Valkey: key ``<prefix>definitions``, a hash of ``revision`` (a
number) and ``state`` (JSON text). A read is one ``HMGET``, so the state and its number are read together; a commit
is one Lua script, so the compare and the swap are one step no other commit can come between."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .store import Snapshot, encode

if TYPE_CHECKING:
    from ..engine.connection import Engine

# KEYS: the hash. ARGV: the expected revision, the new state (JSON). Returns the new revision, or false (nil) when
# the revision is not the expected one.
_COMMIT = """
local current = tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')
if current ~= tonumber(ARGV[1]) then return false end
redis.call('HSET', KEYS[1], 'revision', current + 1, 'state', ARGV[2])
return current + 1
"""


class RedisDefinitionStore:
    """The ``DefinitionStore`` seam over an ``Engine`` (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.key = engine.key("definitions")
        self._commit = engine.script(_COMMIT)

    async def read(self) -> Snapshot:
        with self.engine.reaching():
            revision, state = await self.engine.client.hmget(self.key, ["revision", "state"])
        if revision is None:
            return Snapshot(0, {})
        return Snapshot(int(revision), orjson.loads(state) if state is not None else {})

    async def revision(self) -> int:
        with self.engine.reaching():
            found = await self.engine.client.hget(self.key, "revision")
        return 0 if found is None else int(found)

    async def commit(self, expected: int, state: dict[str, Any]) -> int | None:
        found = await self._commit([self.key], [expected, encode(state)])
        return None if found is None else int(found)
