"""What ``RedisSessionStore`` keeps in Redis, under which keys, and for how long (its contract is test_state.py's),
and two apps serving one session through it."""

from __future__ import annotations

from collections.abc import Callable

from asgi_client import AsgiClient
from helpers import adder_deck
from tooldeck.engine.connection import Engine
from tooldeck.server.backends import Backends
from tooldeck.server.state_redis import RedisSessionStore
from tooldeck.transports.http import HttpApp


async def test_a_state_is_one_json_key_and_the_ids_are_indexed(engine: Engine) -> None:
    store = RedisSessionStore(engine)
    await store.put("s1", {"revision": "2025-11-25", "logLevel": "info"})
    client = engine.client
    assert sorted(await client.keys("*")) == [b"tooldeck:session", b"tooldeck:session:s1"]
    assert await client.get("tooldeck:session:s1") == b'{"revision":"2025-11-25","logLevel":"info"}'
    assert await client.zrange("tooldeck:session", 0, -1, withscores=True) == [(b"s1", float("inf"))]
    assert await client.pttl("tooldeck:session:s1") == -1  # no ttl: kept until deleted
    await store.delete("s1")
    assert await client.keys("*") == [b"tooldeck:session-ended:s1"]  # only that it ended, for a while


async def test_with_a_ttl_a_state_expires_unless_written_or_read(engine: Engine) -> None:
    store = RedisSessionStore(engine, ttl=600)
    await store.put("s1", {"n": 1})
    client = engine.client
    assert 599_000 < await client.pttl("tooldeck:session:s1") <= 600_000
    await client.pexpire("tooldeck:session:s1", 5000)
    assert await store.get("s1") == {"n": 1}
    assert 599_000 < await client.pttl("tooldeck:session:s1") <= 600_000  # the read renewed it
    (_, expires), *_ = await client.zrange("tooldeck:session", 0, -1, withscores=True)
    seconds, micros = await client.time()
    assert 599_000 < expires - (seconds * 1000 + micros // 1000) <= 600_000


async def test_count_leaves_out_states_that_expired(engine: Engine) -> None:
    store = RedisSessionStore(engine, ttl=600)
    await store.put("live", {"n": 1})
    await store.put("gone", {"n": 2})
    await engine.client.delete("tooldeck:session:gone")  # as its expiry would, which counting cannot see ...
    await engine.client.zadd("tooldeck:session", {"gone": 1000})  # ... but for its time in the index, now past
    assert await store.count() == 1
    assert await engine.client.zrange("tooldeck:session", 0, -1) == [b"live"]  # and it is dropped from the index


async def test_another_app_serves_the_session_from_redis_and_its_end_is_seen_everywhere(
    engines: Callable[..., Engine],
) -> None:
    first_engine, second_engine = engines(), engines()
    first = HttpApp(adder_deck("one", backends=Backends(sessions=RedisSessionStore(first_engine))))
    second = HttpApp(adder_deck("one", backends=Backends(sessions=RedisSessionStore(second_engine))))
    session = await AsgiClient(first).initialize("2025-06-18")
    other = AsgiClient(second)
    set_level = await other.call(session, 1, "logging/setLevel", {"level": "error"}, version="2025-06-18")
    assert (await set_level.json())["result"] == {}
    call = await other.call(session, 2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}},
                            version="2025-06-18")  # fmt: skip
    assert (await call.json())["result"]["structuredContent"] == {"result": 4}
    stored = await RedisSessionStore(first_engine).get(session)
    assert stored is not None and stored["logLevel"] == "error" and stored["revision"] == "2025-06-18"
    await second.close_session(second.sessions[session])
    assert await RedisSessionStore(first_engine).get(session) is None  # ended in the store every process reads
    await first.aclose()
    await second.aclose()


async def test_with_a_ttl_a_touch_renews_the_state(engine: Engine) -> None:
    store = RedisSessionStore(engine, ttl=0.5)
    await store.put("s", {"revision": "2025-11-25"})
    await engine.client.pexpire("tooldeck:session:s", 50)  # as if it were about to expire ...
    assert await store.touch("s", 100.0) is True
    assert await engine.client.pttl("tooldeck:session:s") > 400  # ... and a request of the session renewed it
    assert await store.count() == 1


async def test_an_end_is_remembered_for_ended_ttl(engine: Engine) -> None:
    store = RedisSessionStore(engine, ended_ttl=60)
    await store.put("s", {"revision": "2025-11-25"})
    await store.delete("s")
    assert await store.touch("s", 1.0) is False
    assert 50_000 < await engine.client.pttl("tooldeck:session-ended:s") <= 60_000
    await engine.client.delete("tooldeck:session-ended:s")  # as its expiry would
    assert await store.touch("s", 2.0) is None


async def test_a_session_s_mark_sent_with_the_next_command_is_packed_once_and_forgotten_at_its_end(
    engine: Engine,
) -> None:
    store = RedisSessionStore(engine)
    await store.put("s", {"revision": "2025-11-25"})
    for at in (5.0, 7.25):
        answer = store.touch_soon("s", at)
        assert answer is not None and await answer == 1
        assert await engine.client.zscore("tooldeck:session-seen", "s") == at
    assert list(store._heads) == ["s"]
    await store.delete("s")
    assert store._heads == {}
    answer = store.touch_soon("s", 9.0)
    assert answer is not None and await answer == 0  # ended
