"""What a session remembers between requests, as plain data, and the ``SessionStore`` seam that keeps it.

``SessionState`` is everything a later request of the same session needs: the negotiated revision, the client's
info and capabilities, its log level, its resource subscriptions and the principal it authenticated as. It is
JSON-able (``to_dict``/``from_dict``), so a store can live outside the process: a server that finds a session id in
the store but not in memory can rebuild the session from it. ``MemorySessionStore`` is the in-process store; a
networked one implements the same methods and passes the same contract suite (tests/server/test_state.py).

When several processes serve one session, each marks it seen in the store (``touch``) as it serves it, so that the
idle reaper of each can tell a session idle everywhere from one busy in another process (``last_seen``); the mark
also says whether the session ended (deleted by some process: the store remembers that for ``ended_ttl`` seconds)
or is unknown to the store (which lost it, as a Redis restarted without persistence does: the process that holds
the session stores it again).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import orjson

from ..security.principal import principal_id
from .options import LOG_RANK

__all__ = ["MemorySessionStore", "SessionState", "SessionStore", "principal_id"]

ENDED_TTL = 3600.0  # seconds a store remembers that a session ended: above any idle timeout in use


class SessionState:
    """One session's negotiated state. ``changes`` counts every change, so a driver knows when to store it again."""

    __slots__ = ("capabilities", "changes", "client_capabilities", "client_info", "identifies_requestor",
                 "log_rank", "principal", "revision", "subscriptions")  # fmt: skip

    def __init__(self, log_level: str = "info", *, identifies_requestor: bool = True) -> None:
        self.revision: str | None = None
        self.client_info: dict[str, Any] | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}  # what the server declared at initialize: features are served by these
        self.log_rank = LOG_RANK[log_level]
        self.subscriptions: set[str] = set()  # resource URIs the client subscribed to
        self.principal: Any = None
        # Whether the transport can tell requestors apart (stdio: one local client). Without that, tasks are bound to
        # nothing but their unguessable ids, and tasks/list is not offered.
        self.identifies_requestor = identifies_requestor
        self.changes = 0

    @classmethod
    def of_request(
        cls,
        server: Any,
        revision: str,
        *,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        principal: Any = None,
        log_level: str | None = None,
        identifies_requestor: bool = True,
    ) -> SessionState:
        """The state of a request that stands alone (no session): what it carries itself, and the capabilities the
        server declares at that revision (its cached answer: no registry walk per request)."""
        state = cls.__new__(cls)  # every member set once, here (this runs for every 2026-07-28 request)
        state.revision = revision
        state.client_info = client_info
        state.client_capabilities = client_capabilities or {}
        state.capabilities = server.initialize_result(revision, identifies_requestor or principal is not None)[
            "capabilities"
        ]
        state.log_rank = LOG_RANK[log_level or server.options.log_level]
        state.subscriptions = set()
        state.principal = principal
        state.identifies_requestor = identifies_requestor
        state.changes = 0
        return state

    @property
    def log_level(self) -> str:
        return next(level for level, rank in LOG_RANK.items() if rank == self.log_rank)

    def changed(self) -> None:
        self.changes += 1

    def to_dict(self) -> dict[str, Any]:
        principal = self.principal
        if principal is not None and not isinstance(principal, str | dict):
            principal = principal_id(principal)
        return {
            "revision": self.revision,
            "clientInfo": self.client_info,
            "clientCapabilities": self.client_capabilities,
            "capabilities": self.capabilities,
            "logLevel": self.log_level,
            "subscriptions": sorted(self.subscriptions),
            "principal": principal,
            "identifiesRequestor": self.identifies_requestor,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        state = cls(data.get("logLevel", "info"), identifies_requestor=bool(data.get("identifiesRequestor", True)))
        state.revision = data.get("revision")
        state.client_info = data.get("clientInfo")
        state.client_capabilities = dict(data.get("clientCapabilities") or {})
        state.capabilities = dict(data.get("capabilities") or {})
        state.subscriptions = set(data.get("subscriptions") or ())
        state.principal = data.get("principal")
        return state


class SessionStore(Protocol):
    """Session states by session id, for servers whose sessions outlive a connection (Streamable HTTP)."""

    async def get(self, session_id: str) -> dict[str, Any] | None:
        """The stored state (``SessionState.to_dict()``), or None for an unknown or deleted session."""
        ...

    async def put(self, session_id: str, state: dict[str, Any]) -> None:
        """Create or replace the state of ``session_id``."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget a session that ended (its state and when it was seen), remembering for a while that it ended;
        deleting an unknown id is not an error."""
        ...

    async def count(self) -> int:
        """How many sessions are stored."""
        ...

    async def sessions(self, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` stored sessions, each its id and state (for a person to read: the operator console)."""
        ...

    async def touch(self, session_id: str, at: float) -> bool | None:
        """A process served the session at ``at`` (wall-clock seconds); a mark never moves back. True when marked;
        False, and nothing marked, when the session ended (``delete``, perhaps by another process); None, and nothing
        marked, when the store does not know it (never stored, or lost)."""
        ...

    async def last_seen(self, session_ids: Sequence[str]) -> list[float | None]:
        """When each session was last marked by ``touch`` (by any process), in one round trip; None for a session
        never marked or not stored."""
        ...


class MemorySessionStore:
    """Session states in a dict of this process (copied in and out, as a networked store would)."""

    def __init__(self, *, ended_ttl: float = ENDED_TTL) -> None:
        self._states: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, float] = {}
        self._ended: dict[str, float] = {}  # session id -> when it ended (monotonic), oldest first
        self.ended_ttl = ended_ttl

    async def get(self, session_id: str) -> dict[str, Any] | None:
        state = self._states.get(session_id)
        return None if state is None else _copy(state)

    async def put(self, session_id: str, state: dict[str, Any]) -> None:
        self._states[session_id] = _copy(state)

    async def delete(self, session_id: str) -> None:
        self._states.pop(session_id, None)
        self._seen.pop(session_id, None)
        now = time.monotonic()
        ended = self._ended
        ended.pop(session_id, None)
        ended[session_id] = now
        for oldest, at in list(ended.items()):  # forget what ended long ago (in order: stop at the first that did not)
            if now - at <= self.ended_ttl:
                break
            del ended[oldest]

    async def count(self) -> int:
        return len(self._states)

    async def sessions(self, limit: int) -> list[tuple[str, dict[str, Any]]]:
        return [(session_id, _copy(state)) for session_id, state in list(self._states.items())[:limit]]

    async def touch(self, session_id: str, at: float) -> bool | None:
        if session_id not in self._states:
            ended = self._ended.get(session_id)
            return False if ended is not None and time.monotonic() - ended <= self.ended_ttl else None
        self._seen[session_id] = max(at, self._seen.get(session_id, at))
        return True

    async def last_seen(self, session_ids: Sequence[str]) -> list[float | None]:
        return [self._seen.get(session_id) for session_id in session_ids]


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    return dict(orjson.loads(orjson.dumps(state)))  # a real copy, and proof the state is JSON-able
