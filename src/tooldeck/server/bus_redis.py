"""``RedisBus``: the bus across the processes of a fleet, through Redis or Valkey publish/subscribe.

A publication reaches this process's subscribers at once, in the ``publish`` call (as ``MemoryBus`` does), and the
other processes' subscribers through Redis, in the order it was published (``engine/hub.py`` holds the mechanics:
one subscriber connection per process, channel ``<prefix>bus:<topic>``). Payloads are JSON: every subscriber,
here or elsewhere, gets the payload as JSON decodes it, and a payload that is not JSON is a ``TypeError`` at
``publish``.

What the network changes: a publication made while Redis is unreachable reaches only this process, and one made
elsewhere meanwhile is lost here (both logged); a process hears the others once ``ready()`` returns (it starts
listening at its first subscription or publication on the event loop), and a publication made before the process
has an event loop (while a deck is being built) stays in the process. ``subscribers`` counts this process's
subscriptions only: how many other processes listen is not known without a round trip, so the bus does not say.
"""

from __future__ import annotations

from typing import Any

from ..engine.connection import Engine
from ..engine.hub import Hub, Subscriber, Subscription


class RedisBus:
    """The ``Bus`` seam over an ``Engine`` (every ``RedisBus`` of one engine shares its hub)."""

    def __init__(self, engine: Engine) -> None:
        self._hub = Hub.of(engine)

    def publish(self, topic: str, payload: Any) -> None:
        self._hub.publish(topic, payload)

    def subscribe(self, topic: str, subscriber: Subscriber) -> Subscription:
        return self._hub.subscribe(topic, subscriber)

    def subscribers(self, topic: str) -> int:
        """How many subscriptions ``topic`` has in this process (others may have more)."""
        return self._hub.subscribers(topic)

    async def open(self) -> None:
        """Start listening now, in the serving loop (``Backends.open``): a process hears the others from the start,
        and notices when Redis is back even if nothing here subscribes (``Engine.came_back``)."""
        self._hub._start()

    async def ready(self, timeout: float = 10.0) -> None:
        """Wait until this process hears the others' publications (``BackendUnavailableError`` after ``timeout``)."""
        await self._hub.ready(timeout)
