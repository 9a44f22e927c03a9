"""What the tool manager serves, as one value: ``Served`` (a definition and the Tools made of it) and ``ServedState``
(the served definitions, their history, those unregistered, and the pins), with its JSON form for the shared store;
and a ``Change`` of it (with what it did to each definition: ``Applied``).

A change is made on a copy (``copy``) and the copy put in place at once, so a change that is refused, or that loses
its race to another process's (fleet.py), leaves nothing behind. The JSON form (store.py keeps it)::

    {"served":  [entry, ...],                 in the order the ids were first registered
     "history": {"id": [entry, ...]},         earlier versions, oldest first
     "retired": {"id": entry},                what an unregistered id served last
     "pins":    {"id": {"version": "sha256 hex"}}}

with ``entry`` = ``Definition.stored()``. Tools are never stored: each process makes its own from the definitions
(its handlers, its bindings), and keeps those it has for a digest it serves already.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..protocol.record import Record
from .definition import Definition

if TYPE_CHECKING:
    from ..tools.tool import Tool

log = logging.getLogger("tooldeck.manifest")


class Served(Record):
    """A definition and its Tools; ``tools`` is None for a version this process has not needed to serve (one another
    process served before it), made when a rollback brings it back."""

    __slots__ = ("definition", "tools")

    def __init__(self, definition: Definition, tools: list[Tool] | None) -> None:
        self.definition = definition
        self.tools = tools


class ServedState:
    """The manager's whole state (see the module docstring); changed only on a copy."""

    __slots__ = ("history", "pins", "retired", "served")

    def __init__(self) -> None:
        self.served: dict[str, Served] = {}
        self.history: dict[str, list[Served]] = {}  # earlier served versions, oldest first
        self.retired: dict[str, Served] = {}  # id -> what it served when it was unregistered (and is judged against)
        self.pins: dict[tuple[str, str], str] = {}  # (id, version) -> digest

    def copy(self) -> ServedState:
        other = ServedState()
        other.served = dict(self.served)
        other.history = {tool_id: list(earlier) for tool_id, earlier in self.history.items()}
        other.retired = dict(self.retired)
        other.pins = dict(self.pins)
        return other

    def tools_of(self, tool_id: str) -> list[Tool]:
        served = self.served.get(tool_id)
        return list(served.tools or ()) if served is not None else []

    def to_json(self) -> dict[str, Any]:
        pins: dict[str, dict[str, str]] = {}
        for (tool_id, version), digest in self.pins.items():
            pins.setdefault(tool_id, {})[version] = digest
        return {
            "served": [served.definition.stored() for served in self.served.values()],
            "history": {tool_id: [s.definition.stored() for s in earlier] for tool_id, earlier in self.history.items()},
            "retired": {tool_id: served.definition.stored() for tool_id, served in self.retired.items()},
            "pins": pins,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], known: ServedState) -> ServedState:
        """The state ``data`` holds, keeping what ``known`` (this process's state) has for each id and digest: its
        Definition and Tools. The others come without Tools (the caller makes those of the served ones)."""
        have: dict[tuple[str, str], Served] = {}
        for item in known.everything():  # the served ones first: theirs are the Tools in the registry
            key = (item.definition.id, item.definition.digest)
            if key not in have or have[key].tools is None:
                have[key] = item

        def served(entry: dict[str, Any]) -> Served:
            document = entry["document"]
            found = have.get((document["id"], entry["digest"]))
            return found if found is not None else Served(Definition.restored(**entry), None)

        state = cls()
        for entry in data.get("served", ()):
            item = served(entry)
            state.served[item.definition.id] = item
        state.history = {tool_id: [served(e) for e in earlier] for tool_id, earlier in data.get("history", {}).items()}
        state.retired = {tool_id: served(entry) for tool_id, entry in data.get("retired", {}).items()}
        state.pins = {
            (tool_id, v): d for tool_id, versions in data.get("pins", {}).items() for v, d in versions.items()
        }
        return state

    def everything(self) -> list[Served]:
        return [*self.served.values(), *(s for earlier in self.history.values() for s in earlier),
                *self.retired.values()]  # fmt: skip


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


class Change:
    """A change planned on a copy of the state: the state it makes, the Tools it takes out of the registry and puts
    in (one swap), and what it does to each definition."""

    __slots__ = ("done", "new_tools", "old_tools", "state")

    def __init__(self, state: ServedState, old_tools: list[Tool], new_tools: list[Tool], done: list[Applied]) -> None:
        self.state = state
        self.old_tools = old_tools
        self.new_tools = new_tools
        self.done = done

    @property
    def changes_anything(self) -> bool:
        return any(applied.action != "unchanged" for applied in self.done)


def log_applied(done: list[Applied]) -> None:
    """One line for each definition a change changed (a rollback as a warning: someone had to go back)."""
    for applied in done:
        if applied.action == "rolled back":
            log.warning("%s", applied)
        elif applied.action != "unchanged":
            log.info("%s", applied)
