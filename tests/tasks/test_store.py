"""The ``TaskStore`` contract: one suite, run against every implementation (memory, SQLite and Redis)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samples import ALLOWED_MOVES, T0
from tooldeck.protocol.errors import INVALID_PARAMS, InvalidParamsError
from tooldeck.tasks import (
    STATUSES,
    MemoryTaskStore,
    SqliteTaskStore,
    TaskRecord,
    TaskStore,
    TaskStoreError,
    UnknownCursorError,
    new_task_id,
)

RESULT = {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}, "isError": False}
ERROR = {"code": -32603, "message": "Internal error", "data": {"why": ["a", 1, None]}}


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    # A store keeps no event loop, so the SQLite one can be opened here and used by the test's own loop; the Redis
    # one connects on its first command, on the test's loop, and its engine is closed as that loop ends.
    made: TaskStore
    if request.param == "memory":
        made = MemoryTaskStore()
    elif request.param == "sqlite":
        made = asyncio.run(SqliteTaskStore.open(tmp_path / "tasks.db"))
    else:
        from tooldeck.tasks.redis import RedisTaskStore

        made = RedisTaskStore(request.getfixturevalue("engine"))
    yield made
    asyncio.run(made.close())


def task(
    task_id: str | None = None,
    *,
    owner: str | None = None,
    created_at: float = T0,
    status: str = "working",
    ttl_ms: int | None = None,
    **fields: Any,
) -> TaskRecord:
    return TaskRecord(
        task_id=task_id or new_task_id(),
        tool="add",
        owner=owner,
        created_at=created_at,
        status=status,
        ttl_ms=ttl_ms,
        **fields,
    )


# create / get


async def test_create_then_get_returns_the_same_record(store: TaskStore) -> None:
    record = task(
        "t1",
        owner="alice",
        status="failed",
        status_message="boom",
        created_at=T0 + 0.123456,
        updated_at=T0 + 7.5,
        ttl_ms=60_000,
        poll_interval_ms=250,
        result={**RESULT, "isError": True},
        error=ERROR,
    )
    await store.create(record)
    assert await store.get("t1", T0) == record
    minimal = task("t2")
    await store.create(minimal)
    assert await store.get("t2", T0) == minimal


async def test_get_of_an_unknown_task_is_none(store: TaskStore) -> None:
    assert await store.get("nope", T0) is None


async def test_a_duplicate_id_is_refused_and_the_first_task_kept(store: TaskStore) -> None:
    first = task("t1", owner="alice")
    await store.create(first)
    with pytest.raises(ValueError, match="t1 already exists"):
        await store.create(task("t1", owner="bob", status="completed"))
    assert await store.get("t1", T0) == first
    assert [r.task_id for r in await store.list("bob", T0)] == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"status": "unknown"}, "unknown task status 'unknown'"), ({"ttl_ms": -1}, "ttl_ms must be None or >= 0")],
)
async def test_create_refuses_a_bad_record(store: TaskStore, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await store.create(task("t1", **fields))
    assert await store.get("t1", T0) is None


# update: the status machine


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATUSES, STATUSES)))
async def test_transition(store: TaskStore, old: str, new: str) -> None:
    before = task("t1", owner="alice", status=old, status_message="before", poll_interval_ms=100, ttl_ms=10_000)
    await store.create(before)
    got = await store.update("t1", status=new, now=T0 + 1, status_message="after")
    if (old, new) in ALLOWED_MOVES:
        assert got == task(
            "t1",
            owner="alice",
            status=new,
            status_message="after",
            updated_at=T0 + 1,
            poll_interval_ms=100,
            ttl_ms=10_000,
        )
    else:
        assert got == before
    assert await store.get("t1", T0 + 2) == got


@pytest.mark.parametrize("status", ["working", "input_required"])
async def test_a_same_status_move_needs_a_new_message(store: TaskStore, status: str) -> None:
    before = task("t1", status=status, status_message="waiting")
    await store.create(before)
    assert await store.update("t1", status=status, now=T0 + 1) == before
    assert await store.update("t1", status=status, now=T0 + 1, status_message="waiting") == before
    moved = await store.update("t1", status=status, now=T0 + 2, status_message="still waiting")
    assert moved is not None
    assert (moved.status, moved.status_message, moved.updated_at) == (status, "still waiting", T0 + 2)


async def test_an_update_writes_message_result_and_error_as_given(store: TaskStore) -> None:
    await store.create(task("t1", status_message="starting"))
    moved = await store.update("t1", status="input_required", now=T0 + 1)
    assert moved is not None and moved.status_message is None  # a status change without a message clears it
    done = await store.update("t1", status="failed", now=T0 + 2, status_message="boom", result=RESULT, error=ERROR)
    assert done is not None
    assert (done.status, done.status_message, done.result, done.error) == ("failed", "boom", RESULT, ERROR)
    assert await store.get("t1", T0 + 3) == done


async def test_update_of_an_unknown_task_is_none(store: TaskStore) -> None:
    assert await store.update("nope", status="completed", now=T0) is None
    assert await store.get("nope", T0) is None


async def test_update_to_an_unknown_status_raises(store: TaskStore) -> None:
    before = task("t1")
    await store.create(before)
    with pytest.raises(ValueError, match="unknown task status 'done'"):
        await store.update("t1", status="done", now=T0 + 1)
    assert await store.get("t1", T0 + 1) == before


@pytest.mark.parametrize("terminal", ["completed", "failed", "cancelled"])
async def test_a_terminal_task_never_changes(store: TaskStore, terminal: str) -> None:
    await store.create(task("t1"))
    final = await store.update("t1", status=terminal, now=T0 + 1, status_message="done", result=RESULT)
    assert final is not None and final.status == terminal
    for step, status in enumerate(STATUSES * 2, start=2):
        got = await store.update("t1", status=status, now=T0 + step, status_message=f"try {step}", error=ERROR)
        assert got == final
    assert await store.expired(T0 + 50) == []  # a finished task holds no lease: nobody takes it over
    assert await store.take_over(final, node="n2", now=T0 + 50, lease_until=T0 + 80) is None
    assert await store.get("t1", T0 + 60) == final


async def test_complete_versus_cancel_has_exactly_one_winner(store: TaskStore) -> None:
    winners = set()
    for n in range(200):
        task_id = f"race-{n}"
        await store.create(task(task_id, status=random.choice(["working", "input_required"])))
        moves = [("completed", {"result": RESULT}), ("cancelled", {"status_message": "Cancelled by the client"})]
        random.shuffle(moves)
        got = await asyncio.gather(*(store.update(task_id, status=s, now=T0 + 1, **kw) for s, kw in moves))
        won = [record for (status, _), record in zip(moves, got, strict=True) if record and record.status == status]
        assert len(won) == 1, got
        assert got[0] == got[1] == won[0]  # the loser is handed the winner's record, unchanged
        assert await store.get(task_id, T0 + 2) == won[0]
        winners.add(won[0].status)
    assert winners == {"completed", "cancelled"}  # both orders were exercised


async def test_a_thousand_concurrent_tasks_are_all_there(store: TaskStore) -> None:
    async def one(n: int) -> None:
        task_id = f"t{n:04d}"
        await store.create(task(task_id, owner=f"user{n % 3}", created_at=T0 + n / 1000))
        await store.update(task_id, status="input_required", now=T0 + 1, status_message="question")
        await store.update(task_id, status="completed", now=T0 + 2, result={"n": n})

    await asyncio.gather(*(one(n) for n in range(1000)))
    seen = []
    for owner in ("user0", "user1", "user2"):
        after = None
        while page := await store.list(owner, T0 + 3, after=after, limit=97):
            seen.extend(page)
            after = page[-1].task_id
    assert sorted(r.task_id for r in seen) == [f"t{n:04d}" for n in range(1000)]
    assert all(r.status == "completed" and r.result == {"n": int(r.task_id[1:])} for r in seen)


# ttl


async def test_a_task_expires_when_its_ttl_has_run_out(store: TaskStore) -> None:
    await store.create(task("t1", owner="alice", ttl_ms=1500))
    assert await store.get("t1", T0 + 1.499) is not None
    assert await store.count_active("alice", T0 + 1.499) == 1
    assert [r.task_id for r in await store.list("alice", T0 + 1.499)] == ["t1"]
    assert await store.get("t1", T0 + 1.5) is None
    assert await store.get("t1", T0 + 1.499) is None  # and it may be purged on the way: it does not come back


async def test_an_expired_task_is_gone_for_every_method(store: TaskStore) -> None:
    await store.create(task("t1", owner="alice", ttl_ms=1000))
    later = T0 + 5
    assert await store.update("t1", status="completed", now=later) is None
    assert await store.list("alice", later) == []
    assert await store.count_active("alice", later) == 0
    with pytest.raises(UnknownCursorError):
        await store.list("alice", later, after="t1")


async def test_a_zero_ttl_expires_at_once(store: TaskStore) -> None:
    await store.create(task("t1", ttl_ms=0))
    assert await store.get("t1", T0) is None


async def test_a_task_without_ttl_never_expires(store: TaskStore) -> None:
    await store.create(task("t1", owner="alice"))
    forever = T0 + 10**10
    assert await store.purge_expired(forever) == 0
    assert await store.get("t1", forever) is not None
    assert await store.count_active("alice", forever) == 1


async def test_purge_deletes_every_expired_task_whatever_its_status(store: TaskStore) -> None:
    for n, status in enumerate(STATUSES):
        await store.create(task(f"short-{status}", status=status, ttl_ms=1000 + n))
        await store.create(task(f"long-{status}", status=status, owner="bob", ttl_ms=60_000))
    await store.create(task("forever", status="completed"))
    assert await store.purge_expired(T0 + 0.5) == 0
    assert await store.purge_expired(T0 + 1.003) == 4  # the ttl runs out at T0 + 1.000 ... 1.004
    assert await store.purge_expired(T0 + 1.004) == 1
    assert await store.purge_expired(T0 + 1.004) == 0
    for status in STATUSES:
        assert await store.get(f"long-{status}", T0 + 2) is not None
    assert await store.purge_expired(T0 + 60) == 5
    assert [r.task_id for r in await store.list(None, T0 + 10**9)] == ["forever"]


# list


async def test_list_orders_by_creation_then_id_whatever_the_insertion_order(store: TaskStore) -> None:
    records = [task(f"id-{n:02d}", owner="alice", created_at=T0 + n // 3) for n in range(30)]
    for record in random.sample(records, len(records)):
        await store.create(record)
    await store.create(task("aa-first", owner="alice", created_at=T0 - 1))
    listed = await store.list("alice", T0, limit=1000)
    assert [r.task_id for r in listed] == ["aa-first"] + [f"id-{n:02d}" for n in range(30)]
    assert listed[1:] == records


async def test_list_pages_by_cursor(store: TaskStore) -> None:
    ids = [f"t{n:02d}" for n in range(23)]
    for n, task_id in enumerate(ids):
        await store.create(task(task_id, owner="alice", created_at=T0 + n))
    pages = []
    after = None
    while page := await store.list("alice", T0, after=after, limit=5):
        pages.append([r.task_id for r in page])
        after = page[-1].task_id
    assert pages == [ids[i : i + 5] for i in range(0, 23, 5)]
    assert [r.task_id for r in await store.list("alice", T0)] == ids  # the default limit is 50
    assert [r.task_id for r in await store.list("alice", T0, after="t21", limit=5)] == ["t22"]


async def test_list_skips_expired_tasks_inside_a_page(store: TaskStore) -> None:
    for n in range(10):
        await store.create(task(f"t{n}", owner="alice", created_at=T0 + n, ttl_ms=1000 if n % 2 else None))
    assert [r.task_id for r in await store.list("alice", T0 + 20, limit=3)] == ["t0", "t2", "t4"]
    assert [r.task_id for r in await store.list("alice", T0 + 20, after="t4", limit=3)] == ["t6", "t8"]


async def test_list_keeps_owners_apart(store: TaskStore) -> None:
    await store.create(task("a1", owner="alice"))
    await store.create(task("b1", owner="bob"))
    await store.create(task("u1"))
    await store.create(task("a2", owner="alice", created_at=T0 + 1))
    assert [r.task_id for r in await store.list("alice", T0)] == ["a1", "a2"]
    assert [r.task_id for r in await store.list("bob", T0)] == ["b1"]
    assert [r.task_id for r in await store.list(None, T0)] == ["u1"]  # None lists the unbound tasks only
    assert await store.list("carol", T0) == []
    with pytest.raises(UnknownCursorError):
        await store.list("bob", T0, after="a1")  # another owner's task is no cursor
    with pytest.raises(UnknownCursorError):
        await store.list(None, T0, after="a1")


async def test_an_unknown_cursor_is_invalid_params(store: TaskStore) -> None:
    await store.create(task("t1"))
    with pytest.raises(UnknownCursorError) as caught:
        await store.list(None, T0, after="never-issued")
    assert isinstance(caught.value, InvalidParamsError) and isinstance(caught.value, ValueError)
    assert caught.value.to_error() == {
        "code": INVALID_PARAMS,
        "message": "Invalid cursor: the task it points at is no longer listed",
    }


@pytest.mark.parametrize("limit", [0, -1])
async def test_list_refuses_a_limit_below_one(store: TaskStore, limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        await store.list(None, T0, limit=limit)


# count_active


async def test_count_active_counts_live_unfinished_tasks_of_one_owner(store: TaskStore) -> None:
    await store.create(task("w1", owner="alice"))
    await store.create(task("w2", owner="alice", status="input_required"))
    await store.create(task("w3", owner="alice", ttl_ms=1000))
    await store.create(task("done", owner="alice", status="completed"))
    await store.create(task("b1", owner="bob"))
    await store.create(task("u1"))
    assert await store.count_active("alice", T0) == 3
    assert await store.count_active("alice", T0 + 1) == 2  # w3 expired
    assert await store.count_active("bob", T0) == 1
    assert await store.count_active(None, T0) == 1
    assert await store.count_active("carol", T0) == 0
    await store.update("w1", status="cancelled", now=T0 + 2)
    await store.update("w2", status="working", now=T0 + 2, status_message="resumed")
    assert await store.count_active("alice", T0 + 2) == 1
    await store.update("b1", status="failed", now=T0 + 2, error=ERROR)
    assert await store.count_active("bob", T0 + 2) == 0


# leases: renew, expired, take_over, and the holder's own moves


def held(task_id: str, node: str = "n1", lease_until: float = T0 + 30, **fields: Any) -> TaskRecord:
    """A task held by ``node`` until ``lease_until``."""
    return task(task_id, node=node, lease_until=lease_until, **fields)


async def test_the_lease_fields_are_stored_as_given(store: TaskStore) -> None:
    record = held("t1", owner="alice", attempts=2, arguments={"n": [1, "two", None], "deep": {"x": 1.5}})
    await store.create(record)
    assert await store.get("t1", T0) == record
    assert (await store.list("alice", T0))[0] == record


@pytest.mark.parametrize("attempts", [0, 3, -1, 1.0, True])
async def test_create_refuses_attempts_out_of_range(store: TaskStore, attempts: Any) -> None:
    with pytest.raises(ValueError, match="attempts must be from 1 to 2"):
        await store.create(held("t1", attempts=attempts))


async def test_renew_extends_the_leases_the_node_holds_and_only_those(store: TaskStore) -> None:
    await store.create(held("mine", arguments={"a": 1}))
    await store.create(held("waiting", status="input_required"))
    await store.create(held("late", lease_until=T0 + 1))  # its lease ran out, and nobody took it over yet
    await store.create(held("theirs", node="n2"))
    await store.create(held("done", status="completed"))
    await store.create(held("short", ttl_ms=1000))
    await store.create(held("not-asked"))
    asked = ["mine", "waiting", "late", "theirs", "done", "short", "unknown"]
    renewed = await store.renew("n1", asked, T0 + 5, T0 + 35)
    assert sorted(renewed) == ["late", "mine", "waiting"]
    for task_id in renewed:
        record = await store.get(task_id, T0 + 5)
        assert record is not None and record.lease_until == T0 + 35 and record.node == "n1"
        assert record.updated_at == T0  # a renewal is not a change of the task: lastUpdatedAt stays
    assert (await store.get("mine", T0 + 5)) == held("mine", arguments={"a": 1}, lease_until=T0 + 35)
    for task_id, lease in (("theirs", T0 + 30), ("done", T0 + 30), ("not-asked", T0 + 30)):
        record = await store.get(task_id, T0 + 5)
        assert record is not None and record.lease_until == lease
    assert await store.renew("n1", [], T0 + 5, T0 + 35) == []


async def test_expired_finds_held_tasks_whose_lease_ran_out_oldest_first(store: TaskStore) -> None:
    await store.create(held("live", lease_until=T0 + 10))
    await store.create(held("edge", lease_until=T0 + 5))  # runs out at T0 + 5 exactly
    await store.create(held("older", node="n2", lease_until=T0 + 2, status="input_required"))
    await store.create(task("no-lease"))  # left by a process without leases (an older tooldeck)
    await store.create(held("finished", lease_until=T0 + 1, status="failed"))
    await store.create(held("gone", lease_until=T0 + 1, ttl_ms=4000))
    assert [r.task_id for r in await store.expired(T0 + 4.999)] == ["no-lease", "older"]
    found = await store.expired(T0 + 5)
    assert [r.task_id for r in found] == ["no-lease", "older", "edge"]
    assert found[1] == held("older", node="n2", lease_until=T0 + 2, status="input_required")
    assert [r.task_id for r in await store.expired(T0 + 5, limit=1)] == ["no-lease"]
    assert [r.task_id for r in await store.expired(T0 + 100)] == ["no-lease", "older", "edge", "live"]


async def test_take_over_to_run_again(store: TaskStore) -> None:
    await store.create(held("t1", owner="alice", status="input_required", status_message="asking",
                            arguments={"n": 7}, poll_interval_ms=50, ttl_ms=60_000))  # fmt: skip
    (seen,) = await store.expired(T0 + 30)
    taken = await store.take_over(seen, node="n2", now=T0 + 30, lease_until=T0 + 60)
    assert taken == task("t1", owner="alice", status="working", updated_at=T0 + 30, node="n2", lease_until=T0 + 60,
                         attempts=2, arguments={"n": 7}, poll_interval_ms=50, ttl_ms=60_000)  # fmt: skip
    assert await store.get("t1", T0 + 31) == taken
    assert await store.expired(T0 + 59) == []
    assert await store.count_active("alice", T0 + 31) == 1


async def test_take_over_to_fail(store: TaskStore) -> None:
    message = "The process running this task stopped"
    await store.create(held("t1", owner="alice", status_message="step 2", arguments={"n": 7}, ttl_ms=60_000))
    (seen,) = await store.expired(T0 + 40)
    taken = await store.take_over(seen, node="n2", now=T0 + 40, lease_until=T0 + 70, failure=message)
    assert taken == task("t1", owner="alice", status="failed", status_message=message, updated_at=T0 + 40,
                         node="n2", lease_until=T0 + 70, ttl_ms=60_000,
                         result={"content": [{"type": "text", "text": message}], "isError": True})  # fmt: skip
    assert taken.arguments is None and taken.attempts == 1  # finished: never runs again
    assert await store.get("t1", T0 + 41) == taken
    assert await store.count_active("alice", T0 + 41) == 0
    assert await store.expired(T0 + 1000) == []


async def test_take_over_refuses_a_live_lease_a_stale_sighting_and_a_finished_task(store: TaskStore) -> None:
    await store.create(held("t1", lease_until=T0 + 30, arguments={}))
    (seen,) = await store.expired(T0 + 30)
    # A live lease (the taker's clock says it has not run out) is never taken over.
    assert await store.take_over(seen, node="n2", now=T0 + 29.999, lease_until=T0 + 60) is None
    # Renewed after it was seen: the lease is live again.
    assert await store.renew("n1", ["t1"], T0 + 30, T0 + 60) == ["t1"]
    assert await store.take_over(seen, node="n2", now=T0 + 31, lease_until=T0 + 61) is None
    # Taken over by another node after it was seen (on another attempt): the stale sighting loses.
    (seen,) = await store.expired(T0 + 60)
    assert await store.take_over(seen, node="n3", now=T0 + 60, lease_until=T0 + 90) is not None
    assert await store.take_over(seen, node="n2", now=T0 + 1000, lease_until=T0 + 1030) is None
    record = await store.get("t1", T0 + 1000)
    assert record is not None and (record.node, record.attempts) == ("n3", 2)
    # Finished since: nothing to take over.
    (seen,) = await store.expired(T0 + 90)
    await store.update("t1", status="completed", now=T0 + 91, result=RESULT)
    assert await store.take_over(seen, node="n2", now=T0 + 92, lease_until=T0 + 122) is None
    assert await store.take_over(held("unknown"), node="n2", now=T0 + 92, lease_until=T0 + 122) is None
    # A node taking over its own task (a process restarted under the same node id): a sighting of the attempt
    # before is stale too, so the task never runs a third time.
    await store.create(held("t2", lease_until=T0 + 30, arguments={}))
    (stale,) = await store.expired(T0 + 30)
    assert await store.take_over(stale, node="n1", now=T0 + 30, lease_until=T0 + 60) is not None
    assert await store.take_over(stale, node="n2", now=T0 + 60, lease_until=T0 + 90) is None


async def test_of_nodes_racing_to_take_over_one_task_exactly_one_wins(store: TaskStore) -> None:
    for n in range(50):
        await store.create(held(f"race-{n}", lease_until=T0 + 30, arguments={"n": n}))
    seen = await store.expired(T0 + 30)
    assert len(seen) == 50
    for record in seen:
        got = await asyncio.gather(*(store.take_over(record, node=node, now=T0 + 30, lease_until=T0 + 60)
                                     for node in ("n2", "n3", "n4")))  # fmt: skip
        won = [r for r in got if r is not None]
        assert len(won) == 1 and won[0].attempts == 2
        assert await store.get(record.task_id, T0 + 31) == won[0]


async def test_the_holders_own_moves_apply_only_while_it_holds_the_task(store: TaskStore) -> None:
    await store.create(held("t1", arguments={"n": 1}))
    moved = await store.update("t1", status="input_required", now=T0 + 1, node="n1")
    assert moved is not None and moved.status == "input_required"
    assert await store.update("t1", status="working", now=T0 + 2, node="n2") == moved  # n2 does not hold it
    (seen,) = await store.expired(T0 + 30)
    taken = await store.take_over(seen, node="n2", now=T0 + 30, lease_until=T0 + 60)
    assert taken is not None
    # The first holder wakes up and tries to finish the task: refused, the taker's record stands.
    assert await store.update("t1", status="completed", now=T0 + 31, result=RESULT, node="n1") == taken
    # A move without a node (a client's cancel) applies whoever holds the task.
    cancelled = await store.update("t1", status="cancelled", now=T0 + 32, status_message="Cancelled")
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.node == "n2"


@pytest.mark.parametrize("terminal", ["completed", "failed", "cancelled"])
async def test_a_finished_task_forgets_its_arguments(store: TaskStore, terminal: str) -> None:
    await store.create(held("t1", arguments={"secret": "s3cr3t"}))
    moved = await store.update("t1", status="input_required", now=T0 + 1, status_message="asking")
    assert moved is not None and moved.arguments == {"secret": "s3cr3t"}
    done = await store.update("t1", status=terminal, now=T0 + 2, status_message="done")
    assert done is not None and done.arguments is None
    assert (await store.get("t1", T0 + 3)).arguments is None  # type: ignore[union-attr]


# close


async def test_a_closed_store_refuses_every_call(store: TaskStore) -> None:
    await store.create(task("t1"))
    await store.close()
    await store.close()  # a second close does nothing
    calls = [
        store.create(task("t2")),
        store.get("t1", T0),
        store.update("t1", status="completed", now=T0),
        store.list(None, T0),
        store.count_active(None, T0),
        store.purge_expired(T0),
        store.renew("n1", ["t1"], T0, T0 + 30),
        store.expired(T0),
        store.take_over(task("t1"), node="n1", now=T0, lease_until=T0 + 30),
    ]
    for call in calls:
        with pytest.raises(TaskStoreError, match="closed"):
            await call
