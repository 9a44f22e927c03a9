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
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.errors import RegistrationError, TooldeckError
from ..protocol.record import Record
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

if TYPE_CHECKING:
    from ..tools.registry import ToolRegistry
    from ..tools.tool import Tool

log = logging.getLogger("tooldeck.manifest")
HISTORY = 10  # earlier versions kept per definition for rollback
F = TypeVar("F", bound=Callable[..., Any])


class ManagerError(TooldeckError):
    """An operation the tool manager cannot do (rolling back with no earlier version, unregistering an unknown id)."""


class Applied(Record):
    """What the manager did with one definition: ``action`` is registered, upgraded, unchanged, unregistered or
    rolled back; ``change`` is the classification of an upgrade (major, minor, patch) with its first reason."""

    __slots__ = ("id", "action", "old_version", "new_version", "change")

    def __init__(
        self, id: str, action: str, old_version: str | None, new_version: str | None, change: str = ""
    ) -> None:
        self.id = id
        self.action = action
        self.old_version = old_version
        self.new_version = new_version
        self.change = change

    def __str__(self) -> str:
        versions = " -> ".join(v for v in (self.old_version, self.new_version) if v)
        reason = f" ({self.change})" if self.change else ""
        return f"tool definition {self.id}: {self.action} {versions}{reason}"


class _Served(Record):
    __slots__ = ("definition", "tools")

    def __init__(self, definition: Definition, tools: list[Tool]) -> None:
        self.definition = definition
        self.tools = tools


