"""``RedisEventStore``: SSE events in Redis or Valkey, so a stream dropped on one process resumes on any other.

Per session, a numbered log (``engine/log.py``): ``<prefix>events:<session>:n`` counts its events and
``<prefix>events:<session>`` keeps the last ``max_events`` of them as ``[stream, message]`` JSON. Event ids are
``<stream>.<n>`` as in ``MemoryEventStore``; the numbering is shared by every process serving the session, so ids
never collide. A session's events expire ``ttl`` seconds after its last one (a process that died cannot ``forget``).
While Redis cannot be reached, an event is sent but not stored: its id (``<stream>.unstored-<n>``) resumes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from ..engine.connection import Engine
from ..engine.errors import BackendUnavailableError
from ..engine.log import NumberedLogs
from .events import PRIMING

log = logging.getLogger("tooldeck.http")


class RedisEventStore:
    """The ``EventStore`` seam over an ``Engine``; each method is one round trip."""

    def __init__(self, engine: Engine, *, max_events: int = 1000, ttl: float = 3600.0) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.max_events = max_events
        self._logs = NumberedLogs(engine, "events", max_len=max_events, ttl=ttl)
        self._unstored = 0  # events sent while Redis was away (their ids are this process's own)
        self._lost = False  # whether the last append failed: the warning is logged once per outage

    async def append(self, session_id: str, stream_id: str, message: Any) -> str:
        try:
            n = await self._logs.append(session_id, [stream_id, message])
        except BackendUnavailableError as exc:
            # The stream goes on without it: the client gets the message now, and an id no replay knows, so a
            # resumption from it is refused (404) rather than answered with events missing.
            self._unstored += 1
            if not self._lost:
                self._lost = True
                log.warning("SSE events are sent but not stored while the shared backend is away: %s", exc)
            return f"{stream_id}.unstored-{self._unstored}"
        self._lost = False
        return f"{stream_id}.{n}"

    async def replay(self, session_id: str, last_event_id: str) -> tuple[str, list[tuple[str, Any]]] | None:
        stream_id, _, number = last_event_id.rpartition(".")
        if not stream_id or not number.isdigit():
            return None
        found = await self._logs.after(session_id, int(number))
        if found is None:
            return None  # unknown, never issued, or evicted: resuming would silently lose events
        return stream_id, [(f"{s}.{n}", m) for n, (s, m) in found if s == stream_id and m is not PRIMING]

    async def forget(self, session_id: str) -> None:
        await self._logs.forget(session_id)
