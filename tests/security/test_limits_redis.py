"""``RedisRateLimiter`` beyond the contract (test_limits.py): one round trip a call, Redis's clock, the keys it keeps
and for how long, and limits exact across processes — real ones started for the test — sharing one server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import fleet_peer
from tooldeck.engine.connection import Engine
from tooldeck.security.limits import Limit, RateLimitedError, RateLimits
from tooldeck.security.limits_redis import RedisRateLimiter
from tooldeck.security.principal import Principal


class Request:
    def __init__(self, principal: Any) -> None:
        self.principal = principal


class Call:
    kind, name = "tool", "t"


async def commands_run(engine: Engine) -> dict[str, int]:
    """The commands the server ran since its counts were reset, by name, those a script ran included (this question
    and the reset left out)."""
    stats = await engine.client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}
    calls.pop("info", None)
    calls.pop("config|resetstat", None)
    return calls


async def test_a_call_counted_against_several_limits_is_one_round_trip(engine: Engine) -> None:
    limits = RateLimits(RedisRateLimiter(engine), per_principal="10/s", per_tool="10/s", global_="100/s")
    await engine.check()  # the scripts are loaded, as a process does before it serves
    await engine.client.config_resetstat()
    step = limits.step(Request(Principal("ada")), Call())
    assert step is not None
    await step
    # One command from the client, EVALSHA; the others ran inside it: the clock, and a read and a write per bucket.
    assert await commands_run(engine) == {"evalsha": 1, "time": 1, "hmget": 3, "hset": 3, "pexpire": 3}


async def test_buckets_are_keyed_under_the_prefix_and_expire_once_full_again(engine: Engine) -> None:
    limiter = RedisRateLimiter(engine)
    assert await limiter.peek_async("principal:token:ada", 1.0, 5) == 0.0
    assert await engine.client.keys("*") == []  # asking stores nothing: a missing bucket is a full one
    assert await limiter.acquire_async("principal:token:ada", 1.0, 5, cost=2) == 0.0
    assert await engine.client.keys("*") == [b"tooldeck:bucket:principal:token:ada"]
    assert 1000 < await engine.client.pttl("tooldeck:bucket:principal:token:ada") <= 2001  # full in two seconds


async def test_time_is_the_server_s_clock(engine: Engine) -> None:
    limiter = RedisRateLimiter(engine)
    assert [await limiter.acquire_async("k", 1 / 3600, 2) for _ in range(2)] == [0.0, 0.0]
    wait = await limiter.acquire_async("k", 1 / 3600, 2)
    assert 3590 < wait <= 3600  # an hour for the next token, less the moments since the first take


async def test_with_a_clock_of_its_own_a_bucket_is_kept_a_day_at_least(engine: Engine) -> None:
    limiter = RedisRateLimiter(engine, clock=lambda: 1000.0)
    await limiter.acquire_async("k", 100.0, 1)  # full again in 10 ms by that clock, which Redis cannot follow
    assert await engine.client.pttl("tooldeck:bucket:k") > 86_000_000


async def test_concurrent_takers_on_several_connections_never_over_admit(engines: Callable[..., Engine]) -> None:
    limiters = [RedisRateLimiter(engines()) for _ in range(4)]
    waits = await asyncio.gather(*(limiter.acquire_async("shared", 1 / 3600, 40) for limiter in limiters * 50))
    assert waits.count(0.0) == 40  # of 200 takers at once, exactly the burst (an hour's refill is far off)


async def test_a_limit_is_exact_across_processes(engine: Engine) -> None:
    # Three processes and this one take at the same moment, 40 calls each, against "50/hour" (burst 50): over the
    # seconds this takes, the refill is under one token, so exactly the burst is admitted, wherever the calls ran.
    peers = [await fleet_peer.start(engine.name, "take", "ada", "40", "50/hour") for _ in range(3)]
    limits = RateLimits(RedisRateLimiter(engine), per_principal="50/hour", global_=Limit("1000000/hour"))
    try:
        await engine.client.rpush(fleet_peer.GO, *["go"] * 3)

        async def call() -> bool:
            try:
                await limits.step(Request(Principal("ada")), Call())  # type: ignore[misc]
            except RateLimitedError:
                return False
            return True

        here = sum(await asyncio.gather(*(call() for _ in range(40))))
        counts = []
        for peer in peers:
            assert peer.stdout is not None
            counts.append(int(await asyncio.wait_for(peer.stdout.readline(), 30)))
            assert await peer.wait() == 0
        assert here + sum(counts) == 50
        assert await RedisRateLimiter(engine).peek_async("principal:token:ada", 50 / 3600, 50) > 60  # empty now
    finally:
        for peer in peers:
            if peer.returncode is None:
                peer.kill()
                await peer.wait()


async def test_the_takes_kept_packed_are_bounded_and_answer_as_when_first_packed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldeck.engine import bucket

    monkeypatch.setattr(bucket, "PREPARED_KEPT", 2)
    limiter = RedisRateLimiter(engine)
    kept = limiter._buckets._prepared
    for _ in range(3):
        for name in ("a", "b", "c"):  # three takes, two kept: each new one past the bound starts the store afresh
            assert await limiter.acquire_async(name, 1 / 3600, 3) == 0.0
            assert len(kept) <= 2
    assert await limiter.acquire_async("a", 1 / 3600, 3) > 3500  # the three tokens of "a" are spent, kept or not


async def test_a_take_sent_on_the_line_is_given_again_to_a_server_that_forgot_the_script(engine: Engine) -> None:
    limiter = RedisRateLimiter(engine)
    buckets = [("a", 1 / 3600, 3, 1.0), ("b", 1 / 3600, 3, 1.0)]
    assert await limiter.acquire_all_async(buckets) == [0.0, 0.0]  # packed now: the next take is sent at once
    await engine.client.script_flush()  # as a restart does
    assert await limiter.acquire_all_async(buckets) == [0.0, 0.0]
    assert await limiter.acquire_all_async(buckets) == [0.0, 0.0]
    assert min(await limiter.acquire_all_async(buckets)) > 3500  # three taken from each, none twice: the 4th waits


async def test_a_take_whose_connection_is_lost_says_the_backend_is_unreachable(engine: Engine) -> None:
    from tooldeck.engine import BackendUnavailableError

    limiter = RedisRateLimiter(engine)
    buckets = [("a", 1 / 3600, 3, 1.0)]
    await limiter.acquire_all_async(buckets)
    pending = limiter.acquire_all_async(buckets)  # sent on the line, not answered yet
    assert engine.wire is not None and engine.wire._line is not None
    engine.wire._line.drop(ConnectionError("lost"))
    with pytest.raises(BackendUnavailableError, match="is unreachable: "):
        await pending
    assert await limiter.acquire_all_async(buckets) == [0.0]  # on a new line (the lost take may have run: 1 or 2 left)
