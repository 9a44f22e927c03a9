"""The DefinitionStore contract every store (memory, Redis) must pass: a numbered state, read whole, changed only by
a compare-and-swap that exactly one of concurrent committers wins; and what RedisDefinitionStore keeps in Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.manifest.store import DefinitionStore, MemoryDefinitionStore, Snapshot

STATE = {"served": [{"document": {"id": "calc", "version": "1.0.0"}, "digest": "ab" * 32}], "pins": {"calc": {}}}


def memory(request: pytest.FixtureRequest) -> Callable[[], DefinitionStore]:
    store = MemoryDefinitionStore()
    return lambda: store  # every "process" of one record holds the one store


def redis(request: pytest.FixtureRequest) -> Callable[[], DefinitionStore]:
    from tooldeck.manifest.store_redis import RedisDefinitionStore

    engines = request.getfixturevalue("engines")
    return lambda: RedisDefinitionStore(engines())  # each "process" with its own connection


STORES = {"memory": memory, "redis": redis}


@pytest.fixture(params=sorted(STORES))
def stores(request: pytest.FixtureRequest) -> Callable[[], DefinitionStore]:
    """Make the store as another process would reach it."""
    return STORES[request.param](request)


async def test_an_empty_store_is_revision_0_and_an_empty_state(stores: Callable[[], DefinitionStore]) -> None:
    store = stores()
    assert await store.read() == Snapshot(0, {})
    assert await store.revision() == 0


async def test_a_commit_at_the_current_revision_numbers_the_next_one(stores: Callable[[], DefinitionStore]) -> None:
    store = stores()
    assert await store.commit(0, STATE) == 1
    assert await store.read() == Snapshot(1, STATE)
    assert await store.commit(1, {"served": []}) == 2
    assert await stores().read() == Snapshot(2, {"served": []})  # another process reads what was committed
    assert await stores().revision() == 2


async def test_a_commit_at_an_old_revision_changes_nothing(stores: Callable[[], DefinitionStore]) -> None:
    store = stores()
    assert await store.commit(0, STATE) == 1
    assert await stores().commit(0, {"served": []}) is None  # planned on revision 0: another change came first
    assert await store.commit(5, {"served": []}) is None  # nor at a revision not reached yet
    assert await store.read() == Snapshot(1, STATE)


async def test_of_concurrent_commits_at_one_revision_exactly_one_wins(stores: Callable[[], DefinitionStore]) -> None:
    committers = [stores() for _ in range(8)]
    results = await asyncio.gather(*(s.commit(0, {"by": n}) for n, s in enumerate(committers)))
    winners = [n for n, revision in enumerate(results) if revision == 1]
    assert len(winners) == 1 and results.count(None) == 7
    assert await stores().read() == Snapshot(1, {"by": winners[0]})


async def test_what_is_read_is_a_copy(stores: Callable[[], DefinitionStore]) -> None:
    store = stores()
    state: dict[str, Any] = {"served": [{"a": 1}]}
    await store.commit(0, state)
    state["served"].append({"b": 2})  # the committer goes on changing its own value
    read = await store.read()
    read.state["served"].clear()
    assert (await store.read()).state == {"served": [{"a": 1}]}


@pytest.mark.parametrize("state", [{"when": object()}, {1: "a"}, ["not", "an", "object"]])
async def test_a_state_that_is_not_json_is_refused(stores: Callable[[], DefinitionStore], state: Any) -> None:
    store = stores()
    with pytest.raises(TypeError, match="definitions state must be"):
        await store.commit(0, state)
    assert await store.read() == Snapshot(0, {})


async def test_redis_keeps_one_hash_of_revision_and_json_state(engine: Any) -> None:
    from tooldeck.manifest.store_redis import RedisDefinitionStore

    store = RedisDefinitionStore(engine)
    await store.commit(0, {"served": []})
    assert await engine.client.keys("*") == [b"tooldeck:definitions"]
    assert await engine.client.hgetall("tooldeck:definitions") == {b"revision": b"1", b"state": b'{"served":[]}'}
