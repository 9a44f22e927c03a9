"""Single-use marks: ``SpentMarks``, spending a name once fleet-wide (a confirmation, a request state).

Key ``<prefix><namespace>:<name>`` exists once the name is spent, until ``ttl`` seconds later (after which what it
stood for has expired anyway). Spending is ``SET NX PX``: of any number of processes spending one name at once,
exactly one is told it spent it. One round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import Engine


class SpentMarks:
    """Names spent at most once, under ``namespace``."""

    def __init__(self, engine: Engine, namespace: str = "spent") -> None:
        self.engine = engine
        self.namespace = namespace

    async def spend(self, name: str, ttl: float) -> bool:
        """Mark ``name`` spent for ``ttl`` seconds: True if this call spent it, False if it was spent already."""
        if not ttl > 0:
            raise ValueError(f"ttl must be more than 0 seconds, got {ttl!r}")
        done = await self.engine.command("SET", self.engine.key(self.namespace, name), b"1", "NX", "PX",
                                         max(1, round(ttl * 1000)))  # fmt: skip
        return done is not None

    async def is_spent(self, name: str) -> bool:
        with self.engine.reaching():
            return bool(await self.engine.client.exists(self.engine.key(self.namespace, name)))
