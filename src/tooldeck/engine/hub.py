"""Publish/subscribe across processes: ``Hub``, one subscriber connection per process, fanning each message out to
the callbacks of this process that subscribed to its topic.

A publication is JSON (orjson). It reaches this process's own subscribers at once, in the publisher's call, and the
other processes through Redis: channel ``<prefix>bus:<topic>``, message ``[origin, payload, sent]`` (``sent``: the
publisher's wall clock, for the delivery metric, ``Engine.observe_bus``; a message without it is read too). The hub
listens to ``<prefix>bus:*`` (one PSUBSCRIBE), so a new local subscription costs no round trip and is never too
late to hear a publication that follows it; it skips messages of its own origin, which it delivered already. Every
process hears every topic and decodes only those it has subscribers for.

Publications leave in the order they were made, over one connection at a time, so each process hears another's
publications in the order that process made them. Redis keeps nothing for later: while the connection is down, what
is published elsewhere is lost to this process, and what this process publishes reaches only itself (each loss is
logged). The listener reconnects by itself, waiting 50 ms, then twice as long each time, up to a second; once it
hears again, it has the engine run what must be written again (``Engine.came_back``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from .connection import UNREACHABLE, Engine, cause_of

log = logging.getLogger("tooldeck.bus")
Subscriber = Callable[[Any], None]
_FIRST_DELAY, _LONGEST_DELAY = 0.05, 1.0


class Subscription:
    __slots__ = ("_hub", "_topic", "subscriber")

    def __init__(self, hub: Hub, topic: str, subscriber: Subscriber) -> None:
        self._hub = hub
        self._topic = topic
        self.subscriber = subscriber

    def cancel(self) -> None:
        entries = self._hub._topics.get(self._topic)
        if entries is not None:
            entries.pop(self, None)
            if not entries:
                del self._hub._topics[self._topic]


class Hub:
    """This process's side of the bus in Redis (see the module docstring); ``Hub.of(engine)`` is the engine's."""

    @classmethod
    def of(cls, engine: Engine) -> Hub:
        """The hub of ``engine``: one per engine, however many buses use it."""
        return engine.attached("hub", lambda: cls(engine))

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.origin = secrets.token_hex(8)  # this hub's mark on what it publishes
        self._channel_prefix = engine.key("bus", "")
        self._topics: dict[str, dict[Subscription, None]] = {}  # an ordered set: delivery in subscription order
        self._outbox: deque[tuple[str, bytes]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sender: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Condition()  # notified as the subscription stands or falls
        self.listening = False  # whether the hub hears the other processes now
        self.subscriptions = 0  # how many times the subscription was made: 1, then one more for each reconnection
        self._closed = False

    # --- this process's subscribers ---------------------------------------------------------------------------------

    def subscribe(self, topic: str, subscriber: Subscriber) -> Subscription:
        entry = Subscription(self, topic, subscriber)
        self._topics.setdefault(topic, {})[entry] = None
        self._start()
        return entry

    def subscribers(self, topic: str) -> int:
        """How many subscriptions ``topic`` has in this process."""
        return len(self._topics.get(topic, ()))

    def publish(self, topic: str, payload: Any) -> None:
        """Deliver ``payload`` to this process's subscribers of ``topic`` now, and send it to the other processes.
        Raises ``TypeError`` for a payload that is not JSON. Called from another thread than the event loop's, it
        hands the publication to the loop's thread, where the subscribers are called."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and asyncio._get_running_loop() is not loop:
            loop.call_soon_threadsafe(self.publish, topic, payload)
            return
        try:
            data = orjson.dumps([self.origin, payload, time.time()])
        except TypeError as exc:
            raise TypeError(
                f"a bus payload must be JSON: {topic!r} was given {type(payload).__name__} ({exc})"
            ) from None
        if self._topics.get(topic):
            self._deliver(topic, orjson.loads(data)[1])
        if self._closed:
            return
        if not self._start():
            log.debug("publication on %r before the bus has an event loop stays in this process", topic)
            return
        self._outbox.append((self._channel_prefix + topic, data))
        if self._sender is None:
            assert self._loop is not None
            self._sender = self._loop.create_task(self._send())

    def _deliver(self, topic: str, payload: Any) -> None:
        for entry in list(self._topics.get(topic, ())):
            try:
                entry.subscriber(payload)
            except Exception:
                log.exception("a subscriber of %r failed", topic)

    # --- the connection to Redis ------------------------------------------------------------------------------------

    async def ready(self, timeout: float = 10.0, *, after: int = 0) -> None:
        """Wait until the hub hears the other processes, through a subscription made after the first ``after`` (a
        reconnection: ``after=hub.subscriptions``); ``BackendUnavailableError`` if that takes over ``timeout`` s."""
        self._start()
        try:
            async with asyncio.timeout(timeout), self._listening:
                await self._listening.wait_for(lambda: self.listening and self.subscriptions > after)
        except TimeoutError:
            raise self.engine.unavailable(TimeoutError(f"no subscription after {timeout:g} s")) from None

    async def _now_listening(self, listening: bool) -> None:
        async with self._listening:
            self.listening = listening
            self.subscriptions += listening
            self._listening.notify_all()

    def _start(self) -> bool:
        """Bind to the running loop (the first time) and start listening; False when there is no loop yet."""
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                return False
        if self._listener is None and not self._closed:
            self._listener = self._loop.create_task(self._listen())
        return True

    async def _listen(self) -> None:
        delay = _FIRST_DELAY
        lost = False
        while not self._closed:
            pubsub = self.engine.client.pubsub()
            try:
                await pubsub.psubscribe(self._channel_prefix + "*")
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is None:
                        continue
                    if message["type"] == "pmessage":
                        self._receive(message["channel"], message["data"])
                    elif message["type"] == "psubscribe":
                        if self.subscriptions:  # after the client reconnected by itself, or this loop did
                            log.info("the bus hears the other processes again (%s)", self.engine.name)
                            await self.engine.came_back()  # before anyone waiting on ready() is told
                        await self._now_listening(True)
                        delay = _FIRST_DELAY
                        lost = False
            except UNREACHABLE as exc:
                if not lost:
                    lost = True
                    log.warning("the bus lost %s (%s); reconnecting", self.engine.name, cause_of(exc))
            finally:
                self.listening = False
                try:
                    await pubsub.aclose()
                except Exception:  # a connection already lost has nothing to close; a cancellation goes on (aclose)
                    pass
            await asyncio.sleep(delay)  # a server that is away: try again, less and less often
            delay = min(delay * 2, _LONGEST_DELAY)

    def _receive(self, channel: bytes, data: bytes) -> None:
        topic = channel[len(self._channel_prefix) :].decode()
        if not self._topics.get(topic):
            return  # no subscriber here: not even decoded
        try:
            origin, payload, *sent = orjson.loads(data)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            log.warning("ignored a message on %r that is not [origin, payload, sent] JSON", topic)
            return
        if origin != self.origin:
            observe = self.engine.observe_bus
            if observe is not None and sent and type(sent[0]) is float:
                observe(max(0.0, time.time() - sent[0]))
            self._deliver(topic, payload)

    async def _send(self) -> None:
        try:
            while self._outbox:
                batch = list(self._outbox)
                self._outbox.clear()
                try:
                    async with self.engine.client.pipeline(transaction=False) as pipe:
                        for channel, data in batch:
                            pipe.publish(channel, data)
                        await pipe.execute()
                except UNREACHABLE as exc:
                    log.warning("%d bus publication(s) reached only this process: %s is unreachable (%s)",
                                len(batch), self.engine.name, cause_of(exc))  # fmt: skip
        finally:
            self._sender = None

    async def sent(self) -> None:
        """Wait until what was published so far has been sent (or found unsendable, and logged)."""
        if self._sender is not None:
            await asyncio.shield(self._sender)

    async def aclose(self) -> None:
        """Send what is waiting to be sent, then stop listening."""
        self._closed = True
        if self._sender is not None:
            await _quietly(asyncio.wait_for(asyncio.shield(self._sender), 5.0))
        listener = self._listener
        if listener is not None:
            # The client's reconnection inside a read can swallow a cancellation and read on: cancel again until the
            # listener has ended (within a few seconds).
            for _ in range(50):
                listener.cancel()
                await asyncio.wait({listener}, timeout=0.1)
                if listener.done():
                    break
            if listener.done() and not listener.cancelled():
                listener.exception()  # retrieved: a listener that ended by an error has logged it
            self._listener = None


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except (Exception, asyncio.CancelledError):
        pass
