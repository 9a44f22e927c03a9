"""The tool manager across a fleet: every process serving a deck serves the definitions of one shared store.

How a change goes (``Fleet.commit``): the process plans it on the state it serves, at revision ``r``, and commits
the planned state to the store if the store is still at ``r`` (store.py). Committed, the process serves it (one
swap of its registry), publishes ``{"revision": r + 1, "epoch": ...}`` on the bus topic ``definitions``, and logs
the change; the others, hearing it, read the state and serve it in one swap of theirs (``list_changed`` goes out
as it does for any change of a registry: each process announces its own swap on the shared bus, so a client may
hear it once per process, and the last it hears comes after every process serves the change). If another change came first, the process serves that one,
then plans its own again on it: a change the other already made (two processes watching one directory, say) is then
"unchanged" and committed by no one, and one the version rules now refuse is refused. So each change is applied
once, and the rules hold against what the fleet serves. A change that changes nothing, or that the rules refuse, is
checked against the store's revision first, so a process that has not heard of a change yet does not judge by an
older state.

A process that joins (``open``, as its deck opens its backends) serves the store's state; of what it loaded before
(files, ``load_manifest``), it offers the fleet only what the fleet has never pinned — a new id, or a new version —
as one change under the same rules. What the fleet already decided stays decided: a version it rolled back or
unregistered is not brought back by a process that restarts with the old files; a new release's higher version is
an upgrade. What it refuses is logged, and the fleet's version serves.

What the network changes: the bus may lose a message (Redis away for a moment), so each process also looks at the
store's revision every ``RESYNC`` seconds (``follow``, a service of the deck). A process that cannot make a
definition's Tools (a handler it cannot import, a binding it lacks) logs why and serves none of that definition's
tools, until a later version it can make. A store found empty while this process serves a revision (a Redis
restart without persistence) is given this process's state again, in a new epoch (the epoch, a random mark of the
first commit into an empty store, tells the new revision 2 from the old one).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.errors import RegistrationError
from .definition import Definition, DefinitionError
from .problems import ManagerError
from .served import Applied, Change, ServedState, log_applied

if TYPE_CHECKING:
    from ..tools.tool import Tool
    from .store import DefinitionStore, Snapshot

ToolManager = Any  # manager.py's (which imports this module: not imported here)

log = logging.getLogger("tooldeck.manifest")
TOPIC = "definitions"
RESYNC = 5.0  # seconds between looks at the store's revision
ATTEMPTS = 20  # plans of one change, each after another process's change came first
T = TypeVar("T")
Planner = Callable[[ServedState, bool], Change]


class Fleet:
    """One manager's link to the shared store (``ToolManager.share`` makes it)."""

    def __init__(self, manager: ToolManager, store: DefinitionStore, bus: Any) -> None:
        self.manager = manager
        self.store = store
        self.bus = bus
        self.revision = 0  # of the state this process serves
        self.epoch: str | None = None  # of that revision (see _write)
        self.lock = asyncio.Lock()  # one change or catching up at a time in this process
        self.loop: asyncio.AbstractEventLoop | None = None
        self.subscription: Any = None  # to the bus topic, from open() until follow() ends
        self._pending = False  # a catch-up is scheduled and has not read yet
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        """Join: listen for changes, serve the store's state, offer what this process loaded that the fleet has
        never pinned (see the module docstring)."""
        self.loop = asyncio.get_running_loop()
        self.subscription = self.bus.subscribe(TOPIC, self._heard)
        ready = getattr(self.bus, "ready", None)
        if ready is not None:
            await ready()  # hear every change committed after the read below
        loaded = self.manager.state
        async with self.lock:
            snapshot = await self.store.read()
            self.manager.fleet = self
            self._adopt(snapshot, joining=True)
            offered = self._news(loaded)
            while offered:  # the fleet's refusals are logged, and the rest offered again without them
                try:
                    await self._commit(self._offering(offered))
                    break
                except DefinitionError as exc:
                    for problem in exc.problems:
                        log.error("%s (this process's definition is not served; what the fleet serves is)", problem)
                    refused = {problem.file for problem in exc.problems}
                    kept = [d for d in offered if (d.source or d.id) not in refused]
                    offered = kept if len(kept) < len(offered) else []
            served = ", ".join(definition.label for definition in self.manager.definitions()) or "none"
            log.info("tool definitions: serving revision %d of the shared definitions (%s)", self.revision, served)

    async def commit(self, plan: Planner) -> list[Applied]:
        """Make the change ``plan(state, again)`` plans, fleet-wide (see the module docstring); what it did."""
        async with self.lock:
            return await self._commit(plan)

    def wait(self, change: Coroutine[Any, Any, T]) -> T:
        """Run ``change`` on the deck's loop for a caller on another thread, and wait for it there."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed() or not loop.is_running():
            change.close()
            why = "this thread runs the event loop, which cannot wait for itself" if running is loop else (
                "the deck's event loop is not running")  # fmt: skip
            raise ManagerError(f"the tool definitions are shared, so a change waits for the shared store, and {why}: "
                               "await the manager's a-form (await deck.manager.aupgrade(...), aregister, aunregister, "
                               "arollback, aapply, aload)")  # fmt: skip
        return asyncio.run_coroutine_threadsafe(change, loop).result()

    async def follow(self) -> None:
        """Look at the store's revision every ``RESYNC`` seconds and catch up with a change not heard of; a
        service of the deck, until cancelled."""
        try:
            while True:
                await asyncio.sleep(RESYNC)
                try:
                    revision = await self.store.revision()
                except Exception as exc:  # the store away: the next look tries again
                    log.debug("the shared tool definitions could not be read (%s)", exc)
                    continue
                if revision != self.revision:
                    await self._catch_up()
        finally:
            self.subscription.cancel()

    # --- inside ------------------------------------------------------------------------------------------------

    async def _commit(self, plan: Planner) -> list[Applied]:
        again = False
        for _ in range(ATTEMPTS):
            try:
                change: Change | None = plan(self.manager.state, again)
            except (DefinitionError, ManagerError):
                if await self.store.revision() == self.revision:
                    raise  # refused by what the fleet serves now
                change = None  # refused by a state the fleet has left: judged again on the one it serves
            if change is None:
                pass
            elif not change.changes_anything:
                if await self.store.revision() == self.revision:
                    return change.done
            else:
                if await self._write(change.state):
                    self.manager.install(change)
                    log_applied(change.done)
                    return change.done
            again = True
            await self._refresh(await self.store.read())  # another change came first: served here, then plan again
        raise ManagerError(f"the shared tool definitions changed {ATTEMPTS} times while this change was planned: "
                           "nothing changed; try again")  # fmt: skip

    async def _write(self, state: ServedState) -> bool:
        """Commit ``state`` at the revision served here and tell the fleet; False when another change came first.
        The first commit into an empty store starts an epoch: revisions count from there, and a store that lost
        its state (revision 0 again) starts another, so no process mistakes the new revision 2 for the old."""
        epoch = self.epoch if self.revision else secrets.token_hex(8)
        revision = await self.store.commit(self.revision, {**state.to_json(), "epoch": epoch})
        if revision is None:
            return False
        self.revision, self.epoch = revision, epoch
        self.bus.publish(TOPIC, {"revision": revision, "epoch": epoch})
        return True

    def _offering(self, offered: list[Definition]) -> Planner:
        """What this process loaded at start and offers the fleet, planned as a change."""
        return lambda state, again: self.manager.plan(state, offered, [], again=again)

    def _heard(self, payload: Any) -> None:
        revision = payload.get("revision") if isinstance(payload, dict) else None
        if not isinstance(revision, int) or self._pending or self.loop is None:
            return
        if revision <= self.revision and payload.get("epoch") == self.epoch:
            return  # served here already
        self._pending = True
        task = self.loop.create_task(self._catch_up())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _catch_up(self) -> None:
        async with self.lock:
            self._pending = False
            try:
                await self._refresh(await self.store.read())
            except Exception as exc:  # the store away: the next message, or look (follow), catches up
                log.warning("the shared tool definitions could not be read (%s); this process serves revision %d "
                            "until they can", exc, self.revision)  # fmt: skip

    async def _refresh(self, snapshot: Snapshot) -> None:
        if snapshot.revision or not self.revision:
            self._adopt(snapshot)
            return
        # Empty, while this process serves a revision: the store lost what it held (a restart without
        # persistence). What this process serves is written back (by whichever process commits first; the others
        # then serve that, in its new epoch).
        log.warning("the shared tool definitions are gone from the store (a restart without persistence?); writing "
                    "back the revision %d this process serves", self.revision)  # fmt: skip
        self.revision = 0
        await self._write(self.manager.state)

    def _adopt(self, snapshot: Snapshot, *, joining: bool = False) -> None:
        """Serve the state of ``snapshot`` in one swap of the registry (nothing when it is not newer)."""
        epoch = snapshot.state.get("epoch")
        if snapshot.revision <= self.revision and epoch == self.epoch and not joining:
            return
        manager = self.manager
        old = manager.state
        new = ServedState.from_json(snapshot.state, known=old)
        old_tools: list[Tool] = []
        new_tools: list[Tool] = []
        changed: list[str] = []
        for tool_id, served in old.served.items():
            now = new.served.get(tool_id)
            if now is None or now.definition.digest != served.definition.digest:
                old_tools.extend(served.tools or ())
                if now is None:
                    changed.append(f"{tool_id} unregistered")
        leaving = {tool.name for tool in old_tools}
        for tool_id, served in new.served.items():
            before = old.served.get(tool_id)
            if before is not None and before.definition.digest == served.definition.digest:
                continue
            if served.tools is None:
                served.tools = self._tools(served.definition, before, leaving)
            new_tools.extend(served.tools)
            changed.append(served.definition.label)
        manager.install(Change(new, old_tools, new_tools, []))
        self.revision, self.epoch = snapshot.revision, epoch
        if changed and not joining:
            log.info("tool definitions: serving revision %d of the shared definitions (%s)", snapshot.revision,
                     ", ".join(changed))  # fmt: skip

    def _tools(self, definition: Definition, before: Any, leaving: set[str]) -> list[Tool]:
        """The Tools of a definition another process committed; none (logged) when this process cannot make them."""
        registry = self.manager._registry
        taken = [name for name in definition.tool_names()
                 if name in registry and name not in leaving and getattr(registry.get(name), "definition", None) is None]  # fmt: skip
        try:
            if taken:
                raise RegistrationError(f"tool {taken[0]!r} is a Python tool of this process")
            return self.manager.make_tools(definition, before)
        except Exception as exc:  # a handler it cannot bind, or a definition this version of tooldeck cannot read
            reason = " ".join(str(exc).split()) or type(exc).__name__
            log.error("tool definition %s cannot be served by this process (%s); the other processes serve it",
                      definition.label, reason)  # fmt: skip
            return []

    def _news(self, loaded: ServedState) -> list[Definition]:
        """What this process loaded that the fleet has never pinned (see the module docstring)."""
        pins = self.manager.state.pins
        news = []
        for served in loaded.served.values():
            definition = served.definition
            pinned = pins.get((definition.id, definition.version))
            if pinned is None:
                news.append(definition)
            elif pinned != definition.digest:
                log.error("%s: $.version: %s was served by the fleet with digest sha256:%s…; this process's differs "
                          "(sha256:%s…): a changed definition needs a new version (what the fleet serves is served)",
                          definition.source or definition.id, definition.label, pinned[:12],
                          definition.digest[:12])  # fmt: skip
        return news
