"""Rate limits: the token bucket's arithmetic on a fake clock, the keys each limit counts against, the refusals, and
the HTTP flood guard."""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import client
from tooldeck import Deck
from tooldeck.protocol.errors import RefusedError, ToolError
from tooldeck.security.limits import (
    Limit,
    MemoryRateLimiter,
    RateLimitedError,
    RateLimitRefusedError,
    RateLimits,
    RequestRateGuard,
    parse_rate,
    retry_after_header,
    retry_in,
    retry_meta,
)
from tooldeck.security.principal import Principal


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Request:
    """What a limit step reads of a RequestContext."""

    def __init__(self, principal: Any = None, session: str | None = None) -> None:
        self.principal = principal
        self.session = session


class Call:
    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name


class PlainLimiter:
    """A limiter with only the two methods every limiter has (no atomic ``acquire_all``), recording its calls."""

    def __init__(self, inner: MemoryRateLimiter, refuse_acquire: str | None = None) -> None:
        self.inner = inner
        self.refuse_acquire = refuse_acquire  # a key whose acquire refuses though its peek admitted: a lost race
        self.calls: list[str] = []

    def acquire(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        self.calls.append(f"acquire {key}")
        return 9.0 if key == self.refuse_acquire else self.inner.acquire(key, rate, burst, cost)

    def peek(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        self.calls.append(f"peek {key}")
        return self.inner.peek(key, rate, burst, cost)


@pytest.fixture
def eager_switching() -> Iterator[None]:
    """Threads switch every microsecond instead of every 5 ms, so a missing lock shows up as over-admission."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_threads(target: Callable[[int], None], count: int) -> None:
    """Run ``target(index)`` in ``count`` threads and wait for all; a thread that fails or hangs fails the test."""
    workers = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers)


def limiter() -> tuple[MemoryRateLimiter, Clock]:
    clock = Clock()
    return MemoryRateLimiter(clock=clock), clock


# --- the bucket: the contract every limiter passes (memory, Redis) -----------------------------------------------


class Buckets:
    """A limiter under test with its clock, asked through one awaited interface whatever the limiter is."""

    def __init__(self, limiter: Any, clock: Clock) -> None:
        self.limiter = limiter
        self.clock = clock

    async def acquire(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        if hasattr(self.limiter, "acquire_async"):
            return cast(float, await self.limiter.acquire_async(key, rate, burst, cost))
        return cast(float, self.limiter.acquire(key, rate, burst, cost))

    async def peek(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        if hasattr(self.limiter, "peek_async"):
            return cast(float, await self.limiter.peek_async(key, rate, burst, cost))
        return cast(float, self.limiter.peek(key, rate, burst, cost))

    async def acquire_all(self, buckets: list[tuple[str, float, int, float]]) -> list[float]:
        if hasattr(self.limiter, "acquire_all_async"):
            return cast(list[float], await self.limiter.acquire_all_async(buckets))
        return cast(list[float], self.limiter.acquire_all(buckets))


def redis_limiter(request: pytest.FixtureRequest, clock: Clock) -> Any:
    from tooldeck.security.limits_redis import RedisRateLimiter

    return RedisRateLimiter(request.getfixturevalue("engine"), clock=clock)


LIMITERS: dict[str, Callable[[pytest.FixtureRequest, Clock], Any]] = {
    "memory": lambda request, clock: MemoryRateLimiter(clock=clock),
    "redis": redis_limiter,
}


@pytest.fixture(params=sorted(LIMITERS))
def buckets(request: pytest.FixtureRequest) -> Buckets:
    clock = Clock()
    return Buckets(LIMITERS[request.param](request, clock), clock)


async def step(limits: RateLimits, request: Request, call: Call) -> None:
    """The limit step, awaited when the limiter made it asynchronous."""
    outcome = limits.step(request, call)
    if outcome is not None:
        await outcome


async def test_exactly_the_burst_is_admitted_and_the_next_is_told_the_exact_wait(buckets: Buckets) -> None:
    assert [await buckets.acquire("k", 2.0, 5) for _ in range(5)] == [0.0] * 5
    assert await buckets.acquire("k", 2.0, 5) == 0.5  # one token at 2 per second
    assert await buckets.acquire("k", 2.0, 5) == 0.5  # a refusal takes nothing, so nothing queues up


async def test_the_bucket_refills_over_time_and_never_past_the_burst(buckets: Buckets) -> None:
    for _ in range(4):
        await buckets.acquire("k", 4.0, 4)
    buckets.clock.now += 0.125  # half a token
    assert await buckets.acquire("k", 4.0, 4) == 0.125
    buckets.clock.now += 0.125
    assert await buckets.acquire("k", 4.0, 4) == 0.0
    assert await buckets.acquire("k", 4.0, 4) == 0.25
    buckets.clock.now += 3600  # an idle hour refills to the burst, no further
    assert [await buckets.acquire("k", 4.0, 4) for _ in range(5)] == [0.0] * 4 + [0.25]


async def test_a_call_may_cost_more_than_one_token(buckets: Buckets) -> None:
    assert await buckets.acquire("k", 1.0, 5, cost=3) == 0.0
    assert await buckets.acquire("k", 1.0, 5, cost=3) == 1.0  # 2 left, 3 needed
    assert await buckets.acquire("k", 1.0, 5, cost=2) == 0.0  # the refusal took nothing
    buckets.clock.now += 2.5
    assert await buckets.acquire("k", 1.0, 5, cost=3) == 0.5


async def test_peek_says_what_acquire_would_and_takes_nothing(buckets: Buckets) -> None:
    assert await buckets.peek("k", 1.0, 2) == 0.0
    assert await buckets.peek("k", 1.0, 2, cost=2) == 0.0  # the peek before took nothing
    await buckets.acquire("k", 1.0, 2, cost=2)
    assert await buckets.peek("k", 1.0, 2) == 1.0
    assert await buckets.peek("k", 1.0, 2) == 1.0
    assert await buckets.acquire("k", 1.0, 2) == 1.0


async def test_keys_have_buckets_of_their_own(buckets: Buckets) -> None:
    assert await buckets.acquire("a", 1.0, 1) == 0.0
    assert await buckets.acquire("b", 1.0, 1) == 0.0
    assert await buckets.acquire("a", 1.0, 1) == 1.0


@pytest.mark.parametrize(("rate", "burst", "cost"), [(1.0, 2, 3), (0.0, 2, 1), (-1.0, 2, 1), (1.0, 0, 0.5)])
async def test_a_bucket_that_could_never_admit_is_a_value_error(
    buckets: Buckets, rate: float, burst: int, cost: float
) -> None:
    with pytest.raises(ValueError, match="impossible bucket"):
        await buckets.acquire("k", rate, burst, cost)
    with pytest.raises(ValueError, match="impossible bucket"):
        await buckets.peek("k", rate, burst, cost)
    with pytest.raises(ValueError, match="impossible bucket"):
        await buckets.acquire_all([("j", 1.0, 1, 1.0), ("k", rate, burst, cost)])


async def test_acquire_all_takes_from_every_bucket_or_from_none(buckets: Buckets) -> None:
    assert await buckets.acquire_all([("a", 1.0, 2, 1.0), ("b", 1.0, 1, 1.0)]) == [0.0, 0.0]
    assert await buckets.acquire_all([("a", 1.0, 2, 1.0), ("b", 1.0, 1, 1.0)]) == [0.0, 1.0]
    assert await buckets.peek("a", 1.0, 2) == 0.0  # "a" kept its token
    buckets.clock.now += 0.25
    assert await buckets.acquire_all([("a", 1.0, 2, 2.0), ("b", 1.0, 1, 1.0)]) == [0.75, 0.75]


async def test_rate_limits_take_from_every_bucket_of_a_call_or_from_none(buckets: Buckets) -> None:
    limits = RateLimits(buckets.limiter, per_principal=Limit(1.0, 5), per_tool=Limit(1.0, 1), global_=Limit(1.0, 5))
    await step(limits, Request(Principal("ada")), Call("tool", "t"))
    for _ in range(3):
        with pytest.raises(RateLimitedError, match=r"\(per tool: 1/s\)"):
            await step(limits, Request(Principal("ada")), Call("tool", "t"))
    assert await buckets.peek("principal:token:ada", 1.0, 5, cost=4) == 0.0  # only the admitted call was taken
    assert await buckets.peek("global", 1.0, 5, cost=4) == 0.0
    assert await buckets.peek("global", 1.0, 5, cost=5) == 1.0


async def test_rate_limits_name_the_limit_with_the_longest_wait(buckets: Buckets) -> None:
    limits = RateLimits(buckets.limiter, per_principal=Limit("60/minute", 1), global_=Limit(0.5, 1))
    await step(limits, Request(Principal("ada")), Call("tool", "t"))
    with pytest.raises(RateLimitedError) as caught:
        await step(limits, Request(Principal("ada")), Call("tool", "t"))
    assert str(caught.value) == "Rate limit exceeded (global: 0.5/s); retry in 2.0 s"
    assert caught.value.retry_after == 2.0


# --- MemoryRateLimiter ----------------------------------------------------------------------------------------------


def test_take_refills_as_acquire_does() -> None:
    bucket, clock = limiter()
    for _ in range(4):
        bucket.take("k", 4.0, 4)
    clock.now += 0.125
    assert bucket.take("k", 4.0, 4) == 0.125
    clock.now += 0.125
    assert bucket.take("k", 4.0, 4) == 0.0
    clock.now += 3600
    assert [bucket.take("k", 4.0, 4) for _ in range(5)] == [0.0] * 4 + [0.25]


def test_asking_about_a_key_does_not_store_it() -> None:
    bucket, _ = limiter()
    assert bucket.peek("k", 1.0, 2) == 0.0
    assert len(bucket) == 0


def test_memory_stays_bounded_by_max_keys_even_when_no_bucket_is_full() -> None:
    clock = Clock()
    bucket = MemoryRateLimiter(clock=clock, max_keys=10)
    for n in range(100):
        assert bucket.acquire(f"k{n}", 1.0, 1) == 0.0  # each left empty: nothing is lossless to evict
        assert len(bucket) <= 10
    assert len(bucket) == 10
    assert bucket.acquire("k99", 1.0, 1) == 1.0  # recent keys are remembered
    assert bucket.acquire("k0", 1.0, 1) == 0.0  # the least recently used was forgotten: a fresh bucket


def test_idle_buckets_that_refilled_are_evicted_as_new_keys_come() -> None:
    clock = Clock()
    bucket = MemoryRateLimiter(clock=clock, max_keys=1000)
    for n in range(100):
        bucket.acquire(f"old{n}", 1.0, 2)
    bucket.acquire("busy", 1.0, 2, cost=2)
    clock.now += 1.0  # the old ones are full again; "busy" is not
    for n in range(100):
        bucket.acquire(f"new{n}", 1.0, 2)
    assert len(bucket) <= 101  # far under max_keys: the refilled buckets made room
    assert bucket.acquire("busy", 1.0, 2, cost=2) == 1.0  # a bucket still refilling was kept


@pytest.mark.usefixtures("eager_switching")
def test_threads_hammering_one_bucket_never_over_admit() -> None:
    bucket, _ = limiter()  # the clock is frozen: exactly the burst may pass
    burst, threads, attempts = 1000, 16, 200
    admitted = [0] * threads
    start = threading.Barrier(threads, timeout=10)

    def hammer(index: int) -> None:
        start.wait()
        admitted[index] = sum(bucket.acquire("shared", 1.0, burst) == 0.0 for _ in range(attempts))

    run_threads(hammer, threads)
    assert sum(admitted) == burst
    assert threads * attempts > 3 * burst  # the test did try to over-admit


# --- configuration -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "per_second"),
    [("10/s", 10.0), ("600/minute", 10.0), ("1000/hour", 1000 / 3600), ("30/min", 0.5), (" 2 / Second ", 2.0),
     ("86400/day", 1.0), ("5/minutes", 5 / 60), ("0.5/s", 0.5)],
)  # fmt: skip
def test_rates_parse_to_tokens_per_second(text: str, per_second: float) -> None:
    assert parse_rate(text) == per_second


@pytest.mark.parametrize("text", ["ten/minute", "10/fortnight", "10", "/s", "10/", "-1/s", "10 per minute", ""])
def test_a_malformed_rate_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_rate(text)
    assert str(caught.value) == (
        f'invalid rate {text!r}: write N/unit with unit s, minute, hour or day, as in "600/minute"'
    )


def test_a_zero_rate_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^invalid rate '0/minute': the count must be more than 0$"):
        parse_rate("0/minute")


def test_a_limit_takes_text_or_a_per_second_number_and_its_burst_defaults_to_the_count() -> None:
    assert Limit("600/minute") == Limit("600/minute", burst=600)
    assert (Limit("600/minute").rate, Limit("600/minute").burst, Limit("600/minute").text) == (10.0, 600, "600/minute")
    assert (Limit(2.5).burst, Limit(2.5).text) == (3, "2.5/s")
    assert Limit(0.01).burst == 1
    assert Limit("10/s", burst=3).burst == 3


@pytest.mark.parametrize(
    ("rate", "burst", "message"),
    [(0, None, "invalid rate 0: tokens per second must be a number more than 0"),
     (float("inf"), None, "invalid rate inf: tokens per second must be a number more than 0"),
     ("10/s", 0, "invalid burst 0 for rate 10/s: it must be a whole number, at least 1"),
     ("10/s", 2.5, "invalid burst 2.5 for rate 10/s: it must be a whole number, at least 1")],
)  # fmt: skip
def test_a_bad_limit_says_what_is_wrong(rate: Any, burst: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Limit(rate, burst)
    assert str(caught.value) == message


# --- keys -----------------------------------------------------------------------------------------------------------


def every_limit(**options: Any) -> RateLimits:
    return RateLimits(
        MemoryRateLimiter(clock=Clock()),
        per_principal="100/s",
        per_tool="100/s",
        per_principal_tool="100/s",
        global_="100/s",
        **options,
    )


def test_each_limit_counts_against_its_own_key() -> None:
    limits = every_limit()
    found = limits.buckets(Request(Principal("ada")), Call("tool", "search"))
    assert [(key, label) for key, label, _ in found] == [
        ("principal:token:ada", "per principal"),
        ("tool:search", "per tool"),
        ("principal:token:ada/tool:search", "per principal and tool"),
        ("global", "global"),
    ]


@pytest.mark.parametrize("kind", ["resource", "prompt"])
def test_resources_and_prompts_count_against_the_principal_and_global_buckets_only(kind: str) -> None:
    found = every_limit().buckets(Request(Principal("ada")), Call(kind, "data://x"))
    assert [key for key, _, _ in found] == ["principal:token:ada", "global"]


@pytest.mark.parametrize(
    ("options", "request_", "key"),
    [({}, Request(), "anonymous:anonymous"),
     ({"anonymous_key": "public"}, Request(), "anonymous:public"),
     ({"anonymous_key": lambda r: r.session}, Request(session="s-123"), "anonymous:s-123"),
     ({"anonymous_key": lambda r: r.session}, Request(), "anonymous:anonymous"),
     ({"anonymous_key": "public"}, Request(Principal("ada")), "principal:token:ada"),
     ({}, Request({"sub": "bob"}), "principal:bob")],
)  # fmt: skip
def test_an_anonymous_request_is_keyed_by_the_fallback(options: dict[str, Any], request_: Request, key: str) -> None:
    limits = every_limit(**options)
    assert limits.caller_key(request_) == key
    assert [k for k, _, _ in limits.buckets(request_, Call("tool", "t"))][::2] == [key, f"{key}/tool:t"]


def test_principals_and_tools_have_their_own_buckets_and_share_the_global_one() -> None:
    limits = RateLimits(MemoryRateLimiter(clock=Clock()), per_principal_tool=Limit(1.0, 1), global_=Limit(1.0, 3))
    for who, tool in [("ada", "a"), ("ada", "b"), ("bob", "a")]:
        limits.step(Request(Principal(who)), Call("tool", tool))
    with pytest.raises(RateLimitedError, match=r"\(global: 1/s\)"):  # three distinct pairs spent the global burst
        limits.step(Request(Principal("bob")), Call("tool", "b"))
    limits = RateLimits(MemoryRateLimiter(clock=Clock()), per_principal=Limit(1.0, 1), per_tool=Limit(1.0, 2))
    limits.step(Request(Principal("ada")), Call("tool", "a"))
    limits.step(Request(Principal("bob")), Call("tool", "a"))
    with pytest.raises(RateLimitedError, match=r"\(per principal: 1/s\)"):
        limits.step(Request(Principal("ada")), Call("tool", "b"))
    with pytest.raises(RateLimitedError, match=r"\(per tool: 1/s\)"):
        limits.step(Request(Principal("carol")), Call("tool", "a"))


def test_a_tool_can_have_its_own_limit() -> None:
    limits = RateLimits(MemoryRateLimiter(clock=Clock()), per_tool="100/s", tools={"expensive": "1/minute"})
    assert [limit for _, _, limit in limits.buckets(Request(), Call("tool", "expensive"))] == [Limit("1/minute")]
    assert [limit for _, _, limit in limits.buckets(Request(), Call("tool", "cheap"))] == [Limit("100/s")]


def test_no_applicable_limit_costs_nothing() -> None:
    bucket = MemoryRateLimiter(clock=Clock())
    limits = RateLimits(bucket, per_tool="1/s")
    assert limits.step(Request(), Call("resource", "data://x")) is None
    assert len(bucket) == 0


# --- refusals -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("atomic", [True, False], ids=["acquire_all", "peek-then-acquire"])
def test_a_refusal_takes_from_no_bucket(atomic: bool) -> None:
    bucket = MemoryRateLimiter(clock=Clock())
    limits = RateLimits(
        bucket if atomic else PlainLimiter(bucket),
        per_principal=Limit(1.0, 5),
        per_tool=Limit(1.0, 1),
        global_=Limit(1.0, 5),
    )
    limits.step(Request(Principal("ada")), Call("tool", "t"))
    for _ in range(3):
        with pytest.raises(RateLimitedError, match=r"\(per tool: 1/s\)"):
            limits.step(Request(Principal("ada")), Call("tool", "t"))
    assert bucket.peek("principal:token:ada", 1.0, 5, cost=4) == 0.0  # only the admitted call was taken
    assert bucket.peek("global", 1.0, 5, cost=4) == 0.0
    assert bucket.peek("global", 1.0, 5, cost=5) == 1.0


def test_without_acquire_all_every_bucket_is_checked_before_any_is_taken_from() -> None:
    plain = PlainLimiter(MemoryRateLimiter(clock=Clock()))
    limits = RateLimits(plain, per_principal=Limit(1.0, 5), per_tool=Limit(1.0, 5), global_=Limit(1.0, 5))
    limits.step(Request(Principal("ada")), Call("tool", "t"))
    keys = ["principal:token:ada", "tool:t", "global"]
    assert plain.calls == [f"peek {key}" for key in keys] + [f"acquire {key}" for key in keys]


def test_a_call_that_loses_a_race_after_the_check_is_refused_and_what_it_took_stays_taken() -> None:
    inner = MemoryRateLimiter(clock=Clock())
    limits = RateLimits(PlainLimiter(inner, refuse_acquire="global"), per_principal=Limit(1.0, 5), global_="1/s")
    with pytest.raises(RateLimitedError, match=r"^Rate limit exceeded \(global: 1/s\); retry in 9.0 s$"):
        limits.step(Request(Principal("ada")), Call("tool", "t"))
    assert inner.peek("principal:token:ada", 1.0, 5, cost=5) == 1.0  # documented: errs towards refusing


@pytest.mark.usefixtures("eager_switching")
def test_threads_racing_for_the_last_token_across_buckets_never_both_get_it() -> None:
    bucket, _ = limiter()
    threads, rounds = 4, 300
    admitted: list[int] = []
    start = threading.Barrier(threads, timeout=10)
    lock = threading.Lock()

    def race(index: int) -> None:
        for n in range(rounds):
            start.wait()  # every round, all threads ask at once for buckets that hold one call
            if bucket.acquire_all([(f"a{n}", 1.0, 1, 1.0), (f"b{n}", 1.0, 1, 1.0)]) == [0.0, 0.0]:
                with lock:
                    admitted.append(n)

    run_threads(race, threads)
    assert sorted(admitted) == list(range(rounds))  # one winner per round


@pytest.mark.usefixtures("eager_switching")
def test_threads_calling_the_step_never_over_admit_and_refusals_take_nothing() -> None:
    bucket, _ = limiter()
    limits = RateLimits(bucket, per_principal=Limit(1.0, 50), global_=Limit(1.0, 1000))
    threads, attempts = 8, 50
    admitted = [0] * threads
    start = threading.Barrier(threads, timeout=10)

    def call(index: int) -> None:
        start.wait()
        for _ in range(attempts):
            try:
                limits.step(Request(Principal("ada")), Call("tool", "t"))
                admitted[index] += 1
            except RateLimitedError:
                pass

    run_threads(call, threads)
    assert sum(admitted) == 50
    assert bucket.peek("global", 1.0, 1000, cost=950) == 0.0  # exactly the 50 admitted calls were taken
    assert bucket.peek("global", 1.0, 1000, cost=951) == 1.0


def test_a_refused_tool_call_is_a_tool_error_with_the_exact_message() -> None:
    clock = Clock()
    limits = RateLimits(MemoryRateLimiter(clock=clock), per_principal="10/minute")
    for _ in range(10):
        limits.step(Request(Principal("ada")), Call("tool", "t"))
    clock.now += 1.8
    with pytest.raises(RateLimitedError) as caught:
        limits.step(Request(Principal("ada")), Call("tool", "t"))
    assert isinstance(caught.value, ToolError)
    assert str(caught.value) == "Rate limit exceeded (per principal: 10/minute); retry in 4.2 s"
    assert caught.value.retry_after == pytest.approx(4.2)
    assert retry_meta(caught.value.retry_after) == {"tooldeck/retryAfter": 4.2}


@pytest.mark.parametrize("kind", ["resource", "prompt"])
def test_a_refused_resource_or_prompt_is_a_429_refusal(kind: str) -> None:
    limits = RateLimits(MemoryRateLimiter(clock=Clock()), global_=Limit("1/hour"))
    limits.step(Request(), Call(kind, "x"))
    with pytest.raises(RateLimitRefusedError) as caught:
        limits.step(Request(), Call(kind, "x"))
    refusal = caught.value
    assert isinstance(refusal, RefusedError)
    assert (refusal.http_status, refusal.retry_after) == (429, 3600.0)
    assert refusal.to_error() == {
        "code": -32000,
        "message": "Rate limit exceeded (global: 1/hour); retry in 3600.0 s",
        "data": {"tooldeck/retryAfter": 3600.0},
    }


@pytest.mark.parametrize(
    ("seconds", "shown", "header"),
    [(4.12, 4.2, "5"), (4.2, 4.2, "5"), (0.01, 0.1, "1"), (3.0, 3.0, "3"), (3.0000000001, 3.0, "3"), (3.01, 3.1, "4")],
)
def test_waits_are_rounded_up_so_a_caller_that_waits_as_told_is_admitted(
    seconds: float, shown: float, header: str
) -> None:
    assert retry_in(seconds) == shown
    assert retry_after_header(seconds) == header


class Networked:
    """An asynchronous limiter (as a networked store is), recording its calls; ``refuse_acquire`` as PlainLimiter's."""

    def __init__(self, refuse_acquire: str | None = None) -> None:
        self.inner = MemoryRateLimiter(clock=Clock())
        self.refuse_acquire = refuse_acquire
        self.calls: list[str] = []

    async def acquire_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        self.calls.append(f"acquire {key}")
        return 9.0 if key == self.refuse_acquire else self.inner.acquire(key, rate, burst, cost)

    async def peek_async(self, key: str, rate: float, burst: int, cost: float = 1.0) -> float:
        self.calls.append(f"peek {key}")
        return self.inner.peek(key, rate, burst, cost)


async def test_an_asynchronous_limiter_is_awaited() -> None:
    networked = Networked()
    limits = RateLimits(networked, per_principal=Limit(1.0, 1), global_=Limit(1.0, 5))
    outcome = limits.step(Request(Principal("ada")), Call("tool", "t"))
    assert outcome is not None
    await outcome
    assert networked.calls == [
        "peek principal:token:ada",
        "peek global",
        "acquire principal:token:ada",
        "acquire global",
    ]
    outcome = limits.step(Request(Principal("ada")), Call("tool", "t"))
    assert outcome is not None
    with pytest.raises(RateLimitedError, match=r"^Rate limit exceeded \(per principal: 1/s\); retry in 1.0 s$"):
        await outcome


async def test_an_asynchronous_limiter_that_does_not_take_refuses_the_call() -> None:
    one = RateLimits(Networked(), per_principal=Limit(1.0, 1))  # one bucket: no peek, the acquire decides
    await cast(Awaitable[None], one.step(Request(Principal("ada")), Call("tool", "t")))
    with pytest.raises(RateLimitedError, match=r"\(per principal: 1/s\)"):
        await cast(Awaitable[None], one.step(Request(Principal("ada")), Call("tool", "t")))
    raced = RateLimits(Networked(refuse_acquire="global"), per_principal=Limit(1.0, 5), global_=Limit(1.0, 5))
    with pytest.raises(RateLimitedError, match=r"\(global: 1/s\)"):  # its peek admitted; a racing call took it
        await cast(Awaitable[None], raced.step(Request(Principal("ada")), Call("tool", "t")))


async def test_through_the_pipeline_a_tool_gets_an_error_result_and_a_resource_an_error_response() -> None:
    deck = Deck("limited")

    @deck.tool
    def work() -> str:
        return "done"

    @deck.resource("data://r")
    def read() -> str:
        return "data"

    deck.pipeline.limiters.append(RateLimits(per_principal=Limit("1/hour")).step)
    async with client(deck) as c:
        assert (await c.call_tool("work"))["isError"] is False
        result = await c.call_tool("work")
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("Rate limit exceeded (per principal: 1/hour); retry in 3")
        response = await c.request_raw("resources/read", {"uri": "data://r"})
        assert response["error"]["code"] == -32000
        assert response["error"]["message"].startswith("Rate limit exceeded (per principal: 1/hour); retry in 3")


# --- the HTTP flood guard -------------------------------------------------------------------------------------------


def test_the_request_guard_limits_each_key_on_its_own() -> None:
    clock = Clock()
    guard = RequestRateGuard(MemoryRateLimiter(clock=clock), "120/minute", burst=2)
    assert [guard.check("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.5]
    assert guard.check("10.0.0.2") == 0.0
    assert retry_after_header(guard.check("10.0.0.1")) == "1"
    clock.now += 0.5
    assert guard.check("10.0.0.1") == 0.0


@given(st.lists(st.tuples(st.sampled_from("ab"), st.floats(min_value=0, max_value=2)), max_size=60))
def test_take_answers_as_acquire_does(steps: list[tuple[str, float]]) -> None:
    now = [0.0]
    fast, reference = (
        MemoryRateLimiter(clock=lambda: now[0], max_keys=1),
        MemoryRateLimiter(clock=lambda: now[0], max_keys=1),
    )
    for key, pause in steps:
        now[0] += pause
        assert fast.take(key, 3.0, 2) == reference.acquire(key, 3.0, 2)
