"""The EventStore contract every store (memory today, durable or shared later) must pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tooldeck.transports.http.events import PRIMING, EventStore, MemoryEventStore

STORES: dict[str, Callable[[], EventStore]] = {"memory": lambda: MemoryEventStore(max_events=1000)}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> EventStore:
    return STORES[request.param]()


async def test_ids_are_unique_across_a_session_and_name_their_stream(store: EventStore) -> None:
    ids = [await store.append("s", stream, {"n": i}) for i, stream in enumerate(["1", "2", "1", "0"])]
    assert len(set(ids)) == 4
    assert [i.rpartition(".")[0] for i in ids] == ["1", "2", "1", "0"]


async def test_replay_gives_what_followed_on_that_stream_only_in_order(store: EventStore) -> None:
    first = await store.append("s", "1", PRIMING)
    await store.append("s", "2", {"other": 1})
    a = await store.append("s", "1", {"n": 1})
    b = await store.append("s", "1", {"n": 2})
    assert await store.replay("s", first) == ("1", [(a, {"n": 1}), (b, {"n": 2})])
    assert await store.replay("s", a) == ("1", [(b, {"n": 2})])
    assert await store.replay("s", b) == ("1", [])


async def test_priming_events_are_never_replayed_as_messages(store: EventStore) -> None:
    start = await store.append("s", "3", {"n": 0})
    await store.append("s", "3", PRIMING)
    last = await store.append("s", "3", {"n": 1})
    assert await store.replay("s", start) == ("3", [(last, {"n": 1})])


@pytest.mark.parametrize("event_id", ["", "nonsense", "1.x", "1.999", ".5"])
async def test_unknown_or_malformed_ids_cannot_be_resumed(store: EventStore, event_id: str) -> None:
    await store.append("s", "1", {"n": 1})
    assert await store.replay("s", event_id) is None


async def test_sessions_are_apart_and_forget_drops_everything(store: EventStore) -> None:
    mine = await store.append("mine", "1", PRIMING)
    await store.append("theirs", "1", {"n": 1})
    assert await store.replay("mine", mine) == ("1", [])
    await store.forget("mine")
    assert await store.replay("mine", mine) is None
    await store.forget("never")  # forgetting an unknown session is not an error


async def test_a_bounded_memory_store_refuses_to_resume_from_an_evicted_event() -> None:
    store = MemoryEventStore(max_events=2)
    old = await store.append("s", "1", {"n": 1})
    kept = await store.append("s", "1", {"n": 2})
    newest = await store.append("s", "1", {"n": 3})
    # "old" itself is gone, but everything after it is kept: resuming from it loses nothing
    assert await store.replay("s", old) == ("1", [(kept, {"n": 2}), (newest, {"n": 3})])
    await store.append("s", "1", {"n": 4})
    assert await store.replay("s", old) is None  # resuming would silently lose the event after "old"
    assert (await store.replay("s", kept)) is not None


def test_a_memory_store_needs_room_for_one_event() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        MemoryEventStore(max_events=0)
