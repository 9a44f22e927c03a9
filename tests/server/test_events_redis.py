"""What ``RedisEventStore`` keeps in Redis, under which keys, and for how long (its contract is test_events.py's),
and that two processes serving one session number its events as one."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from tooldeck.engine.connection import Engine
from tooldeck.server.events import PRIMING
from tooldeck.server.events_redis import RedisEventStore


async def test_a_session_s_events_are_a_counter_and_a_capped_list_that_expire(engine: Engine) -> None:
    store = RedisEventStore(engine, max_events=2, ttl=120)
    for message in [PRIMING, {"n": 1}, {"n": 2}]:
        await store.append("s1", "0", message)
    client = engine.client
    assert sorted(await client.keys("*")) == [b"tooldeck:events:s1", b"tooldeck:events:s1:n"]
    assert await client.get("tooldeck:events:s1:n") == b"3"
    assert [orjson.loads(e) for e in await client.lrange("tooldeck:events:s1", 0, -1)] == [
        ["0", {"n": 1}],
        ["0", {"n": 2}],
    ]
    for key in ("tooldeck:events:s1", "tooldeck:events:s1:n"):
        assert 119_000 < await client.pttl(key) <= 120_000
    await store.forget("s1")
    assert await client.keys("*") == []


async def test_two_processes_serving_one_session_number_its_events_as_one(engines: Callable[..., Engine]) -> None:
    here, there = RedisEventStore(engines()), RedisEventStore(engines())
    first = await here.append("s", "1", PRIMING)
    a = await there.append("s", "2", {"on": "there"})
    b = await here.append("s", "1", {"on": "here"})
    assert [first, a, b] == ["1.1", "2.2", "1.3"]
    assert await there.replay("s", first) == ("1", [(b, {"on": "here"})])  # resumed on the other process
