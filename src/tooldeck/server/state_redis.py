"""``RedisSessionStore``: session states in Redis or Valkey, shared by every process of a fleet.

Key ``<prefix>session:<id>`` holds ``SessionState.to_dict()`` as JSON; ``<prefix>session`` indexes the ids for
``count`` (``engine/values.py``). ``<prefix>session-seen`` is a sorted set of the ids scored with the time a process
last served each (``touch``, wall-clock seconds, to the ms): the idle reapers of all processes read it.
``<prefix>session-ended:<id>`` says, for ``ended_ttl`` seconds, that a session was deleted (not lost). With a ``ttl``, a state
not written, read or touched for that long is gone: choose it well above the session idle timeout (a process with
shared backends touches a session at each of its requests; one that serves it from memory alone does not). Without
one (the default) a state stays until its session is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..engine.connection import Engine
from ..engine.values import JsonValues
from .state import ENDED_TTL

HEADS_KEPT = 10_000  # sessions whose mark is kept packed (touch_soon); more, and they are all packed again

# KEYS: the state, the seen set, the index of the states, the ended mark. ARGV: id, ttl in ms ("" for none), the time
# in whole ms (last, and an int, cheaper to write than a float: a call packs only it, connection.py's Script.head). A
# mark only for a stored session (1), never moved back (GT); an ended one is 0, an unknown one -1. With a ttl, a
# session served is a session read: its state is renewed.
_TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  if redis.call('EXISTS', KEYS[4]) == 1 then
    return 0
  end
  return -1
end
redis.call('ZADD', KEYS[2], 'GT', tonumber(ARGV[3]) / 1000, ARGV[1])
if ARGV[2] ~= '' then
  local t = redis.call('TIME')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2]), ARGV[1])
end
return 1
"""

# KEYS: the seen set, the ended mark. ARGV: id, ms the end is remembered.
_FORGET = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], 1, 'PX', ARGV[2])
return 1
"""


class RedisSessionStore:
    """The ``SessionStore`` seam over an ``Engine``; each method is one round trip (``delete``: two)."""

    def __init__(self, engine: Engine, *, ttl: float | None = None, ended_ttl: float = ENDED_TTL) -> None:
        self._values = JsonValues(engine, "session", ttl=ttl)
        self._engine = engine
        self._seen = engine.key("session-seen")
        self._index = engine.key("session")  # JsonValues's index of the states, scored by when each expires
        self._ttl_ms = "" if ttl is None else str(max(1, round(ttl * 1000)))
        self._touch = engine.script(_TOUCH)
        self._forget = engine.script(_FORGET)
        self._ended_ms = max(1, round(ended_ttl * 1000))
        self._heads: dict[str, Any] = {}  # each session's mark, packed but for its time (touch_soon)

    def _ended(self, session_id: str) -> str:
        return self._engine.key("session-ended", session_id)

    async def get(self, session_id: str) -> dict[str, Any] | None:
        state = await self._values.get(session_id)
        return None if state is None else dict(state)

    async def put(self, session_id: str, state: dict[str, Any]) -> None:
        await self._values.put(session_id, state)

    async def delete(self, session_id: str) -> None:
        self._heads.pop(session_id, None)
        await self._values.delete(session_id)
        await self._forget([self._seen, self._ended(session_id)], [session_id, self._ended_ms])

    async def count(self) -> int:
        return await self._values.count()

    async def sessions(self, limit: int) -> list[tuple[str, dict[str, Any]]]:
        return [(session_id, dict(state)) for session_id, state in await self._values.some(limit)]

    async def touch(self, session_id: str, at: float) -> bool | None:
        keys = [self._values.key(session_id), self._seen, self._index, self._ended(session_id)]
        found = int(await self._touch(keys, [session_id, self._ttl_ms, round(at * 1000)]))
        return None if found < 0 else bool(found)

    def touch_soon(self, session_id: str, at: float) -> Any:
        """``touch`` sent with the next command of this turn of the loop (a request's rate limit, say: one round
        trip for both), its answer not waited for: a future of the script's raw reply (1 marked, 0 ended, -1
        unknown; its failures the line's own), or None when it cannot be sent so (then ``touch``)."""
        head = self._heads.get(session_id)
        if head is None:
            if len(self._heads) >= HEADS_KEPT:
                self._heads.clear()
            keys = [self._values.key(session_id), self._seen, self._index, self._ended(session_id)]
            head = self._heads[session_id] = self._touch.head(keys, [session_id, self._ttl_ms], 1)
        return self._touch.soon_with(head, (round(at * 1000),))

    async def last_seen(self, session_ids: Sequence[str]) -> list[float | None]:
        if not session_ids:
            return []
        with self._engine.reaching():
            found = await self._engine.client.zmscore(self._seen, list(session_ids))
        return [None if score is None else float(score) for score in found]
