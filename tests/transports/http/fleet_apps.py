"""Two (or three) HTTP apps as the processes of one fleet: each its own deck (its own node id) over backends that
are shared — one in-memory record marked shared (what the processes of a test can share without a server), or a
record of its own per process over one real Redis, as separate processes would have.

``Fleet(kind, make_deck)``: ``await fleet.start(n)`` makes n apps, opens their backends and, over Redis, waits until
each one's bus hears the others; ``await fleet.aclose()`` ends them (and their Redis connections).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tooldeck import Deck
from tooldeck.security.keys import MemoryKeyRing
from tooldeck.server.backends import Backends, backends_from_spec
from tooldeck.server.bus import MemoryBus
from tooldeck.tasks.memory import MemoryTaskStore
from tooldeck.transports.http import HttpApp

KINDS = ("memory", "redis")
KEYS: dict[str, bytes | None] = {"request-state": b"s" * 32, "cursor": b"c" * 32}  # the same in every process


def shared_memory() -> Backends:
    """One record for every app of a test: shared (the sessions' ends and activity go through its store and bus),
    over a bus that carries payloads as JSON, as one between processes does."""
    return Backends(bus=MemoryBus(json=True), tasks=MemoryTaskStore(), keys=MemoryKeyRing(KEYS), shared=True)


def fleet_for(request: Any, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None],
              make_deck: Callable[[Backends], Deck], **app_options: Any) -> Fleet:  # fmt: skip
    """What a module's ``fleet`` fixture (parametrized over ``KINDS``) returns: a ``Fleet`` of the kind the test
    runs over, closed as the test's loop ends."""
    kind = request.param if request.param == "memory" else request.getfixturevalue("redis_url")
    found = Fleet(kind, make_deck, **app_options)
    at_loop_end(found.aclose)
    return found


class Fleet:
    """The apps of one test. ``kind``: "memory" (one shared record) or a Redis URL (a record per app)."""

    def __init__(self, kind: str, make_deck: Callable[[Backends], Deck], **app_options: Any) -> None:
        self.kind = kind
        self.make_deck = make_deck
        self.app_options = app_options
        self.apps: list[HttpApp] = []
        self._memory = shared_memory() if kind == "memory" else None

    def backends(self) -> Backends:
        return self._memory if self._memory is not None else backends_from_spec(self.kind, keys=KEYS)

    async def start(self, count: int = 2) -> list[HttpApp]:
        for _ in range(count):
            app = HttpApp(self.make_deck(self.backends()), **self.app_options)
            await app.deck.open_backends()
            app.deck.bind_loop()
            ready = getattr(app.deck.backends.bus, "ready", None)
            if ready is not None:
                await ready()
            self.apps.append(app)
        return self.apps

    async def aclose(self) -> None:
        for app in self.apps:
            await app.aclose()
            await app.deck.aclose()
        for app in self.apps:
            if app.deck.backends is not self._memory:
                await app.deck.backends.aclose()


def hearing(app: HttpApp, topic: str) -> asyncio.Event:
    """An event set when ``app``'s bus delivers a publication on ``topic`` (made after this call) to that process."""
    heard = asyncio.Event()
    app.deck.backends.bus.subscribe(topic, lambda _: heard.set())
    return heard
