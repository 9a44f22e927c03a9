"""``RedisSessionStore``: session states in Redis or Valkey, shared by every process of a fleet.

Key ``<prefix>session:<id>`` holds ``SessionState.to_dict()`` as JSON; ``<prefix>session`` indexes the ids for
``count`` (``engine/values.py``). With a ``ttl``, a state not written or read for that long is gone: choose it well
above the session idle timeout, since a session that is served from memory is not read from the store on each
request. Without one (the default) a state stays until its session is deleted.
"""

from __future__ import annotations

from typing import Any

from ..engine.connection import Engine
from ..engine.values import JsonValues


class RedisSessionStore:
    """The ``SessionStore`` seam over an ``Engine``; each method is one round trip."""

    def __init__(self, engine: Engine, *, ttl: float | None = None) -> None:
        self._values = JsonValues(engine, "session", ttl=ttl)

    async def get(self, session_id: str) -> dict[str, Any] | None:
        state = await self._values.get(session_id)
        return None if state is None else dict(state)

    async def put(self, session_id: str, state: dict[str, Any]) -> None:
        await self._values.put(session_id, state)

    async def delete(self, session_id: str) -> None:
        await self._values.delete(session_id)

    async def count(self) -> int:
        return await self._values.count()
