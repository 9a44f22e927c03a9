"""The tool manager: registers, upgrades, unregisters and rolls back tool definitions while clients stay connected.

Its rules, checked before anything changes:
- a definition's tool names are free (not taken by another definition or a Python tool);
- a higher version replaces the served one only if its bump covers the change (changes.py classifies it);
- the same version is accepted only if the definition is identical (same digest); a lower one only by ``rollback``;
- a digest once served pins its ``id@version`` for the manager's lifetime: the same version with other content is
  refused, even after the definition was unregistered (the "rug pull": an approved tool changing under its version);
- an id keeps its history when it is unregistered: registered again, it is judged against the version served last,
  as an upgrade of it (deleting a file and adding its id back at 0.0.1 and level 0 is a downgrade, refused, not a
  fresh start), and ``history`` goes on from where it was.

Every change of a set is applied in one swap of the tool registry: clients never see half of it, one
``notifications/tools/list_changed`` goes out, and each definition changed is logged on one line. A call already
running keeps the Tool it started with, so it finishes on the old version; calls that arrive later get the new one.

Each change is planned on a copy of the state (served.py) and put in place whole. With shared definitions (a
``DefinitionStore`` in the deck's backends, store.py) the copy is committed to the store first, by compare-and-swap,
so the rules above, pins included, hold across every process serving the deck, and each process serves what was
committed (fleet.py); the awaited forms (``aapply``, ``aupgrade``, ...) are how a change is made on the event loop.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.errors import RegistrationError
from .definition import (
    Definition,
    DefinitionError,
    Problem,
    check_unique_ids,
    definition_files,
    load_definition,
    parse_definition,
)
from .mapping import definition_tools
from .problems import ManagerError
from .served import Applied, Change, Served, ServedState, log_applied

if TYPE_CHECKING:
    from ..tools.registry import ToolRegistry
    from ..tools.tool import Tool
    from .fleet import Fleet
    from .store import DefinitionStore

__all__ = ["HISTORY", "Applied", "ManagerError", "ToolManager", "as_definition", "read_definitions"]

log = logging.getLogger("tooldeck.manifest")
HISTORY = 10  # earlier versions kept per definition for rollback
F = TypeVar("F", bound=Callable[..., Any])


class ToolManager:
    """The definitions a deck serves (``deck.manager``); every method may be called while the deck is serving."""

    def __init__(self, registry: ToolRegistry, injectable: tuple[type, ...] = ()) -> None:
        self._registry = registry
        self._injectable = injectable
        self.bindings: dict[str, Callable[..., Any]] = {}
        self.state = ServedState()  # replaced whole by each change, never changed in place
        self._lock = threading.Lock()
        self.fleet: Fleet | None = None  # set by share(): the definitions live in a shared store

    # --- what is served -----------------------------------------------------------------------------------------

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self.state.served

    def definitions(self) -> list[Definition]:
        """The served definitions, in the order they were first registered."""
        return [served.definition for served in self.state.served.values()]

    def get(self, tool_id: str) -> Definition | None:
        served = self.state.served.get(tool_id)
        return served.definition if served is not None else None

    def history(self, tool_id: str) -> list[Definition]:
        """The versions served before the current one, oldest first (what ``rollback`` goes back through: the last
        ``HISTORY``); for an unregistered id, those before the version it served last."""
        return [served.definition for served in self.state.history.get(tool_id, ())]

    def last_served(self, tool_id: str) -> Definition | None:
        """The definition served now, or (unregistered) the one served last: what a new version is judged against."""
        state = self.state
        served = state.served.get(tool_id) or state.retired.get(tool_id)
        return served.definition if served is not None else None

    # --- binding code -------------------------------------------------------------------------------------------

    def implements(self, name: str) -> Callable[[F], F]:
        """``@manager.implements("calculator.add")`` binds a function to a capability (or ``"calculator"`` to every
        capability of a tool, called with ``capability=<name>``); bind before the definition is loaded."""
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"implements() takes 'tool-id.capability' or 'tool-id', got {name!r}")

        def register(fn: F) -> F:
            if not callable(fn):
                raise RegistrationError(f"@implements({name!r}) must decorate a function, got {type(fn).__name__}")
            if name in self.bindings and self.bindings[name] is not fn:
                raise RegistrationError(f"@implements({name!r}) is already bound to {self.bindings[name]!r}")
            self.bindings[name] = fn
            return fn

        return register

    # --- changing what is served --------------------------------------------------------------------------------

    def load(self, path: str | os.PathLike[str]) -> list[Applied]:
        """Register or upgrade the definitions in a file, or in every JSON/YAML file of a directory, as one change."""
        return self.apply(_read_path(path))

    def register(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        """Register, upgrade or confirm one definition (a Definition, a document dict, or a file path)."""
        return self.apply([as_definition(definition)])[0]

    def upgrade(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        """Replace a served definition with a higher version (``register`` that refuses a definition not served)."""
        definition = as_definition(definition)
        if self.fleet is not None:
            return self.fleet.wait(self.aupgrade(definition))
        with self._lock:
            change = self._plan_upgrade(self.state, definition, False)
            self.install(change)
        log_applied(change.done)
        return change.done[0]

    def unregister(self, tool_id: str) -> Applied:
        """Stop serving a definition's tools (its versions stay pinned)."""
        return self.apply((), remove=(tool_id,))[0]

    def apply(self, definitions: Iterable[Definition], remove: Iterable[str] = ()) -> list[Applied]:
        """Register/upgrade ``definitions`` and unregister the ids in ``remove``, all or nothing: DefinitionError
        lists every problem and nothing changes; otherwise the registry changes in one swap. With shared
        definitions (``share``), called from a thread other than the event loop's, it waits for ``aapply`` there."""
        definitions, remove = _arguments(definitions, remove)
        if self.fleet is not None:
            return self.fleet.wait(self.aapply(definitions, remove))
        with self._lock:
            change = self.plan(self.state, definitions, remove)
            self.install(change)
        log_applied(change.done)
        return change.done

    def rollback(self, tool_id: str) -> Applied:
        """Serve the version that was served before the current one again (no version rules: it was served)."""
        if self.fleet is not None:
            return self.fleet.wait(self.arollback(tool_id))
        with self._lock:
            change = self.plan_rollback(self.state, tool_id)
            self.install(change)
        log_applied(change.done)
        return change.done[0]

    def check(self, definitions: Iterable[Definition]) -> list[Problem]:
        """Every problem ``apply`` would refuse ``definitions`` for — handlers imported and their signatures checked,
        commands found, names and versions judged — with nothing changed: what ``tooldeck validate`` reports."""
        with self._lock:
            return self._plan(self.state, list(definitions), [])[1]

    # --- the same, awaited: how a change is made on the event loop when the definitions are shared -----------------

    async def aload(self, path: str | os.PathLike[str]) -> list[Applied]:
        return await self.aapply(_read_path(path))

    async def aregister(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        return (await self.aapply([as_definition(definition)]))[0]

    async def aupgrade(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        definition = as_definition(definition)
        if self.fleet is None:
            return self.upgrade(definition)
        return (await self.fleet.commit(lambda state, again: self._plan_upgrade(state, definition, again)))[0]

    async def aunregister(self, tool_id: str) -> Applied:
        return (await self.aapply((), remove=(tool_id,)))[0]

    async def aapply(self, definitions: Iterable[Definition], remove: Iterable[str] = ()) -> list[Applied]:
        """``apply``, committed to the shared definitions when there are (fleet.py): planned against the state the
        fleet serves, and planned again if another process changed it first."""
        definitions, remove = _arguments(definitions, remove)
        if self.fleet is None:
            return self.apply(definitions, remove)
        return await self.fleet.commit(lambda state, again: self.plan(state, definitions, remove, again=again))

    async def arollback(self, tool_id: str) -> Applied:
        if self.fleet is None:
            return self.rollback(tool_id)
        return (await self.fleet.commit(lambda state, again: self.plan_rollback(state, tool_id)))[0]

    async def share(self, store: DefinitionStore, bus: Any) -> None:
        """Serve the definitions kept in ``store`` from now on, with every process that shares it: what this process
        loaded before is offered to the fleet (fleet.py says how), and each change anywhere is served here too
        (``bus`` tells). A deck does this as it opens shared backends (``Deck.open_backends``)."""
        if self.fleet is None:
            from .fleet import Fleet

            await Fleet(self, store, bus).open()

    # --- planning a change on a state, and putting it in place ---------------------------------------------------

    def plan(self, state: ServedState, definitions: list[Definition], remove: list[str], *, again: bool = False
             ) -> Change:  # fmt: skip
        """The change ``apply`` makes to ``state``; DefinitionError lists every problem. ``again``: planned again
        after another process's change, so an id it unregistered already is no longer this change's to remove (it
        is "unchanged")."""
        gone = [tool_id for tool_id in remove if again and tool_id in state.retired]  # unregistered meanwhile
        remove = [tool_id for tool_id in remove if tool_id not in gone]
        judged, problems = self._plan(state, definitions, remove)
        if problems:
            raise DefinitionError(problems)
        change = self._change(state, judged, remove)
        change.done.extend(Applied(tool_id, "unchanged", None, None) for tool_id in gone)
        return change

    def plan_rollback(self, state: ServedState, tool_id: str) -> Change:
        """The change ``rollback`` makes to ``state``; ManagerError says why it cannot."""
        earlier = state.history.get(tool_id)
        current = state.served.get(tool_id)
        if current is None:
            raise ManagerError(f"cannot roll back {tool_id!r}: it is not served")
        if not earlier:
            raise ManagerError(f"cannot roll back {tool_id!r}: no earlier version was served")
        previous = earlier[-1]
        # a name given up by the current version may have been taken since (by a Python tool, say): keep it
        own = {tool.name for tool in current.tools or ()}
        for name in previous.definition.tool_names():
            if name in self._registry and name not in own:
                raise ManagerError(f"cannot roll back {tool_id!r}: tool {name!r} is now served by {self._owner(name)}")
        tools = previous.tools
        if tools is None:  # a version another process served: its Tools are made here now
            try:
                tools = self.make_tools(previous.definition, current)
            except RegistrationError as exc:
                raise ManagerError(f"cannot roll back {tool_id!r}: {exc}") from None
        new = state.copy()
        new.history[tool_id].pop()
        new.served[tool_id] = Served(previous.definition, tools)
        applied = Applied(tool_id, "rolled back", current.definition.version, previous.definition.version)
        return Change(new, list(current.tools or ()), tools, [applied])

    def install(self, change: Change) -> None:
        """Serve ``change``'s state: its Tools go in and out of the registry in one swap."""
        self.state = change.state
        self._swap(change.old_tools, change.new_tools)

    def make_tools(self, definition: Definition, current: Served | None = None) -> list[Tool]:
        """The Tools of ``definition`` (reusing the validators of ``current``'s where schemas are unchanged);
        RegistrationError when a handler cannot be bound."""
        previous = {tool.name: tool for tool in current.tools or ()} if current is not None else None
        return definition_tools(definition, self.bindings, self._injectable, previous)

    # --- inside -------------------------------------------------------------------------------------------------

    def _plan_upgrade(self, state: ServedState, definition: Definition, again: bool) -> Change:
        if definition.id not in state.served:
            raise ManagerError(f"cannot upgrade {definition.id!r}: it is not served (register it)")
        return self.plan(state, [definition], [], again=again)

    def _plan(
        self, state: ServedState, definitions: list[Definition], remove: list[str]
    ) -> tuple[list[tuple[Applied, Served]], list[Problem]]:
        problems = check_unique_ids(definitions)
        for tool_id in remove:
            if tool_id not in state.served:
                problems.append(Problem(tool_id, "$.id", f"no tool definition {tool_id!r} is served"))
        leaving = {name for tool_id in remove for name in (t.name for t in state.tools_of(tool_id))}
        claimed: dict[str, str] = {}
        plan: list[tuple[Applied, Served]] = []
        for definition in definitions:
            file = definition.source or definition.id
            try:
                outcome = self._judge(state, definition)
            except DefinitionError as exc:
                problems.extend(exc.problems)
                continue
            current = state.served.get(definition.id)
            if outcome is None:  # served already, exactly as it is (so current is set)
                if current is not None:
                    plan.append((Applied(definition.id, "unchanged", None, definition.version), current))
                continue
            action, change = outcome
            own = {tool.name for tool in current.tools or ()} if current else set()
            for name in definition.tool_names():
                if name in self._registry and name not in own and name not in leaving:
                    problems.append(Problem(file, "$.id", f"tool {name!r} is already served by {self._owner(name)}"))
                elif claimed.setdefault(name, definition.id) != definition.id:
                    problems.append(Problem(file, "$.id", f"tool {name!r} is also defined by {claimed[name]!r}"))
            try:
                tools = self.make_tools(definition, current)
            except RegistrationError as exc:
                problems.extend(Problem(file, *_located(line, file)) for line in str(exc).splitlines())
                continue
            old = current.definition.version if current else None
            plan.append((Applied(definition.id, action, old, definition.version, change), Served(definition, tools)))
        return plan, problems

    def _judge(self, state: ServedState, definition: Definition) -> tuple[str, str] | None:
        """``(action, change)`` for a definition, None when it is already served as it is; DefinitionError if the
        version rules refuse it."""
        file = definition.source or definition.id
        pinned = state.pins.get((definition.id, definition.version))
        if pinned is not None and pinned != definition.digest:
            raise DefinitionError([Problem(file, "$.version", (
                f"{definition.label} was served with digest sha256:{pinned[:12]}…; this definition differs "
                f"(sha256:{definition.digest[:12]}…): a changed definition needs a new version"))])  # fmt: skip
        current = state.served.get(definition.id)
        last = current or state.retired.get(definition.id)  # unregistered, an id is judged against its last version
        if last is None:
            return "registered", ""
        action = "upgraded" if current is not None else "registered"
        if last.definition.digest == definition.digest:
            return None if current is not None else (action, "")
        from .changes import check_upgrade

        verdict = check_upgrade(last.definition.document, definition.document)
        if not verdict.ok:
            message = verdict.message
            if current is None:
                message = (f"{message.removesuffix('; use rollback')}: {last.definition.label} was served until it "
                           "was unregistered, and an id keeps its history across that (only rollback goes back)")  # fmt: skip
            raise DefinitionError([Problem(file, "$.version", message)])
        first = verdict.changes[0] if verdict.changes else None
        change = f"{verdict.required}: {first.message}" if first is not None else ""
        return action, change

    def _change(self, state: ServedState, plan: list[tuple[Applied, Served]], remove: list[str]) -> Change:
        new = state.copy()
        old_tools: list[Tool] = []
        new_tools: list[Tool] = []
        for applied, served in plan:
            if applied.action == "unchanged":
                continue
            current = new.served.get(applied.id)
            retired = new.retired.pop(applied.id, None)
            if current is not None:
                old_tools.extend(current.tools or ())
            before = current or retired
            if before is not None and before.definition.digest != served.definition.digest:
                earlier = new.history.setdefault(applied.id, [])
                earlier.append(before)
                del earlier[:-HISTORY]  # each keeps its Tools (and handlers) alive: a long-lived server keeps a few
            new_tools.extend(served.tools or ())
            new.served[applied.id] = served
            new.pins[(applied.id, served.definition.version)] = served.definition.digest
        done = [applied for applied, _ in plan]
        for tool_id in remove:
            served = new.served.pop(tool_id)
            new.retired[tool_id] = served  # what it comes back judged against; its history stays too
            old_tools.extend(served.tools or ())
            done.append(Applied(tool_id, "unregistered", served.definition.version, None))
        return Change(new, old_tools, new_tools, done)

    def _swap(self, old: list[Tool], new: list[Tool]) -> None:
        put = {tool.name: tool for tool in new}
        gone = [tool.name for tool in old if tool.name not in put]
        if put or gone:
            self._registry.update(put, gone)

    def _owner(self, name: str) -> str:
        tool = self._registry.get(name)
        definition = getattr(tool, "definition", None)
        return f"tool definition {definition.label!r}" if definition is not None else "a Python tool"


def read_definitions(paths: Iterable[str], within: str | None = None) -> tuple[list[Definition], list[Problem]]:
    """The definitions in ``paths`` and every problem found in any of them (ids unique across the set); ``within``:
    the directory they are read from, which none may lead out of."""
    definitions: list[Definition] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            definitions.append(load_definition(path, within=within))
        except DefinitionError as exc:
            problems.extend(exc.problems)
    problems.extend(check_unique_ids(definitions))
    return definitions, problems


def _arguments(definitions: Iterable[Definition], remove: Iterable[str]) -> tuple[list[Definition], list[str]]:
    definitions = list(definitions)
    ids = {definition.id for definition in definitions}
    return definitions, [tool_id for tool_id in remove if tool_id not in ids]


def _read_path(path: str | os.PathLike[str]) -> list[Definition]:
    """The definitions of a file, or of every JSON/YAML file of a directory; DefinitionError lists every problem."""
    path = os.fspath(path)
    directory = os.path.isdir(path)
    paths = definition_files(path) if directory else [path]
    definitions, problems = read_definitions(paths, within=path if directory else None)
    if problems:
        raise DefinitionError(problems)
    return definitions


def as_definition(value: Definition | dict[str, Any] | str | os.PathLike[str]) -> Definition:
    if isinstance(value, Definition):
        return value
    if isinstance(value, dict):
        return parse_definition(value, f"<definition {value.get('id')!r}>")
    return load_definition(value)


def _located(message: str, file: str) -> tuple[str, str]:
    """A RegistrationError's ``file: $.path: text`` split into (path, text)."""
    rest = message.removeprefix(f"{file}: ")
    path, sep, text = rest.partition(": ")
    return (path, text) if sep and path.startswith("$") else ("$", rest)
