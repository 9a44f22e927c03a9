"""SessionState as data, and the SessionStore contract every store (memory, Redis) must pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.server.state import MemorySessionStore, SessionState, SessionStore


def redis_store(request: pytest.FixtureRequest, **options: Any) -> SessionStore:
    from tooldeck.server.state_redis import RedisSessionStore

    return RedisSessionStore(request.getfixturevalue("engine"), **options)


STORES: dict[str, Callable[[pytest.FixtureRequest], SessionStore]] = {
    "memory": lambda request: MemorySessionStore(),
    "redis": redis_store,
    "redis-ttl": lambda request: redis_store(request, ttl=600),  # the same contract with states that expire
}


def sample_state() -> SessionState:
    state = SessionState("warning", identifies_requestor=False)
    state.revision = "2025-06-18"
    state.client_info = {"name": "c", "version": "1"}
    state.client_capabilities = {"sampling": {}}
    state.capabilities = {"tools": {"listChanged": True}}
    state.subscriptions = {"b://2", "a://1"}
    state.principal = "alice"
    return state


def test_state_round_trips_through_json_data() -> None:
    state = sample_state()
    data = state.to_dict()
    assert data["subscriptions"] == ["a://1", "b://2"]  # sorted: the same state is the same data
    again = SessionState.from_dict(data)
    assert again.to_dict() == data
    assert again.log_level == "warning" and again.identifies_requestor is False


def test_every_change_is_counted() -> None:
    state = SessionState()
    before = state.changes
    state.changed()
    assert state.changes == before + 1


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> SessionStore:
    return STORES[request.param](request)


async def test_a_stored_state_comes_back_equal(store: SessionStore) -> None:
    data = sample_state().to_dict()
    await store.put("s1", data)
    assert await store.get("s1") == data
    assert await store.count() == 1


async def test_the_store_keeps_a_copy_not_the_caller_s_object(store: SessionStore) -> None:
    data: dict[str, Any] = sample_state().to_dict()
    await store.put("s1", data)
    data["logLevel"] = "debug"
    got = await store.get("s1")
    assert got is not None and got["logLevel"] == "warning"
    got["logLevel"] = "error"
    again = await store.get("s1")
    assert again is not None and again["logLevel"] == "warning"


async def test_put_replaces_and_delete_forgets(store: SessionStore) -> None:
    await store.put("s1", sample_state().to_dict())
    newer = {**sample_state().to_dict(), "logLevel": "error"}
    await store.put("s1", newer)
    assert await store.get("s1") == newer
    await store.delete("s1")
    assert await store.get("s1") is None
    await store.delete("s1")  # deleting an unknown id is not an error
    assert await store.count() == 0


async def test_sessions_lists_the_stored_ones_up_to_a_limit(store: SessionStore) -> None:
    data = sample_state().to_dict()
    for n in range(3):
        await store.put(f"s{n}", {**data, "revision": f"r{n}"})
    await store.delete("s1")
    listed = await store.sessions(10)
    assert sorted((session_id, state["revision"]) for session_id, state in listed) == [("s0", "r0"), ("s2", "r2")]
    assert len(await store.sessions(1)) == 1
    listed[0][1]["revision"] = "changed"
    assert {state["revision"] for _, state in await store.sessions(10)} == {"r0", "r2"}  # copies


async def test_unknown_ids_are_none(store: SessionStore) -> None:
    assert await store.get("never") is None


async def test_touch_marks_a_stored_session_and_never_moves_back(store: SessionStore) -> None:
    assert await store.last_seen([]) == []
    assert await store.touch("s1", 100.0) is None  # unknown to the store: nothing is marked
    assert await store.last_seen(["s1"]) == [None]
    await store.put("s1", sample_state().to_dict())
    await store.put("s2", sample_state().to_dict())
    assert await store.last_seen(["s1", "s2"]) == [None, None]  # stored, never served
    assert await store.touch("s1", 100.5) is True
    assert await store.touch("s1", 90.0) is True  # a process whose clock is behind does not move it back
    assert await store.touch("s2", 200.25) is True
    assert await store.last_seen(["s2", "nope", "s1"]) == [200.25, None, 100.5]
    await store.delete("s1")
    assert await store.last_seen(["s1"]) == [None]
    assert await store.touch("s1", 300.0) is False  # ended (not lost): a late touch does not bring the mark back
    assert await store.last_seen(["s1", "s2"]) == [None, 200.25]


async def test_a_store_remembers_an_end_for_a_while_only() -> None:
    store = MemorySessionStore(ended_ttl=0.0)  # (Redis: the mark's own expiry, which the Redis tests check)
    await store.put("s1", sample_state().to_dict())
    await store.delete("s1")
    await store.delete("s2")  # forgets the end of s1 (older than ended_ttl) as it records this one
    assert await store.touch("s1", 1.0) is None
