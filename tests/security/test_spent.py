"""The single-use store behind spent confirmations: the contract every ``SpentStore`` passes (a shared store runs the
same tests), and the in-memory store's bound."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.security.spent import MemorySpentStore, SpentStore

NOW = 1_000.0


@pytest.fixture(params=["memory", "redis"])
def clock_and_store(request: pytest.FixtureRequest) -> tuple[list[float], SpentStore]:
    now = [NOW]
    if request.param == "memory":
        return now, MemorySpentStore(clock=lambda: now[0])
    from tooldeck.security.spent_redis import RedisSpentStore

    return now, RedisSpentStore(request.getfixturevalue("engine"), clock=lambda: now[0])


async def test_a_key_is_spent_once(clock_and_store: tuple[list[float], SpentStore]) -> None:
    _, store = clock_and_store
    assert await store.spend("a", NOW + 60) is True
    assert await store.spend("a", NOW + 60) is False
    assert await store.spend("b", NOW + 60) is True  # each key on its own


async def test_a_mark_for_what_has_expired_already_is_not_kept(
    clock_and_store: tuple[list[float], SpentStore],
) -> None:
    _, store = clock_and_store
    assert await store.spend("a", NOW - 1) is True  # what it guards is refused anyway: nothing to remember
    assert await store.spend("a", NOW + 60) is True


async def test_the_memory_store_keeps_a_mark_until_its_expiry_and_no_longer() -> None:
    now = [NOW]
    store = MemorySpentStore(clock=lambda: now[0])
    assert await store.spend("a", NOW + 60) is True
    now[0] = NOW + 59
    assert await store.spend("a", NOW + 60) is False
    now[0] = NOW + 61  # what the mark guarded has expired by now: the key may be spent again
    assert await store.spend("a", NOW + 120) is True


async def test_the_redis_store_keeps_a_mark_as_long_as_what_it_guards(engine: Any) -> None:
    from tooldeck.security.spent_redis import RedisSpentStore

    store = RedisSpentStore(engine, clock=lambda: NOW)
    assert await store.spend("a", NOW + 60) is True
    left = await engine.client.pttl(engine.key("spent", "a"))
    assert 59_000 < left <= 60_000  # Redis forgets it when it could not be accepted any more


async def test_a_mark_is_spent_once_by_two_processes_racing(engines: Callable[..., Any]) -> None:
    import asyncio

    from tooldeck.security.spent_redis import RedisSpentStore

    stores = [RedisSpentStore(engines(), clock=lambda: NOW) for _ in range(3)]
    won = await asyncio.gather(*(store.spend("confirmation", NOW + 60) for store in stores for _ in range(5)))
    assert won.count(True) == 1


async def test_the_memory_store_forgets_the_oldest_mark_past_its_bound() -> None:
    store = MemorySpentStore(max_keys=2, clock=lambda: NOW)
    for key in ("a", "b", "c"):
        assert await store.spend(key, NOW + 60)
    assert await store.spend("a", NOW + 60) is True  # forgotten early, to stay within max_keys
    assert await store.spend("c", NOW + 60) is False
