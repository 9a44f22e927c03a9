"""The process boundary: the one record of where a deck's state lives, chosen from one spec.

The rule. Everything that must hold across processes goes through a seam in this record; everything else is a
cache of one process, and the list below says why each may stay local. A deck that one process serves may keep all
of it in memory. A deck that several processes serve (behind a load balancer, or ``--workers N``) must share every
seam, or the processes tell one client different stories: a session one of them deleted, a task another marks
failed, a confirmation spent twice, a cursor another cannot read.

The seams (each a small Protocol with an in-memory implementation beside it, and one contract suite for all):

    sessions  SessionStore  server/state.py      the state of a 2025-11-25 HTTP session between its requests
    bus       Bus           server/bus.py        list_changed, resource updates, task status, a cancellation or a
                                                 client's answer, to whichever process serves the session; a session's
                                                 end; calls between processes (server/nodes.py: a task to stop, a
                                                 task's questions and answers, a stream to relay)
    tasks     TaskStore     tasks/store.py       task records, with the process that owns each and its lease
    events    EventStore    server/events.py     SSE events a client may resume with Last-Event-ID
    limiter   RateLimiter   security/limits.py   the token buckets of the policy's [limits]
    spent     SpentStore    security/spent.py    single-use marks: the requestState of a 2026-07-28 confirmation
    keys      KeyRing       security/keys.py     the keys that sign what a client hands back (requestState, cursors)
    approvals ApprovalStore security/approvals.py the calls waiting for a person's decision (levels 8-10 approved in a
                                                 browser, four eyes), listed and decided on any process (the decision
                                                 then reaches the waiting call over the bus: approval_relay.py)
    definitions  DefinitionStore (manifest/store.py): the tool definitions served, their history and pins, one
                 numbered state changed by compare-and-swap (None: the tool manager of this process keeps them)

The operator console's sign-ins (``console/seats.py``) are kept through the record's ``engine`` when it has one (a
seat is a JSON value with a time to live: ``engine/values.py``), and in the console's process otherwise.

Per process, on purpose:

- Verified JWTs and the issuer's key set: derived from the token and the issuer's JWKS; every process derives the
  same answer, and a key's withdrawal reaches each within the set's cache time.
- Compiled validators, encoded listings and cached initialize results: derived from the registries.
- The registries: each process registers the same Python tools, resources and prompts from the same code. Tool
  definitions (and what the tool manager decides: history, pins) are shared through ``definitions`` when there is
  one: each process serves the store's state, swapped into its registry whole when another process commits a change
  (manifest/fleet.py), so the registry is a cache of the store; the Tools made of a definition (handlers bound,
  validators compiled) are made by each process for itself.
- The HTTP flood guard (``[limits] http_requests``): it protects this process's own sockets and CPU.
- 2025-11-25 confirmation codes: issued and redeemed within one call, on the process that runs the call; another
  process has no record of a code, so a replay there is refused.
- A call waiting for an approval: it waits in the process that runs it (the decision is delivered to it over the
  bus), and ends with that process (a decider is told so).
- The audit trail: one writer per file (a lock refuses a second one), so each process keeps its own trail.
- The worker pool, the runner's requests in flight, the SSE channels of open connections and the listen streams:
  the work of this process, which ends with it. (What other processes need of it goes to it over the bus: a
  cancelled task stops here, a stream of this process resumed elsewhere is relayed from here.)

A spec names the record: ``memory`` (everything in this process), ``sqlite:PATH`` (tasks in a SQLite file that
outlives the process, the rest in memory), ``redis://HOST:PORT/DB`` (every seam in one Redis or Valkey, shared by
every process given the same URL; ``rediss://``, ``unix://`` and ``valkey://`` too, ``?prefix=name:`` to share a
server between decks). Without one, a deck keeps everything in memory and lets the transport
choose where tasks live (memory over stdio; ``tooldeck serve --http`` keeps them in SQLite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import RegistrationError
from ..security.approvals import MemoryApprovalStore
from ..security.keys import MemoryKeyRing
from ..security.limits import MemoryRateLimiter
from ..security.spent import MemorySpentStore
from .bus import MemoryBus
from .events import MemoryEventStore
from .state import MemorySessionStore

if TYPE_CHECKING:
    from ..manifest.store import DefinitionStore
    from ..security.approvals import ApprovalStore
    from ..security.keys import KeyRing
    from ..security.limits import AsyncRateLimiter, RateLimiter
    from ..security.spent import SpentStore
    from ..tasks.store import TaskStore
    from .bus import Bus
    from .events import EventStore
    from .state import SessionStore

SPECS = "memory, sqlite:PATH, redis://HOST:PORT/DB"
_REDIS = ("redis://", "rediss://", "valkey://", "valkeys://", "unix://")


class Backends:
    """Where a deck's state lives (see the module docstring). Each seam may be given; what is not is the in-memory
    implementation (``definitions``: None, kept by the tool manager). ``tasks`` is a ``TaskStore``, a spec
    (``"memory"``, ``"sqlite:PATH"``) opened on first use, or None (the transport chooses). ``shared``: several
    processes use these backends (keys must then be shared too)."""

    __slots__ = (
        "_opened",
        "approvals",
        "bus",
        "definitions",
        "engine",
        "events",
        "keys",
        "limiter",
        "sessions",
        "shared",
        "spec",
        "spent",
        "tasks",
    )

    def __init__(
        self,
        *,
        sessions: SessionStore | None = None,
        bus: Bus | None = None,
        tasks: TaskStore | str | None = None,
        events: EventStore | None = None,
        limiter: RateLimiter | AsyncRateLimiter | None = None,
        spent: SpentStore | None = None,
        keys: KeyRing | None = None,
        definitions: DefinitionStore | None = None,
        approvals: ApprovalStore | None = None,
        spec: str = "memory",
        shared: bool = False,
        engine: Any = None,
    ) -> None:
        self.sessions: SessionStore = sessions if sessions is not None else MemorySessionStore()
        self.bus: Bus = bus if bus is not None else MemoryBus()
        self.tasks = tasks
        self.events: EventStore = events if events is not None else MemoryEventStore()
        self.limiter: RateLimiter | AsyncRateLimiter = limiter if limiter is not None else MemoryRateLimiter()
        self.spent: SpentStore = spent if spent is not None else MemorySpentStore()
        self.keys: KeyRing = keys if keys is not None else MemoryKeyRing()
        self.definitions = definitions  # None: the deck's tool manager keeps its definitions (nothing to share)
        self.approvals: ApprovalStore = approvals if approvals is not None else MemoryApprovalStore()
        self.spec = spec
        self.shared = shared
        self.engine = engine  # the connection the shared seams use (tooldeck.engine), closed with them
        self._opened = False

    def __repr__(self) -> str:
        return f"Backends({self.spec})"

    @property
    def opened(self) -> bool:
        """Whether ``open`` has made them ready (a process serves from then on; its readiness probe says so)."""
        return self._opened

    async def open(self) -> None:
        """Make the backends ready before the deck serves (a transport calls it once its loop runs): reach the shared
        server, settle the shared keys. Raises ``BackendUnavailableError`` when it cannot be reached, and
        ``RuntimeError`` when shared backends would sign with a key only this process knows."""
        if self._opened:
            return
        if self.engine is not None:
            await self.engine.check()
        for seam in (self.keys, self.bus):
            opening = getattr(seam, "open", None)
            if opening is not None:
                await opening()
        if self.shared:
            for purpose in ("request-state", "cursor"):
                self.keys.key(purpose)
            random = sorted(getattr(self.keys, "random", ()) or ())
            if random:
                raise RuntimeError(
                    f"these backends are shared by several processes, but the {' and '.join(random)} key is random "
                    "to this one, so what it signs no other process could check: give the deck the key "
                    "(state_key=, cursor_secret=, $TOOLDECK_STATE_KEY) or keep keys in the shared backend"
                )
        self._opened = True

    async def aclose(self) -> None:
        """Let go of the shared server's connections (the seams in memory have nothing to close)."""
        if self.engine is not None:
            await self.engine.aclose()


