"""The ``Bus`` seam: fan-out of server events to the sessions that care, wherever they live.

Topics in use (``server.core`` publishes, sessions and 2026-07-28 listen streams subscribe):

- ``list_changed``: payload ``"tools" | "resources" | "prompts"``; every session with that capability announces
  ``notifications/<kind>/list_changed``, and every listen stream whose filter asked for it (``subscriptions.py``).
- ``resource_updated``: payload the URI; subscribed sessions send ``notifications/resources/updated``, and so do
  listen streams that subscribed to the URI (or one above it) for a principal who may read it.
- ``task/<id>``: a 2026-07-28 task's new state, payload ``TaskRecord.to_dict()`` (without the arguments); every listen
  stream whose filter named the task sends it as ``notifications/tasks`` (``subscriptions.py``).
- ``session/<key>``: a message addressed to one session, delivered to its ``deliver``: a notification to send (a
  task's status), ``{"cancel": request_id}`` (the client cancelled a request that runs in another process serving the
  same session) or ``{"answer": {...}}`` (the client answered a request that another process made). An HTTP
  session's key is its session id, so every process serving it subscribes to the same topic.
- ``sessions/ended`` (shared backends): payload an HTTP session id; the session was ended (DELETE, or idle everywhere)
  by some process, and every other process drops its copy (``transports/http/sessions.py``).
- ``node/<node id>`` (shared backends): calls from one process of a fleet to another (``nodes.py``): a task to stop,
  a task's questions or answers (``task_relay.py``), a stream to relay (``transports/http/relay.py``).
- ``relay/<node id>/<n>``: the pieces of one stream relayed to the process a client resumed it through.

``MemoryBus`` delivers synchronously, in publish order, on the publisher's thread; the server makes sure it
publishes on the event loop's thread. A networked bus (``bus_redis.RedisBus``) implements the same two methods and
passes the same contract suite (tests/server/test_bus.py); it delivers to the publishing process's subscribers at
once and to the other processes' a moment later. Payloads are JSON, so that they can cross processes.

How many subscribers a topic has is not part of the seam: across processes that is not known without a round trip,
and a count of one process's alone would be the wrong answer to "does anyone listen?". Each bus says how many of its
own there are (``MemoryBus.subscribers``, ``RedisBus.subscribers``), and only a ``MemoryBus``, which is all there is,
lets the server skip announcing a change no one listens to (``Server.changed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Subscriber = Callable[[Any], None]


class Subscription(Protocol):
    def cancel(self) -> None: ...


class Bus(Protocol):
    def publish(self, topic: str, payload: Any) -> None:
        """Deliver ``payload`` to every current subscriber of ``topic`` (none is fine)."""
        ...

    def subscribe(self, topic: str, subscriber: Subscriber) -> Subscription:
        """Call ``subscriber(payload)`` for each later publication on ``topic`` until the subscription is cancelled."""
        ...


class _Entry:
    __slots__ = ("_bus", "_topic", "subscriber")

    def __init__(self, bus: MemoryBus, topic: str, subscriber: Subscriber) -> None:
        self._bus = bus
        self._topic = topic
        self.subscriber = subscriber

    def cancel(self) -> None:
        entries = self._bus._topics.get(self._topic)
        if entries is not None:
            entries.pop(self, None)
            if not entries:
                del self._bus._topics[self._topic]


class MemoryBus:
    """Subscribers in a dict per topic; a subscriber that raises is logged and does not stop the others. ``json``:
    hand each subscriber the payload as JSON carries it, and refuse one that is not JSON (``TypeError``), as a bus
    between processes does — for tests that stand several apps on one bus for the processes of a fleet."""

    def __init__(self, *, json: bool = False) -> None:
        self._topics: dict[str, dict[_Entry, None]] = {}  # an ordered set: delivery follows subscription order
        self.json = json

    def publish(self, topic: str, payload: Any) -> None:
        if self.json:
            payload = _as_json(topic, payload)
        entries = self._topics.get(topic)
        if not entries:
            return
        for entry in list(entries):
            try:
                entry.subscriber(payload)
            except Exception:
                import logging

                logging.getLogger("tooldeck.bus").exception("a subscriber of %r failed", topic)

    def subscribe(self, topic: str, subscriber: Subscriber) -> _Entry:
        entry = _Entry(self, topic, subscriber)
        self._topics.setdefault(topic, {})[entry] = None
        return entry

    def subscribers(self, topic: str) -> int:
        """How many subscriptions ``topic`` has now (in this process: all there are)."""
        return len(self._topics.get(topic, ()))


def _as_json(topic: str, payload: Any) -> Any:
    import orjson

    try:
        return orjson.loads(orjson.dumps(payload))
    except TypeError as exc:
        raise TypeError(f"a bus payload must be JSON: {topic!r} was given {type(payload).__name__} ({exc})") from None
