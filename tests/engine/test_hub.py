"""The hub across processes, each process an ``Engine`` of its own on one real server: what one publishes reaches
the others in order and its own subscribers once, nothing but JSON travels, and a restarted server is heard again."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from redis_server import RedisServer
from tooldeck.engine.connection import Engine
from tooldeck.engine.hub import Hub


class Inbox:
    """What a subscriber heard, and a wait for the next ``count`` of it (on the event, with a time limit)."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self._changed = asyncio.Event()

    def __call__(self, payload: Any) -> None:
        self.got.append(payload)
        self._changed.set()

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[Any]:
        async with asyncio.timeout(timeout):
            while len(self.got) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.got


async def two_hubs(engines: Callable[..., Engine]) -> tuple[Hub, Hub]:
    here, there = Hub.of(engines()), Hub.of(engines())
    await here.ready()
    await there.ready()
    return here, there


async def test_a_publication_reaches_every_process_in_order_and_each_subscriber_once(
    engines: Callable[..., Engine],
) -> None:
    here, there = await two_hubs(engines)
    mine, theirs, also_theirs = Inbox(), Inbox(), Inbox()
    here.subscribe("list_changed", mine)
    there.subscribe("list_changed", theirs)
    there.subscribe("list_changed", also_theirs)
    for n in range(100):
        here.publish("list_changed", {"n": n})
    assert mine.got == [{"n": n} for n in range(100)]  # at once, in the publishing call
    assert await theirs.wait_for(100) == [{"n": n} for n in range(100)]
    assert await also_theirs.wait_for(100) == theirs.got
    there.publish("list_changed", "last")  # and back: here hears it once, though it also publishes on the topic
    assert await mine.wait_for(101) == [*[{"n": n} for n in range(100)], "last"]


async def test_only_the_subscribed_topic_arrives_elsewhere(engines: Callable[..., Engine]) -> None:
    here, there = await two_hubs(engines)
    theirs, marker = Inbox(), Inbox()
    there.subscribe("session/abc", theirs)
    there.subscribe("marker", marker)
    here.publish("session/abcd", 1)
    here.publish("session/ab", 2)
    here.publish("session/abc", 3)
    here.publish("marker", "done")
    await marker.wait_for(1)  # published after the others, over the same connection: they arrived before it
    assert theirs.got == [3]


async def test_a_subscription_made_after_the_hub_listens_hears_the_next_publication(
    engines: Callable[..., Engine],
) -> None:
    here, there = await two_hubs(engines)
    late = Inbox()
    there.subscribe("late", late)  # no round trip: the hub hears every topic already
    here.publish("late", "heard")
    assert await late.wait_for(1) == ["heard"]


async def test_a_payload_that_is_not_json_is_refused_at_publish(engine: Engine) -> None:
    hub = Hub.of(engine)
    with pytest.raises(TypeError, match=r"^a bus payload must be JSON: 'task/t1' was given object \("):
        hub.publish("task/t1", object())


async def test_one_hub_per_engine(engine: Engine) -> None:
    assert Hub.of(engine) is Hub.of(engine)


async def test_publications_are_sent_before_the_engine_closes(engines: Callable[..., Engine]) -> None:
    here, there = await two_hubs(engines)
    theirs = Inbox()
    there.subscribe("t", theirs)
    for n in range(20):
        here.publish("t", n)
    await here.engine.aclose()
    assert await theirs.wait_for(20) == list(range(20))


async def test_after_a_server_restart_the_hub_hears_the_others_again(
    private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    here_engine, there_engine = Engine.from_url(private_redis.url, timeout=1.0), Engine.from_url(private_redis.url)
    try:
        here, there = Hub.of(here_engine), Hub.of(there_engine)
        theirs, mine = Inbox(), Inbox()
        there.subscribe("t", theirs)
        here.subscribe("t", mine)
        await here.ready()
        await there.ready()
        made = there.subscriptions
        with caplog.at_level(logging.INFO, logger="tooldeck.bus"):
            private_redis.stop()
            here.publish("t", "while away")  # reaches this process only; the loss is logged, nothing raises
            assert mine.got == ["while away"]
            await here.sent()
            assert f"1 bus publication(s) reached only this process: {here_engine.name} is unreachable" in caplog.text
            private_redis.start()
            await there.ready(after=made)  # resubscribed by itself
            await here.ready(after=made)
        here.publish("t", "back")
        assert await theirs.wait_for(1) == ["back"]  # "while away" never reached it: Redis keeps nothing
        assert f"the bus hears the other processes again ({there_engine.name})" in caplog.text
    finally:
        await here_engine.aclose()
        await there_engine.aclose()


async def test_a_publication_from_another_thread_is_delivered_on_the_loop_s_thread(
    engines: Callable[..., Engine],
) -> None:
    here, there = await two_hubs(engines)
    threads: list[int] = []
    mine, theirs = Inbox(), Inbox()
    here.subscribe("t", lambda payload: (threads.append(threading.get_ident()), mine(payload)))
    there.subscribe("t", theirs)
    await asyncio.to_thread(here.publish, "t", "from a worker")
    assert await mine.wait_for(1) == ["from a worker"]
    assert threads == [threading.get_ident()]
    assert await theirs.wait_for(1) == ["from a worker"]