def backends_from_spec(spec: str, *, keys: dict[str, bytes | None] | None = None) -> Backends:
    """The record a spec names (``memory``, ``sqlite:PATH``, ``redis://...``); ``keys``: the keys configuration gives
    (purpose -> key, None for none). Raises ``RegistrationError`` naming what is accepted."""
    if not isinstance(spec, str) or not spec:
        raise RegistrationError(f"backends: expected a spec ({SPECS}), got {spec!r}")
    if spec.lower().startswith(_REDIS):
        return redis_backends(spec, keys=keys)
    ring = MemoryKeyRing(keys)
    if spec == "memory":
        return Backends(tasks="memory", keys=ring, spec=spec)
    if spec.startswith("sqlite:"):
        from ..tasks.specs import check_store_spec

        try:
            check_store_spec(spec)
        except ValueError as exc:
            raise RegistrationError(f"backends: {exc}") from None
        return Backends(tasks=spec, keys=ring, spec=spec)
    raise RegistrationError(f"backends {spec!r}: use one of {SPECS}")


def redis_backends(url: str, *, keys: dict[str, bytes | None] | None = None, session_ttl: float | None = None
                   ) -> Backends:  # fmt: skip
    """Every seam in the Redis or Valkey at ``url``, over one engine, shared (``shared=True``). Keys configuration
    gives win over the ones kept in Redis. Imports the Redis client here, and only here; without the extra installed,
    ``RegistrationError`` says how to install it."""
    try:
        from ..engine.connection import Engine
    except ImportError:
        raise RegistrationError(
            f"backends {url.split('@')[-1]!r}: the Redis client is not installed (pip install 'tooldeck[redis]')"
        ) from None
    from ..manifest.store_redis import RedisDefinitionStore
    from ..security.approvals_redis import RedisApprovalStore
    from ..security.keys_redis import RedisKeyRing
    from ..security.limits_redis import RedisRateLimiter
    from ..security.spent_redis import RedisSpentStore
    from ..tasks.redis import RedisTaskStore
    from .bus_redis import RedisBus
    from .events_redis import RedisEventStore
    from .state_redis import RedisSessionStore

    try:
        engine = Engine.from_url(url)
    except ValueError as exc:
        raise RegistrationError(f"backends {exc}") from None
    return Backends(
        sessions=RedisSessionStore(engine, ttl=session_ttl),
        bus=RedisBus(engine),
        events=RedisEventStore(engine),
        limiter=RedisRateLimiter(engine),
        spent=RedisSpentStore(engine),
        keys=RedisKeyRing(engine, keys),
        tasks=RedisTaskStore(engine),
        definitions=RedisDefinitionStore(engine),
        approvals=RedisApprovalStore(engine),
        engine=engine,
        spec=engine.name,
        shared=True,
    )


def resolve(given: Backends | str | None, *, task_store: Any = None, keys: dict[str, bytes | None]) -> Backends:
    """The record a deck serves with: ``given`` (a record or a spec; None: in memory, tasks chosen by the
    transport), with the deck's ``task_store`` option, when set, as its tasks seam."""
    if given is None:
        found = Backends(keys=MemoryKeyRing(keys))
    elif isinstance(given, Backends):
        found = given
    else:
        found = backends_from_spec(given, keys=keys)
    if task_store is not None:
        found.tasks = task_store
    return found
