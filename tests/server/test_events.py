"""The event store behind resumable SSE streams: the contract every ``EventStore`` passes (memory, Redis), eviction
included: a store keeps the last ``max_events`` of a session, a resume that would skip evicted events is refused, and
one from a kept event replays exactly what followed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from asgi_client import AsgiClient
from tooldeck import Context, Deck
from tooldeck.server.events import PRIMING, EventStore, MemoryEventStore
from tooldeck.transports.http import HttpApp

# --- the contract every store passes --------------------------------------------------------------------------------


def redis_store(request: pytest.FixtureRequest, max_events: int) -> EventStore:
    from tooldeck.server.events_redis import RedisEventStore

    return RedisEventStore(request.getfixturevalue("engine"), max_events=max_events)


STORES: dict[str, Callable[[pytest.FixtureRequest, int], EventStore]] = {
    "memory": lambda request, max_events: MemoryEventStore(max_events=max_events),
    "redis": redis_store,
}


@pytest.fixture(params=sorted(STORES))
def make_store(request: pytest.FixtureRequest) -> Callable[[int], EventStore]:
    """A store of the parametrized kind keeping ``max_events`` per session."""
    return lambda max_events: STORES[request.param](request, max_events)


@pytest.fixture
def store(make_store: Callable[[int], EventStore]) -> EventStore:
    return make_store(1000)


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


@pytest.mark.parametrize("event_id", ["", "nonsense", "1.x", "1.0x", "1.999", "1.", ".5"])
async def test_unknown_or_malformed_ids_cannot_be_resumed(store: EventStore, event_id: str) -> None:
    issued = await store.append("s", "1", {"n": 1})
    assert await store.replay("s", event_id) is None
    assert await store.replay("unknown-session", issued) is None


async def test_sessions_are_apart_and_forget_drops_everything(store: EventStore) -> None:
    mine = await store.append("mine", "1", PRIMING)
    await store.append("theirs", "1", {"n": 1})
    assert await store.replay("mine", mine) == ("1", [])
    await store.forget("mine")
    assert await store.replay("mine", mine) is None
    await store.forget("never")  # forgetting an unknown session is not an error


# --- eviction -------------------------------------------------------------------------------------------------------


async def fill(store: EventStore, session: str, stream: str, count: int) -> list[str]:
    """A priming event and ``count`` messages on one stream; their ids."""
    ids = [await store.append(session, stream, PRIMING)]
    for n in range(1, count + 1):
        ids.append(await store.append(session, stream, {"n": n}))
    return ids


async def test_a_kept_event_replays_exactly_what_followed_it(make_store: Callable[[int], EventStore]) -> None:
    store = make_store(10)
    ids = await fill(store, "s", "a", 5)
    assert await store.replay("s", ids[0]) == ("a", [(ids[n], {"n": n}) for n in range(1, 6)])  # priming not replayed
    assert await store.replay("s", ids[3]) == ("a", [(ids[4], {"n": 4}), (ids[5], {"n": 5})])
    assert await store.replay("s", ids[5]) == ("a", [])


async def test_resuming_across_evicted_events_is_refused(make_store: Callable[[int], EventStore]) -> None:
    store = make_store(3)
    ids = await fill(store, "s", "a", 5)  # six events: the last three (n = 3, 4, 5) are kept
    assert await store.replay("s", ids[0]) is None  # n = 1, 2 were evicted: replaying would lose them
    assert await store.replay("s", ids[1]) is None  # n = 2 was evicted
    # ids[2] (n = 2) is itself evicted, but every event after it is kept: the resume loses nothing and is served.
    assert await store.replay("s", ids[2]) == ("a", [(ids[3], {"n": 3}), (ids[4], {"n": 4}), (ids[5], {"n": 5})])
    assert await store.replay("s", ids[4]) == ("a", [(ids[5], {"n": 5})])


async def test_eviction_counts_every_stream_of_the_session_and_no_other_session(
    make_store: Callable[[int], EventStore],
) -> None:
    store = make_store(3)
    a = await fill(store, "s", "a", 1)  # s: a.1 (priming), a.2
    other = await fill(store, "t", "a", 5)  # another session's events never push s's out
    assert await store.replay("s", a[0]) == ("a", [(a[1], {"n": 1})])
    b = await fill(store, "s", "b", 2)  # s: b.3, b.4, b.5 -> stream b's events push a.1 and a.2 out
    assert await store.replay("s", a[0]) is None  # a.2 was lost
    assert await store.replay("s", a[1]) == ("a", [])  # nothing after it was lost
    assert await store.replay("s", b[0]) == ("b", [(b[1], {"n": 1}), (b[2], {"n": 2})])  # never another stream's
    assert await store.replay("t", other[4]) == ("a", [(other[5], {"n": 5})])


def test_max_events_must_be_positive(make_store: Callable[[int], EventStore]) -> None:
    with pytest.raises(ValueError, match="max_events must be at least 1"):
        make_store(0)


# --- through the app ------------------------------------------------------------------------------------------------


def counting_deck() -> Deck:
    deck = Deck("events")

    @deck.tool
    async def count(n: int, ctx: Context) -> int:
        for i in range(1, n + 1):
            await ctx.report_progress(i, n)
        return n

    return deck


async def resume(http: AsgiClient, session: str, last_event_id: str) -> Any:
    headers = {"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": last_event_id}
    return await http.request("GET", headers=headers)


async def test_the_app_resumes_from_kept_events_and_refuses_evicted_ones(
    make_store: Callable[[int], EventStore],
) -> None:
    deck = counting_deck()
    deck.backends.events = make_store(3)
    app = HttpApp(deck)
    http = AsgiClient(app)
    session = await http.initialize()
    call = await http.call(session, 7, "tools/call", {"name": "count", "arguments": {"n": 4},
                                                      "_meta": {"progressToken": "c"}})  # fmt: skip
    events = [event async for event in call.events()]  # priming, progress 1-4, the response: the last three kept
    assert events[0].data == "" and [e.message.get("id") for e in events[1:]] == [None] * 4 + [7]

    refused = await resume(http, session, events[0].id)  # type: ignore[arg-type]
    assert refused.status == 404
    assert "unknown or too old to resume" in orjson.loads(await refused.body())["error"]["message"]

    resumed = await resume(http, session, events[3].id)  # type: ignore[arg-type]  # progress 3 was kept
    assert resumed.status == 200
    replayed = [event async for event in resumed.events()]
    assert [(e.id, e.message) for e in replayed] == [(e.id, e.message) for e in events[4:]]
    assert [m.get("params", {}).get("progress") for m in (e.message for e in replayed)] == [4, None]
    await app.aclose()
