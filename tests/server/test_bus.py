"""The Bus contract every bus (memory, Redis) must pass, and the server's use of it.

The contract is what one process sees of its own bus; tests/engine/test_hub.py and test_processes.py add what
crosses processes. The tests run on an event loop, as the server's publications do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers import Harness
from tooldeck import Deck
from tooldeck.server.bus import Bus, MemoryBus


def redis_bus(request: pytest.FixtureRequest) -> Bus:
    from tooldeck.server.bus_redis import RedisBus

    return RedisBus(request.getfixturevalue("engine"))


BUSES: dict[str, Callable[[pytest.FixtureRequest], Bus]] = {
    "memory": lambda request: MemoryBus(),
    "memory-json": lambda request: MemoryBus(json=True),  # as a bus between processes carries payloads
    "redis": redis_bus,
}


@pytest.fixture(params=sorted(BUSES))
def bus(request: pytest.FixtureRequest) -> Bus:
    return BUSES[request.param](request)


async def test_subscribers_get_what_is_published_in_order(bus: Bus) -> None:
    got: list[tuple[str, Any]] = []
    bus.subscribe("t", lambda payload: got.append(("a", payload)))
    bus.subscribe("t", lambda payload: got.append(("b", payload)))
    bus.publish("t", 1)
    bus.publish("t", 2)
    assert got == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]


async def test_payloads_arrive_as_json_would_carry_them(bus: Bus) -> None:
    got: list[Any] = []
    bus.subscribe("t", got.append)
    payload = {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t-1", "ttl": None}}
    bus.publish("t", payload)
    assert got == [payload]


async def test_a_bus_between_processes_refuses_a_payload_that_is_not_json(bus: Bus) -> None:
    if type(bus) is MemoryBus and not bus.json:
        pytest.skip("a plain MemoryBus hands objects over within the process")
    got: list[Any] = []
    bus.subscribe("t", got.append)
    with pytest.raises(TypeError, match="a bus payload must be JSON: 't' was given set"):
        bus.publish("t", {1, 2})
    bus.publish("t", {"n": (1, 2)})  # a tuple arrives as JSON carries it: a list
    assert got == [{"n": [1, 2]}]


async def test_topics_are_apart(bus: Bus) -> None:
    got: list[Any] = []
    bus.subscribe("one", got.append)
    bus.subscribe("session/abc", got.append)
    bus.publish("two", "x")
    bus.publish("session/abcd", "y")
    bus.publish("session/ab", "z")
    assert got == []
    bus.publish("one", "w")
    assert got == ["w"]


async def test_a_cancelled_subscription_hears_nothing_more(bus: Bus) -> None:
    got: list[Any] = []
    other: list[Any] = []
    subscription = bus.subscribe("t", got.append)
    bus.subscribe("t", other.append)
    bus.publish("t", 1)
    subscription.cancel()
    subscription.cancel()  # twice is harmless
    bus.publish("t", 2)
    assert got == [1]
    assert other == [1, 2]


async def test_publishing_to_nobody_is_fine_and_keeps_nothing_for_later(bus: Bus) -> None:
    bus.publish("empty", {"x": 1})
    got: list[Any] = []
    bus.subscribe("empty", got.append)
    assert got == []  # a bus is not a queue: what nobody heard is gone


async def test_a_failing_subscriber_does_not_stop_the_others(bus: Bus, caplog: pytest.LogCaptureFixture) -> None:
    got: list[Any] = []

    def broken(payload: Any) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe("t", broken)
    bus.subscribe("t", got.append)
    bus.publish("t", "p")
    assert got == ["p"]
    assert "subscriber bug" in caplog.text


async def test_a_subscriber_may_cancel_itself_while_being_called(bus: Bus) -> None:
    got: list[Any] = []
    holder: list[Any] = []

    def once(payload: Any) -> None:
        got.append(payload)
        holder[0].cancel()

    holder.append(bus.subscribe("t", once))
    bus.publish("t", 1)
    bus.publish("t", 2)
    assert got == [1]


def test_list_changed_reaches_sessions_through_the_bus_and_closing_unsubscribes() -> None:
    deck = Deck("bus")
    deck.add_tool(lambda: "x", name="x")
    harness = Harness(deck)
    harness.initialize()
    assert deck.bus.subscribers("list_changed") == 1
    harness.out.clear()
    deck.add_tool(lambda: "y", name="y")
    assert harness.out == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
    harness.session.close()
    assert deck.bus.subscribers("list_changed") == 0
    assert deck.bus.subscribers(f"session/{harness.session.key}") == 0
