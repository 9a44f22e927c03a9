"""The HTTP session registry: issuing session ids, finding sessions, keeping their state in a ``SessionStore``,
closing idle ones, and refusing new ones when full or shutting down.

Live sessions are kept in memory (their channels and running work are here); their state also goes to the store
whenever it changes, so a session id this process does not know but the store does (made by another process sharing
the store) is rebuilt from it instead of being refused.

When the backends are shared (several processes serve each session), more holds:

- A session ended anywhere is ended everywhere: ``close`` deletes it from the store, then publishes its id on the bus
  (topic ``sessions/ended``); every process drops its live copy, cancels its work there and ends its open streams,
  and the next request there is a 404, as for a session it never knew.
- A session has one GET stream fleet-wide, as on one process: a GET stream opened on one process ends the one open on
  another (topic ``sessions/standalone``; the newest wins, as the client reads one), so a message that belongs to no
  request reaches the client once.
- A session's state changed on one process (``resources/subscribe``, ``logging/setLevel``) reaches the copies of the
  other processes (topic ``sessions/changed``), whose streams then serve it as it now stands.
- A process that stops ends its own copies only: the sessions live on in the store and the other processes, and a
  request for a session it does not hold, while it drains, is a 503 (served elsewhere when tried again).
- A session is idle only when it is idle fleet-wide. Each request of a session marks it seen in the store (one
  write, which also says whether the store still has it: a session ended elsewhere is a 404 at once, even before
  the bus tells this process), and each reaper round marks the sessions this process holds a connection for; the
  reaper closes a session idle here only when no process marked it within the idle timeout (plus ``touch_every``,
  how often a held connection is marked). The processes' clocks must agree to well within the idle timeout. While
  the store is out of reach, a session held here is served from memory, unmarked, and the reaper closes nothing;
  a session the store lost (not ended: a restart without persistence) is stored again by the process holding it.

``max_sessions`` counts the live sessions of this process (made here or rebuilt from the store): it bounds the
memory one process spends on sessions, so a fleet of N processes holds up to N times as many.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from ...engine.errors import BackendUnavailableError
from ...protocol.errors import INVALID_REQUEST, SERVER_ERROR, SESSION_NOT_FOUND, HttpError
from ...server.bus import Subscription
from ...server.core import Server
from ...server.events import EventStore
from ...server.options import LOG_RANK
from ...server.state import MemorySessionStore, SessionState, SessionStore, principal_id
from .channels import MAX_BACKLOG, HttpSession

log = logging.getLogger("tooldeck.http")
ENDED = "sessions/ended"  # the bus topic of sessions ended in some process; payload: the session id
STANDALONE = "sessions/standalone"  # a session's GET stream opened on some process: {"session": id, "node": node}
CHANGED = "sessions/changed"  # a session's state changed on some process: {"session": id, "node": node, "state": {}}


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
        shared: bool = False,
        clock: Callable[[], float] = time.time,
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
        self.streams_ending = False  # GET streams end (the server stops, or hands its clients over): see sse.py
        self.on_streams_ending: list[Callable[[], None]] = []  # told then (a relayed stream ends too: relay.py)
        self._reaper: asyncio.Task[None] | None = None
        # Several processes serve these sessions (server/backends.py): ends and activity go through the store and bus.
        self.shared = shared
        self.clock = clock  # the wall clock of the marks in the store (shared only)
        self.touch_every = _reap_interval(idle_timeout)
        self._heard: list[Subscription] = []  # shared: what the other processes say about sessions
        self._marking: set[asyncio.Task[None]] = set()  # marks sent again with the awaited path (confirm_soon)

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
        await self.save(http_session, announce=False)  # no other process holds it yet

    async def save(self, http_session: HttpSession, *, announce: bool = True) -> None:
        """Store the session's state if it changed since it was last stored (and, when shared, tell the other
        processes' copies: their streams serve what it subscribed to, at the log level it chose)."""
        state = http_session.session.state
        if http_session.id is not None and http_session.saved != state.changes and not http_session.closed:
            http_session.saved = state.changes
            data = state.to_dict()
            await self.store.put(http_session.id, data)
            if self.shared and announce:
                self.server.bus.publish(CHANGED, {"session": http_session.id, "node": self.server.node_id,
                                                  "state": data})  # fmt: skip

    def _changed_elsewhere(self, changed: Any) -> None:
        """Another process changed a session's state: the copy here takes its subscriptions and log level."""
        if type(changed) is not dict or changed.get("node") == self.server.node_id:
            return
        http_session = self.live.get(changed.get("session"))  # type: ignore[arg-type]
        data = changed.get("state")
        if http_session is None or type(data) is not dict:
            return
        state = http_session.session.state
        state.subscriptions = set(data.get("subscriptions") or ())
        state.log_rank = LOG_RANK.get(data.get("logLevel"), state.log_rank)  # type: ignore[arg-type]

    def live_session(self, session_id: bytes | None, principal: Any) -> HttpSession | None:
        """The fast path of ``lookup``: a live session of this process, opened by this principal; else None."""
        if session_id is None:
            return None
        http_session = self.live.get(session_id.decode("latin-1"))
        if http_session is None or http_session.closed:
            return None
        opener = http_session.session.state.principal
        if principal is not opener and not _bound_to(http_session, principal):  # (the same object: bound)
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
        if self.shutting_down and self.shared:  # another process serves it: the client tries again, there
            raise HttpError(503, SERVER_ERROR, "Service Unavailable: the server is shutting down")
        data = None if self.shutting_down else await self.store.get(key)
        found = self.live.get(key)
        if found is not None and not found.closed:  # rebuilt meanwhile, for another request that came with this one
            return found
        if data is None or found is not None:  # unknown, or known here and closed
            message = "Session not found: it expired or was deleted; initialize a new session"
            raise HttpError(404, SESSION_NOT_FOUND, message)
        http_session = HttpSession(self.server, key, state=SessionState.from_dict(data), backlog=self.backlog)
        http_session.saved = http_session.session.state.changes
        self.live[key] = http_session
        log.info("session %s rebuilt from the session store", key)
        return http_session

    async def close(self, http_session: HttpSession) -> None:
        """End a session and release everything it holds: work, streams, stored events and state (and, when shared,
        the live copies of the other processes)."""
        if http_session.id is not None:
            self.live.pop(http_session.id, None)
        tasks = http_session.close()
        if http_session.id is not None:
            await self._forget(http_session.id)
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def _forget(self, session_id: str) -> None:
        """A session's stored events and state gone, and (when shared) every other process told it ended."""
        await self.events.forget(session_id)
        await self.store.delete(session_id)
        if self.shared:  # after the delete: a process that hears it and is asked again finds nothing to rebuild
            self.server.bus.publish(ENDED, session_id)

    async def end(self, session_id: str) -> bool:
        """End the session of that id wherever it is served (an operator's action: whoever opened it): as ``close``
        when this process holds it, else through the store and the bus. False when no such session is stored."""
        http_session = self.live.get(session_id)
        if http_session is not None and not http_session.closed:
            await self.close(http_session)
            return True
        if await self.store.get(session_id) is None:
            return False
        await self._forget(session_id)  # the process that holds it drops its copy (``_end_here``)
        return True

    def _end_here(self, session_id: Any) -> None:
        """The bus says a session ended in another process: drop the copy of it here, ending its work and streams."""
        http_session = self.live.pop(session_id, None) if type(session_id) is str else None
        if http_session is not None:
            log.info("session %s ended in another process", session_id)
            http_session.close()  # its work is cancelled; the requests that ran it see the session closed

    def standalone_opened(self, http_session: HttpSession) -> None:
        """This process opened the session's GET stream: one open on another process ends (shared backends)."""
        self.server.bus.publish(STANDALONE, {"session": http_session.id, "node": self.server.node_id})

    def _standalone_moved(self, opened: Any) -> None:
        if type(opened) is not dict or opened.get("node") == self.server.node_id:
            return
        http_session = self.live.get(opened.get("session"))  # type: ignore[arg-type]
        channel = None if http_session is None else http_session.standalone
        if http_session is not None and channel is not None:
            http_session.standalone = None  # what belongs to no request goes to the new stream, not here
            http_session.channels.pop(channel.stream_id, None)
            channel.close_connection()

    async def confirm(self, http_session: HttpSession) -> None:
        """With shared backends, before a request of the session is served: mark it seen now (the reapers of every
        process read the marks) and learn, in the same write, whether the store still has it — a session ended in
        another process is a 404 here at once, even before the bus says so; one the store lost is stored again."""
        key = http_session.id
        if key is None:
            return
        try:
            stored = await self.store.touch(key, self.clock())
        except BackendUnavailableError as exc:  # cannot tell: a session held here is served from memory meanwhile
            log.debug("session %s served without its mark in the store: %s", key, exc)
            return
        if stored is None:  # the store lost it (a restart without persistence): it is stored again from here
            http_session.saved = -1
            await self.save(http_session)
            await self.store.touch(key, self.clock())
        elif not stored:  # ended by some process
            if self.live.get(key) is http_session:
                self._end_here(key)
            raise HttpError(404, SESSION_NOT_FOUND, "Session not found: it expired or was deleted; initialize a new "
                                                    "session")  # fmt: skip

    def confirm_soon(self, http_session: HttpSession) -> bool:
        """``confirm`` in one round trip with the request's next command (a rate limit): the mark is sent with the
        other commands of this turn of the loop and its answer is not waited for here. It is heard as soon as it
        comes — before the request's work goes on, since Redis answers in order — and its future, the session's
        ``standing``, lets whatever runs the request wait for it before user code runs (the pipeline) and before
        the answer leaves (the exchange). False, and nothing sent, when the store cannot send a command so (then
        ``await confirm``)."""
        key = http_session.id
        touch_soon = getattr(self.store, "touch_soon", None)
        if key is None or touch_soon is None:
            return False
        pending = touch_soon(key, self.clock())
        if pending is None:
            return False
        pending.add_done_callback(functools.partial(self._heard_mark, http_session))
        http_session.session.standing = pending
        return True

    def _heard_mark(self, http_session: HttpSession, pending: asyncio.Future[Any]) -> None:
        """What the store said of a mark sent by ``confirm_soon`` (the same outcomes as ``confirm``'s)."""
        key = http_session.id
        if pending.cancelled():
            return
        failure = pending.exception()
        if failure is not None:  # the store out of reach (served from memory), or a script it forgot (a restart)
            if isinstance(failure, OSError):
                log.debug("session %s served without its mark in the store: %s", key, failure)
            else:
                self._later(self._confirm_quietly(http_session))
            return
        found = pending.result()
        if found == -1:  # the store lost it (a restart without persistence): stored again from here
            self._later(self._confirm_quietly(http_session))
        elif found == 0:  # ended by some process: the work of the request stops before it runs user code
            http_session.ended_elsewhere = True
            if self.live.get(key) is http_session:  # type: ignore[arg-type]
                self._end_here(key)
            else:
                http_session.close()

    async def _confirm_quietly(self, http_session: HttpSession) -> None:
        try:
            await self.confirm(http_session)
        except HttpError:  # ended meanwhile: the next request of the session is a 404
            pass
        except BackendUnavailableError as exc:
            log.debug("session %s: its mark waits for the store: %s", http_session.id, exc)

    def _later(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._marking.add(task)
        task.add_done_callback(self._marking.discard)

    # --- idle sessions ------------------------------------------------------------------------------------------

    def _start_reaper(self) -> None:
        if self._reaper is None and not self.shutting_down:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())
            if self.shared and not self._heard:
                bus = self.server.bus
                self._heard = [bus.subscribe(ENDED, self._end_here), bus.subscribe(STANDALONE, self._standalone_moved),
                               bus.subscribe(CHANGED, self._changed_elsewhere)]  # fmt: skip

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.touch_every)
            try:
                await self.reap()
            except BackendUnavailableError as exc:  # the shared store out of reach: the next round tries again
                log.warning("reaping idle sessions waits for the shared backend: %s", exc)
            except Exception:
                log.exception("reaping idle sessions failed")

    async def reap(self) -> int:
        """Close sessions idle for longer than the timeout (never one with an open connection; when shared, never
        one another process served within the timeout)."""
        deadline = time.monotonic() - self.idle_timeout
        idle = [s for s in self.live.values() if s.connections == 0 and s.last_active < deadline]
        if self.shared:
            now = self.clock()
            for http_session in [s for s in self.live.values() if s.connections and s.id is not None]:
                await self.store.touch(http_session.id, now)  # type: ignore[arg-type]  # held open here: busy
            idle = await self._idle_everywhere(idle)
        for http_session in idle:
            log.info("closing idle session %s", http_session.id)
            await self.close(http_session)
        return len(idle)

    async def _idle_everywhere(self, idle: list[HttpSession]) -> list[HttpSession]:
        """Those of ``idle`` (idle here) that no process marked seen within the timeout (or that the store lost)."""
        if not idle:
            return idle
        marks = await self.store.last_seen([s.id or "" for s in idle])
        oldest = self.clock() - self.idle_timeout - self.touch_every
        return [s for s, mark in zip(idle, marks, strict=True) if mark is None or mark < oldest]

    # --- shutdown -----------------------------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Stop taking new sessions and end GET streams; POSTs in flight are left to finish (graceful drain)."""
        self.shutting_down = True
        self.end_streams()

    def end_streams(self) -> None:
        """End every GET stream now, and any opened from now on at once: its client opens it again (with
        Last-Event-ID), elsewhere when this process is handing its clients over to the others of a fleet."""
        self.streams_ending = True
        for told in self.on_streams_ending:
            told()
        for http_session in self.live.values():
            if http_session.standalone is not None:
                http_session.standalone.wake()

    async def aclose(self) -> None:
        """Close every session (cancelling its work) and stop the reaper. With shared backends the sessions live on
        in the other processes: only this process's copies end (the store and the others keep them)."""
        self.begin_shutdown()
        for http_session in list(self.live.values()):
            if self.shared:
                self.live.pop(http_session.id or "", None)
                tasks = http_session.close()
                if tasks:
                    await asyncio.wait(tasks, timeout=5)
            else:
                await self.close(http_session)
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for subscription in self._heard:
            subscription.cancel()
        self._heard = []


def _reap_interval(idle_timeout: float) -> float:
    return max(min(idle_timeout / 4, 60.0), 0.05)


def _bound_to(http_session: HttpSession, principal: Any) -> bool:
    """Whether the session was opened by this principal (a session never outlives its opener's identity)."""
    opener = http_session.session.state.principal
    return principal is opener or principal_id(principal) == principal_id(opener)  # the same object: a cached token
