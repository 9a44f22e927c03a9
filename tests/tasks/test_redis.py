"""What only the Redis store promises: atomicity across processes (each engine is one process's connections), the key
layout the README documents, every index kept in step with its records, and times compared to the last bit."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from redis_server import free_port
from samples import T0
from tooldeck.engine import BackendUnavailableError
from tooldeck.engine.connection import Engine
from tooldeck.tasks import TaskRecord
from tooldeck.tasks.redis import RedisTaskStore

RESULT = {"content": [{"type": "text", "text": "42"}], "isError": False}
README = Path(__file__).resolve().parents[2] / "README.md"


def held(task_id: str, node: str = "dead", lease_until: float = T0 + 30, **fields: Any) -> TaskRecord:
    return TaskRecord(task_id=task_id, tool="add", created_at=T0, node=node, lease_until=lease_until, **fields)


@pytest.fixture
def fleet(engines: Callable[..., Engine]) -> list[RedisTaskStore]:
    """Four stores as four processes would have them: each on an engine (a connection pool) of its own."""
    return [RedisTaskStore(engines()) for _ in range(4)]


# --- racing processes --------------------------------------------------------------------------------------------


async def test_of_processes_racing_to_take_over_one_task_exactly_one_wins(fleet: list[RedisTaskStore]) -> None:
    for n in range(50):
        task_id = f"race-{n}"
        await fleet[0].create(held(task_id, arguments={"n": n}))
        sightings = await asyncio.gather(*(store.expired(T0 + 30) for store in fleet))
        assert all([r.task_id for r in seen] == [task_id] for seen in sightings)
        got = await asyncio.gather(*(store.take_over(seen[0], node=f"n{i}", now=T0 + 30, lease_until=T0 + 60)
                                     for i, (store, seen) in enumerate(zip(fleet, sightings, strict=True))))  # fmt: skip
        won = [record for record in got if record is not None]
        assert len(won) == 1 and won[0].attempts == 2 and won[0].arguments == {"n": n}
        assert [await store.get(task_id, T0 + 31) for store in fleet] == won * 4
        await fleet[1].update(task_id, status="completed", now=T0 + 32, result=RESULT)  # out of the next sightings


async def test_a_hundred_tasks_taken_over_by_racing_processes_are_each_taken_once(fleet: list[RedisTaskStore]) -> None:
    for n in range(100):
        await fleet[0].create(held(f"t{n:03d}", arguments={"n": n}))
    sightings = await asyncio.gather(*(store.expired(T0 + 30) for store in fleet))
    assert all(seen == sightings[0] for seen in sightings) and len(sightings[0]) == 100

    async def take_all(store: RedisTaskStore, node: str, seen: list[TaskRecord]) -> list[str]:
        taken = await asyncio.gather(*(store.take_over(r, node=node, now=T0 + 30, lease_until=T0 + 60) for r in seen))
        return [r.task_id for r in taken if r is not None]

    won = await asyncio.gather(*(take_all(store, f"n{i}", list(reversed(seen)) if i % 2 else seen)
                                 for i, (store, seen) in enumerate(zip(fleet, sightings, strict=True))))  # fmt: skip
    assert sorted(task_id for ids in won for task_id in ids) == [f"t{n:03d}" for n in range(100)]  # each exactly once
    for i, ids in enumerate(won):
        for task_id in ids:
            record = await fleet[(i + 1) % 4].get(task_id, T0 + 31)
            assert record is not None and (record.node, record.attempts, record.status) == (f"n{i}", 2, "working")
    assert await fleet[0].expired(T0 + 59) == []


async def test_renewal_racing_takeover_never_both_win(fleet: list[RedisTaskStore]) -> None:
    # The holder renews while another process takes over: either the renewal lands first (the takeover is refused)
    # or the takeover does (the renewal leaves the task out, and the holder knows it lost it). Never both.
    holder, taker = fleet[0], fleet[1]
    outcomes = set()
    for n in range(100):
        task_id = f"t{n:03d}"
        await holder.create(held(task_id, node="h"))
        (seen,) = await taker.expired(T0 + 30)
        renewal = holder.renew("h", [task_id], T0 + 30, T0 + 60)
        takeover = taker.take_over(seen, node="t", now=T0 + 30, lease_until=T0 + 60, failure="stopped")
        renewed, taken = await (asyncio.gather(renewal, takeover) if n % 2 else _swapped(renewal, takeover))
        assert (renewed == [task_id]) != (taken is not None), (renewed, taken)
        record = await taker.get(task_id, T0 + 31)
        assert record is not None and record.node == ("h" if renewed else "t")
        assert record.status == ("working" if renewed else "failed")
        outcomes.add("renewed" if renewed else "taken")
        await holder.update(task_id, status="cancelled", now=T0 + 31)  # out of the next sightings


async def _swapped(renewal: Any, takeover: Any) -> tuple[Any, Any]:
    taken, renewed = await asyncio.gather(takeover, renewal)  # the takeover's command sent first
    return renewed, taken


async def test_complete_versus_cancel_across_processes_has_one_winner(fleet: list[RedisTaskStore]) -> None:
    for n in range(100):
        task_id = f"race-{n}"
        await fleet[0].create(TaskRecord(task_id=task_id, tool="add", created_at=T0))
        got = await asyncio.gather(
            fleet[1].update(task_id, status="completed", now=T0 + 1, result=RESULT),
            fleet[2].update(task_id, status="cancelled", now=T0 + 1, status_message="Cancelled"),
        )
        won = [r for r, status in zip(got, ("completed", "cancelled"), strict=True) if r and r.status == status]
        assert len(won) == 1 and got[0] == got[1] == won[0], got
        assert await fleet[3].get(task_id, T0 + 2) == won[0]


async def test_one_id_created_by_racing_processes_is_stored_once(fleet: list[RedisTaskStore]) -> None:
    made = await asyncio.gather(*(store.create(TaskRecord(task_id="t1", tool="add", owner=f"o{i}", created_at=T0))
                                  for i, store in enumerate(fleet)), return_exceptions=True)  # fmt: skip
    assert sum(outcome is None for outcome in made) == 1
    assert all(isinstance(o, ValueError) and str(o) == "task t1 already exists" for o in made if o is not None)
    (owner,) = [f"o{i}" for i, outcome in enumerate(made) if outcome is None]
    assert [[r.task_id for r in await fleet[0].list(f"o{i}", T0)] for i in range(4)] == [
        ["t1"] if f"o{i}" == owner else [] for i in range(4)
    ]


# --- the keys ----------------------------------------------------------------------------------------------------


async def scores(engine: Engine, name: str) -> list[tuple[str, float]]:
    return [(member.decode(), score) for member, score in await engine.client.zrange(name, 0, -1, withscores=True)]


async def test_the_keys_are_the_ones_the_readme_documents_and_every_index_follows_its_records(engine: Engine) -> None:
    store = RedisTaskStore(engine)
    await store.create(held("w", node="n1", owner="alice", ttl_ms=60_000, arguments={"n": 1}))
    await store.create(TaskRecord(task_id="u", tool="add", created_at=T0 + 1))  # unbound, no ttl, no lease
    await store.create(TaskRecord(task_id="d", tool="add", owner="alice", created_at=T0 + 2, status="completed"))
    assert sorted(await engine.client.keys("*")) == [
        b"tooldeck:task-active", b"tooldeck:task-active:alice", b"tooldeck:task-expiry", b"tooldeck:task-lease",
        b"tooldeck:task-owner", b"tooldeck:task-owner:alice", b"tooldeck:task:d", b"tooldeck:task:u",
        b"tooldeck:task:w",
    ]  # fmt: skip
    assert await engine.client.hgetall("tooldeck:task:w") == {
        b"task_id": b"w", b"owner": b"alice", b"status": b"working", b"created_at": b"1764066600.0",
        b"updated_at": b"1764066600.0", b"ttl_ms": b"60000", b"tool": b"add", b"node": b"n1",
        b"lease_until": b"1764066630.0", b"attempts": b"1", b"arguments": b'{"n":1}', b"expires_at": b"1764066660.0",
    }  # fmt: skip
    assert await scores(engine, "tooldeck:task-owner:alice") == [("w", T0), ("d", T0 + 2)]
    assert await scores(engine, "tooldeck:task-owner") == [("u", T0 + 1)]
    assert await scores(engine, "tooldeck:task-active:alice") == [("w", T0 + 60)]  # the finished d is not active
    assert await scores(engine, "tooldeck:task-active") == [("u", math.inf)]
    assert await scores(engine, "tooldeck:task-lease") == [("u", -math.inf), ("w", T0 + 30)]
    assert await scores(engine, "tooldeck:task-expiry") == [("w", T0 + 60)]

    assert await store.renew("n1", ["w"], T0 + 10, T0 + 40) == ["w"]
    assert await scores(engine, "tooldeck:task-lease") == [("u", -math.inf), ("w", T0 + 40)]
    (seen,) = [r for r in await store.expired(T0 + 40) if r.task_id == "w"]
    assert await store.take_over(seen, node="n2", now=T0 + 40, lease_until=T0 + 70) is not None
    assert await scores(engine, "tooldeck:task-lease") == [("u", -math.inf), ("w", T0 + 70)]
    await store.update("w", status="input_required", now=T0 + 41, status_message="asking")
    assert await scores(engine, "tooldeck:task-active:alice") == [("w", T0 + 60)]  # still held
    await store.update("w", status="completed", now=T0 + 42, result=RESULT)  # finished: no longer active nor held
    assert not await engine.client.exists("tooldeck:task-active:alice")
    assert await scores(engine, "tooldeck:task-lease") == [("u", -math.inf)]
    assert await engine.client.hget("tooldeck:task:w", "arguments") is None
    await store.update("u", status="cancelled", now=T0 + 43)
    assert not await engine.client.exists("tooldeck:task-active", "tooldeck:task-lease")

    assert await store.purge_expired(T0 + 60) == 1  # w: gone from its record and from every index
    assert await scores(engine, "tooldeck:task-owner:alice") == [("d", T0 + 2)]
    assert sorted(await engine.client.keys("*")) == [
        b"tooldeck:task-owner", b"tooldeck:task-owner:alice", b"tooldeck:task:d", b"tooldeck:task:u"
    ]  # fmt: skip

    table = README.read_text().split("### Shared state in Redis", 1)[1].split("\n## ", 1)[0]
    for documented in ("`task:<id>`", "`task-owner:<owner>`", "`task-owner`", "`task-active:<owner>`",
                       "`task-active`", "`task-lease`", "`task-expiry`"):  # fmt: skip
        assert documented in table, documented


async def test_an_expired_task_read_on_the_way_is_deleted_with_its_index_entries(engine: Engine) -> None:
    store = RedisTaskStore(engine)
    await store.create(held("t1", owner="alice", ttl_ms=1000))
    assert await store.get("t1", T0 + 1) is None
    assert await engine.client.keys("*") == []
    await store.create(held("t2", owner="alice", ttl_ms=1000))
    assert await store.update("t2", status="completed", now=T0 + 1) is None
    assert await engine.client.keys("*") == []


async def test_purge_deletes_in_batches_and_counts_them_all(engine: Engine) -> None:
    store = RedisTaskStore(engine)
    for n in range(250):
        await store.create(TaskRecord(task_id=f"t{n:03d}", tool="add", owner=f"o{n % 7}", created_at=T0, ttl_ms=1000))
    await store.create(TaskRecord(task_id="kept", tool="add", created_at=T0))
    assert await store.purge_expired(T0 + 1) == 250
    assert sorted(await engine.client.keys("*")) == [b"tooldeck:task-active", b"tooldeck:task-lease",
                                                     b"tooldeck:task-owner", b"tooldeck:task:kept"]  # fmt: skip


async def test_owners_that_look_alike_and_ids_that_look_like_keys_stay_apart(engine: Engine) -> None:
    store = RedisTaskStore(engine)
    for task_id, owner in (("a", None), ("b", ""), ("c", "x"), ("d", "x:y"), ("owner:x", "x"), ("-owner", None)):
        await store.create(TaskRecord(task_id=task_id, tool="add", owner=owner, created_at=T0))
    assert [r.task_id for r in await store.list(None, T0)] == ["-owner", "a"]
    assert [r.task_id for r in await store.list("", T0)] == ["b"]
    assert [r.task_id for r in await store.list("x", T0)] == ["c", "owner:x"]
    assert [r.task_id for r in await store.list("x:y", T0)] == ["d"]
    assert [await store.count_active(o, T0) for o in (None, "", "x", "x:y", "x:")] == [2, 1, 2, 1, 0]


async def test_prefixes_keep_two_decks_tasks_apart_on_one_server(engines: Callable[..., Engine]) -> None:
    one, two = RedisTaskStore(engines(prefix="one:")), RedisTaskStore(engines(prefix="two:"))
    await one.create(held("t1", owner="alice"))
    await two.create(held("t1", owner="bob"))  # the same id, another deck
    assert [r.task_id for r in await one.list("alice", T0)] == ["t1"] and await one.list("bob", T0) == []
    assert (await two.get("t1", T0)).owner == "bob"  # type: ignore[union-attr]
    assert len(await one.expired(T0 + 30)) == len(await two.expired(T0 + 30)) == 1


# --- times -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("created_at", [T0 + 0.1, T0 + 1 / 3, 1e-7, 1.7e12 + 0.7])
async def test_expiry_and_leases_are_compared_to_the_last_bit(engine: Engine, created_at: float) -> None:
    # Lua numbers are doubles, but a double printed with Lua's 14 digits is not the same double: every time crosses
    # as Python's repr and is compared as parsed, so the boundaries are exactly the memory store's.
    store = RedisTaskStore(engine)
    lease = created_at + 0.2
    record = TaskRecord(task_id="t1", tool="add", created_at=created_at, ttl_ms=300, node="n1", lease_until=lease)
    await store.create(record)
    expires_at = record.expires_at
    assert expires_at is not None
    just_before = math.nextafter(expires_at, -math.inf)
    assert await store.get("t1", created_at) == record
    assert await store.expired(math.nextafter(lease, -math.inf)) == []
    assert await store.expired(lease) == [record]
    assert await store.count_active(None, just_before) == 1 and await store.count_active(None, expires_at) == 0
    assert [r.task_id for r in await store.list(None, just_before)] == ["t1"]
    assert await store.list(None, expires_at) == []
    assert await store.purge_expired(just_before) == 0
    assert await store.get("t1", just_before) == record
    assert await store.get("t1", expires_at) is None


# --- the server away ---------------------------------------------------------------------------------------------


async def test_an_unreachable_server_is_backend_unavailable_for_every_method() -> None:
    port = free_port()  # nothing listens there
    engine = Engine.from_url(f"redis://127.0.0.1:{port}/0", timeout=1.0)
    store = RedisTaskStore(engine)
    try:
        calls = [
            store.create(held("t1")),
            store.get("t1", T0),
            store.update("t1", status="completed", now=T0),
            store.list(None, T0),
            store.count_active(None, T0),
            store.purge_expired(T0),
            store.renew("n1", ["t1"], T0, T0 + 30),
            store.expired(T0),
            store.take_over(held("t1"), node="n1", now=T0, lease_until=T0 + 30),
        ]
        for call in calls:
            with pytest.raises(BackendUnavailableError, match=f"^the shared backend redis://127.0.0.1:{port}/0 is "
                                                              "unreachable: Connection refused$"):  # fmt: skip
                await call
    finally:
        await engine.aclose()
