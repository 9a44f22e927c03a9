"""The single-use store behind spent confirmations: the contract every ``SpentStore`` passes (a shared store runs the
same tests), and the in-memory store's bound."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tooldeck.security.spent import MemorySpentStore, SpentStore

NOW = 1_000.0
STORES: dict[str, Callable[[list[float]], SpentStore]] = {
    "memory": lambda now: MemorySpentStore(clock=lambda: now[0]),
}


@pytest.fixture(params=sorted(STORES))
def clock_and_store(request: pytest.FixtureRequest) -> tuple[list[float], SpentStore]:
    now = [NOW]
    return now, STORES[request.param](now)


async def test_a_key_is_spent_once(clock_and_store: tuple[list[float], SpentStore]) -> None:
    _, store = clock_and_store
    assert await store.spend("a", NOW + 60) is True
    assert await store.spend("a", NOW + 60) is False
    assert await store.spend("b", NOW + 60) is True  # each key on its own


async def test_a_mark_lasts_until_its_expiry_and_no_longer(clock_and_store: tuple[list[float], SpentStore]) -> None:
    now, store = clock_and_store
    assert await store.spend("a", NOW + 60) is True
    now[0] = NOW + 59
    assert await store.spend("a", NOW + 60) is False
    now[0] = NOW + 61  # what the mark guarded has expired by now: the key may be spent again
    assert await store.spend("a", NOW + 120) is True


async def test_the_memory_store_forgets_the_oldest_mark_past_its_bound() -> None:
    store = MemorySpentStore(max_keys=2, clock=lambda: NOW)
    for key in ("a", "b", "c"):
        assert await store.spend(key, NOW + 60)
    assert await store.spend("a", NOW + 60) is True  # forgotten early, to stay within max_keys
    assert await store.spend("c", NOW + 60) is False
