"""Where SSE events wait for a client to resume: the ``EventStore`` seam and its bounded in-memory version (the
seam is the server's, so the process boundary in ``backends.py`` can name it; the HTTP transport uses it).

Event ids are ``<stream>.<n>``: ``n`` counts per session, so ids are unique across all of a session's streams, and
the prefix names the stream an id belongs to, so ``Last-Event-ID`` resumes that stream and no other.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

PRIMING = None  # the message of a priming event: an id with empty data, never replayed as a message


class EventStore(Protocol):
    """Stores the events of live sessions so a dropped SSE connection can be resumed with ``Last-Event-ID``."""

    async def append(self, session_id: str, stream_id: str, message: Any) -> str:
        """Keep ``message`` (None for a priming event) as the next event of ``stream_id``; return its event id."""
        ...

    async def replay(self, session_id: str, last_event_id: str) -> tuple[str, list[tuple[str, Any]]] | None:
        """The stream ``last_event_id`` belongs to and the stored events after it, or None if it is unknown."""
        ...

    async def forget(self, session_id: str) -> None:
        """Drop everything kept for a session that has ended."""
        ...


class MemoryEventStore:
    """Keeps the last ``max_events`` events of each session in memory (older ones cannot be resumed)."""

    def __init__(self, max_events: int = 1000) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.max_events = max_events
        self._events: dict[str, deque[tuple[int, str, Any]]] = {}
        self._counters: dict[str, int] = {}

    async def append(self, session_id: str, stream_id: str, message: Any) -> str:
        n = self._counters.get(session_id, 0) + 1
        self._counters[session_id] = n
        events = self._events.get(session_id)
        if events is None:
            events = self._events[session_id] = deque(maxlen=self.max_events)
        events.append((n, stream_id, message))
        return f"{stream_id}.{n}"

    async def replay(self, session_id: str, last_event_id: str) -> tuple[str, list[tuple[str, Any]]] | None:
        stream_id, _, number = last_event_id.rpartition(".")
        events = self._events.get(session_id)
        if not stream_id or not number.isdigit() or events is None:
            return None
        after = int(number)
        if after > self._counters.get(session_id, 0) or (events and events[0][0] > after + 1):
            return None  # never issued, or already evicted: resuming would silently lose events
        found = [(f"{s}.{n}", m) for n, s, m in events if n > after and s == stream_id and m is not PRIMING]
        return stream_id, found

    async def forget(self, session_id: str) -> None:
        self._events.pop(session_id, None)
        self._counters.pop(session_id, None)
