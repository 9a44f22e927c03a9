"""The ``DefinitionStore`` seam: the tool definitions a fleet serves, as one numbered state changed by compare-and-swap.

A state (JSON) holds what the tool manager decides by (manager.py): the served definitions, the versions each served
before (what ``rollback`` goes back through), those unregistered, and every ``id@version`` pinned to its digest. Each
committed state gets the next revision number. A process plans a change against the state at revision ``r`` and
commits it only if the store is still at ``r`` (``commit(r, state)``); otherwise another change came first, and the
process reads the new state, plans again on it, and commits at the new revision. So each change is applied exactly
once, and the version rules (a higher version, a bump that covers the change, a pin never broken) are checked
against the state the change replaces: they hold across the fleet, not just in one process.

The store keeps the state; how processes learn of a new one (a bus message, a periodic look at ``revision``) is the
manager's side (fleet.py). ``MemoryDefinitionStore`` is for decks of one process that share a record of backends
(and for tests); ``store_redis.RedisDefinitionStore`` is a fleet's. A deck with no store configured keeps its
definitions in its manager alone, as it always did.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import orjson


class Snapshot(NamedTuple):
    """A state and its revision: 0 and ``{}`` before the first commit."""

    revision: int
    state: dict[str, Any]


class DefinitionStore(Protocol):
    async def read(self) -> Snapshot:
        """The current state and its revision, read at once (never a state with another state's number)."""
        ...

    async def revision(self) -> int:
        """The current revision alone: a cheap look at whether anything changed."""
        ...

    async def commit(self, expected: int, state: dict[str, Any]) -> int | None:
        """Replace the state with ``state`` (JSON) if the revision is still ``expected``: the new revision
        (``expected + 1``), or None when another commit came first (nothing changed). ``TypeError`` for a state
        that is not JSON."""
        ...


class MemoryDefinitionStore:
    """The state in this process, kept as JSON text, so a state that could not cross processes is refused here too,
    and what ``read`` returns is the committer's own copy of nothing."""

    def __init__(self) -> None:
        self._revision = 0
        self._data = b"{}"

    async def read(self) -> Snapshot:
        return Snapshot(self._revision, orjson.loads(self._data))

    async def revision(self) -> int:
        return self._revision

    async def commit(self, expected: int, state: dict[str, Any]) -> int | None:
        data = encode(state)
        if expected != self._revision:
            return None
        self._revision += 1
        self._data = data
        return self._revision


def encode(state: dict[str, Any]) -> bytes:
    """``state`` as JSON text; ``TypeError`` naming what is not JSON."""
    if not isinstance(state, dict):
        raise TypeError(f"a definitions state must be a JSON object, got {type(state).__name__}")
    try:
        return orjson.dumps(state)
    except TypeError as exc:
        raise TypeError(f"a definitions state must be JSON: {exc}") from None
