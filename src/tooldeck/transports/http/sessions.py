"""The HTTP session registry: issuing session ids, finding sessions, keeping their state in a ``SessionStore``,
closing idle ones, and refusing new ones when full or shutting down.

Live sessions are kept in memory (their channels and running work are here); their state also goes to the store
whenever it changes, so a session id this process does not know but the store does (made by another process sharing
the store) is rebuilt from it instead of being refused.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from ...protocol.errors import INVALID_REQUEST, SERVER_ERROR, SESSION_NOT_FOUND, HttpError
from ...server.core import Server
from ...server.events import EventStore
from ...server.state import MemorySessionStore, SessionState, SessionStore, principal_id
from .channels import MAX_BACKLOG, HttpSession

log = logging.getLogger("tooldeck.http")


class SessionRegistry:
    def __init__(
        self,
        server: Server,
        events: EventStore,
        *,
        store: SessionStore | None = None,
        max_sessions: int = 10_000,
        idle_timeout: float = 1800.0,
        backlog: int = MAX_BACKLOG,
    ) -> None:
        if backlog < 1:
            raise ValueError(f"max_backlog must be at least 1, got {backlog}")
        self.server = server
        self.backlog = backlog  # messages each stream keeps waiting for its client (channels.py)
        self.events = events
        self.store: SessionStore = store if store is not None else MemorySessionStore()
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.live: dict[str, HttpSession] = {}
        self.shutting_down = False
        self._reaper: asyncio.Task[None] | None = None

    def create(self, principal: Any, *, stateless: bool = False) -> HttpSession:
        """A session for an initialize request (registered once the answer says it succeeded); ``stateless``: one
        that answers this initialize and is forgotten."""
        if self.shutting_down:
            raise HttpError(503, SERVER_ERROR, "Service Unavailable: the server is shutting down")
        if stateless:
            return HttpSession(self.server, None, principal=principal, backlog=self.backlog)
        if len(self.live) >= self.max_sessions:
            raise HttpError(503, SERVER_ERROR, f"Service Unavailable: {self.max_sessions} sessions are open")
        self._start_reaper()
        return HttpSession(self.server, secrets.token_urlsafe(24), principal=principal, backlog=self.backlog)

    def transient(self, revision: str, principal: Any) -> HttpSession:
        """A session for one stateless request: as if initialized at ``revision``, with nothing to remember."""
        state = SessionState.of_request(self.server, revision, principal=principal, identifies_requestor=False)
        return HttpSession(self.server, None, state=state, backlog=self.backlog)

    async def register(self, http_session: HttpSession) -> None:
        assert http_session.id is not None
        self.live[http_session.id] = http_session
        await self.save(http_session)

    async def save(self, http_session: HttpSession) -> None:
        """Store the session's state if it changed since it was last stored."""
        state = http_session.session.state
        if http_session.id is not None and http_session.saved != state.changes and not http_session.closed:
            http_session.saved = state.changes
            await self.store.put(http_session.id, state.to_dict())

    def live_session(self, session_id: bytes | None, principal: Any) -> HttpSession | None:
        """The fast path of ``lookup``: a live session of this process, opened by this principal; else None."""
        if session_id is None:
            return None
        http_session = self.live.get(session_id.decode("latin-1"))
        if http_session is None or http_session.closed:
            return None
        if not _bound_to(http_session, principal):
            return None  # lookup says why not
        if principal is not None:  # the same subject, perhaps with a fresher token: its scopes count from now on
            http_session.session.state.principal = principal
        return http_session

    async def lookup(self, session_id: bytes | None, principal: Any) -> HttpSession:
        """The session a request names: 400 without an id, 404 for an unknown or ended one, 403 for another
        principal's."""
        if session_id is None:
            raise HttpError(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required; initialize first")
        key = session_id.decode("latin-1")
        http_session = self.live.get(key)
        if http_session is None or http_session.closed:
            http_session = await self._rebuild(key)
        if not _bound_to(http_session, principal):
            refusal = HttpError(403, INVALID_REQUEST, "Forbidden: this session belongs to another principal")
            refusal.session = http_session.session.key  # for the audit record
            raise refusal
        if principal is not None:
            http_session.session.state.principal = principal
        self._start_reaper()
        return http_session

    async def _rebuild(self, key: str) -> HttpSession:
        data = None if self.shutting_down else await self.store.get(key)
        if data is None or key in self.live:  # unknown, or known here and closed
            message = "Session not found: it expired or was deleted; initialize a new session"
            raise HttpError(404, SESSION_NOT_FOUND, message)
        http_session = HttpSession(self.server, key, state=SessionState.from_dict(data), backlog=self.backlog)
        http_session.saved = http_session.session.state.changes
        self.live[key] = http_session
        log.info("session %s rebuilt from the session store", key)
        return http_session

    async def close(self, http_session: HttpSession) -> None:
        """End a session and release everything it holds: work, streams, stored events and state."""
        if http_session.id is not None:
            self.live.pop(http_session.id, None)
        tasks = http_session.close()
        if http_session.id is not None:
            await self.events.forget(http_session.id)
            await self.store.delete(http_session.id)
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    # --- idle sessions ------------------------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        if self._reaper is None and not self.shutting_down:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        interval = max(min(self.idle_timeout / 4, 60.0), 0.05)
        while True:
            await asyncio.sleep(interval)
            await self.reap()

    async def reap(self) -> int:
        """Close sessions idle for longer than the timeout (never one with an open connection)."""
        deadline = time.monotonic() - self.idle_timeout
        idle = [s for s in self.live.values() if s.connections == 0 and s.last_active < deadline]
        for http_session in idle:
            log.info("closing idle session %s", http_session.id)
            await self.close(http_session)
        return len(idle)

    # --- shutdown -----------------------------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Stop taking new sessions and end GET streams; POSTs in flight are left to finish (graceful drain)."""
        self.shutting_down = True
        for http_session in self.live.values():
            if http_session.standalone is not None:
                http_session.standalone.wake()

    async def aclose(self) -> None:
        """Close every session (cancelling its work) and stop the reaper."""
        self.begin_shutdown()
        for http_session in list(self.live.values()):
            await self.close(http_session)
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None


def _bound_to(http_session: HttpSession, principal: Any) -> bool:
    """Whether the session was opened by this principal (a session never outlives its opener's identity)."""
    opener = http_session.session.state.principal
    return principal is opener or principal_id(principal) == principal_id(opener)  # the same object: a cached token