class ToolManager:
    """The definitions a deck serves (``deck.manager``); every method may be called while the deck is serving."""

    def __init__(self, registry: ToolRegistry, injectable: tuple[type, ...] = ()) -> None:
        self._registry = registry
        self._injectable = injectable
        self.bindings: dict[str, Callable[..., Any]] = {}
        self._served: dict[str, _Served] = {}
        self._history: dict[str, list[_Served]] = {}  # earlier served versions, oldest first
        self._retired: dict[str, _Served] = {}  # id -> what it served when it was unregistered (and is judged against)
        self._pins: dict[tuple[str, str], str] = {}  # (id, version) -> digest
        self._lock = threading.Lock()

    # --- what is served -----------------------------------------------------------------------------------------

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._served

    def definitions(self) -> list[Definition]:
        """The served definitions, in the order they were first registered."""
        return [served.definition for served in self._served.values()]

    def get(self, tool_id: str) -> Definition | None:
        served = self._served.get(tool_id)
        return served.definition if served is not None else None

    def history(self, tool_id: str) -> list[Definition]:
        """The versions served before the current one, oldest first (what ``rollback`` goes back through: the last
        ``HISTORY``); for an unregistered id, those before the version it served last."""
        return [served.definition for served in self._history.get(tool_id, ())]

    def last_served(self, tool_id: str) -> Definition | None:
        """The definition served now, or (unregistered) the one served last: what a new version is judged against."""
        served = self._served.get(tool_id) or self._retired.get(tool_id)
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
        path = os.fspath(path)
        directory = os.path.isdir(path)
        paths = definition_files(path) if directory else [path]
        definitions, problems = read_definitions(paths, within=path if directory else None)
        if problems:
            raise DefinitionError(problems)
        return self.apply(definitions)

    def register(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        """Register, upgrade or confirm one definition (a Definition, a document dict, or a file path)."""
        return self.apply([as_definition(definition)])[0]

    def upgrade(self, definition: Definition | dict[str, Any] | str | os.PathLike[str]) -> Applied:
        """Replace a served definition with a higher version (``register`` that refuses a definition not served)."""
        definition = as_definition(definition)
        if definition.id not in self._served:
            raise ManagerError(f"cannot upgrade {definition.id!r}: it is not served (register it)")
        return self.apply([definition])[0]

    def unregister(self, tool_id: str) -> Applied:
        """Stop serving a definition's tools (its versions stay pinned)."""
        return self.apply((), remove=(tool_id,))[0]

    def apply(self, definitions: Iterable[Definition], remove: Iterable[str] = ()) -> list[Applied]:
        """Register/upgrade ``definitions`` and unregister the ids in ``remove``, all or nothing: DefinitionError
        lists every problem and nothing changes; otherwise the registry changes in one swap."""
        definitions = list(definitions)
        remove = [tool_id for tool_id in remove if tool_id not in {d.id for d in definitions}]
        with self._lock:
            plan, problems = self._plan(definitions, remove)
            if problems:
                raise DefinitionError(problems)
            return self._commit(plan, remove)

    def check(self, definitions: Iterable[Definition]) -> list[Problem]:
        """Every problem ``apply`` would refuse ``definitions`` for — handlers imported and their signatures checked,
        commands found, names and versions judged — with nothing changed: what ``tooldeck validate`` reports."""
        with self._lock:
            return self._plan(list(definitions), [])[1]

    def rollback(self, tool_id: str) -> Applied:
        """Serve the version that was served before the current one again (no version rules: it was served)."""
        with self._lock:
            earlier = self._history.get(tool_id)
            current = self._served.get(tool_id)
            if current is None:
                raise ManagerError(f"cannot roll back {tool_id!r}: it is not served")
            if not earlier:
                raise ManagerError(f"cannot roll back {tool_id!r}: no earlier version was served")
            # a name given up by the current version may have been taken since (by a Python tool, say): keep it
            own = {tool.name for tool in current.tools}
            for tool in earlier[-1].tools:
                if tool.name in self._registry and tool.name not in own:
                    raise ManagerError(
                        f"cannot roll back {tool_id!r}: tool {tool.name!r} is now served by {self._owner(tool.name)}"
                    )
            previous = earlier.pop()
            self._swap(current.tools, previous.tools)
            self._served[tool_id] = previous
            applied = Applied(tool_id, "rolled back", current.definition.version, previous.definition.version)
        log.warning("%s", applied)
        return applied

    # --- inside -------------------------------------------------------------------------------------------------

    def _plan(
        self, definitions: list[Definition], remove: list[str]
    ) -> tuple[list[tuple[Applied, _Served]], list[Problem]]:
        problems = check_unique_ids(definitions)
        for tool_id in remove:
            if tool_id not in self._served:
                problems.append(Problem(tool_id, "$.id", f"no tool definition {tool_id!r} is served"))
        leaving = {tool.name for tool_id in remove if tool_id in self._served for tool in self._served[tool_id].tools}
        claimed: dict[str, str] = {}
        plan: list[tuple[Applied, _Served]] = []
        for definition in definitions:
            file = definition.source or definition.id
            try:
                outcome = self._judge(definition)
            except DefinitionError as exc:
                problems.extend(exc.problems)
                continue
            current = self._served.get(definition.id)
            if outcome is None:  # served already, exactly as it is (so current is set)
                if current is not None:
                    plan.append((Applied(definition.id, "unchanged", None, definition.version), current))
                continue
            action, change = outcome
            own = {tool.name for tool in current.tools} if current else set()
            for name in definition.tool_names():
                if name in self._registry and name not in own and name not in leaving:
                    problems.append(Problem(file, "$.id", f"tool {name!r} is already served by {self._owner(name)}"))
                elif claimed.setdefault(name, definition.id) != definition.id:
                    problems.append(Problem(file, "$.id", f"tool {name!r} is also defined by {claimed[name]!r}"))
            try:
                previous = {tool.name: tool for tool in current.tools} if current else None
                tools = definition_tools(definition, self.bindings, self._injectable, previous)
            except RegistrationError as exc:
                problems.extend(Problem(file, *_located(line, file)) for line in str(exc).splitlines())
                continue
            old = current.definition.version if current else None
            plan.append((Applied(definition.id, action, old, definition.version, change), _Served(definition, tools)))
        return plan, problems

    def _judge(self, definition: Definition) -> tuple[str, str] | None:
        """``(action, change)`` for a definition, None when it is already served as it is; DefinitionError if the
        version rules refuse it."""
        file = definition.source or definition.id
        pinned = self._pins.get((definition.id, definition.version))
        if pinned is not None and pinned != definition.digest:
            raise DefinitionError([Problem(file, "$.version", (
                f"{definition.label} was served with digest sha256:{pinned[:12]}…; this definition differs "
                f"(sha256:{definition.digest[:12]}…): a changed definition needs a new version"))])  # fmt: skip
        current = self._served.get(definition.id)
        last = current or self._retired.get(definition.id)  # unregistered, an id is judged against its last version
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

    def _commit(self, plan: list[tuple[Applied, _Served]], remove: list[str]) -> list[Applied]:
        old_tools: list[Tool] = []
        new_tools: list[Tool] = []
        for applied, served in plan:
            if applied.action == "unchanged":
                continue
            current = self._served.get(applied.id)
            retired = self._retired.pop(applied.id, None)
            if current is not None:
                old_tools.extend(current.tools)
            before = current or retired
            if before is not None and before.definition.digest != served.definition.digest:
                earlier = self._history.setdefault(applied.id, [])
                earlier.append(before)
                del earlier[:-HISTORY]  # each keeps its Tools (and handlers) alive: a long-lived server keeps a few
            new_tools.extend(served.tools)
            self._served[applied.id] = served
            self._pins[(applied.id, served.definition.version)] = served.definition.digest
        done = [applied for applied, _ in plan]
        for tool_id in remove:
            served = self._served.pop(tool_id)
            self._retired[tool_id] = served  # what it comes back judged against; its history stays too
            old_tools.extend(served.tools)
            done.append(Applied(tool_id, "unregistered", served.definition.version, None))
        self._swap(old_tools, new_tools)
        for applied in done:
            if applied.action != "unchanged":
                log.info("%s", applied)
        return done

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
