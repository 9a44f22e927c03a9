"""The store of the approvals waiting in a deck's processes: the contract every ``ApprovalStore`` passes (the Redis one
runs the same tests), and ``Approvals``, one process's end of it — a decision settles a call once, only for the
binding it waits with, and reaches a call waiting in another process through the relay."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.security.approvals import (
    STOPPED,
    TAKEN,
    Approval,
    Approvals,
    ApprovalStore,
    Decision,
    MemoryApprovalStore,
)

BINDING = ("token:alice", "deploy@1.0.0", "digest")


def approval(approval_id: str, kind: str = "operator", *, requested: float = 0.0, ttl: float = 60.0) -> Approval:
    now = time.time()
    shown = {"tool": "deploy", "version": "1.0.0", "level": 10, "principal": "token:alice", "arguments": {"a": [1]}}
    return Approval(approval_id, kind, BINDING, shown, "n1", now + ttl, now + requested, f"form-{approval_id}")


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> ApprovalStore:
    if request.param == "memory":
        return MemoryApprovalStore()
    from tooldeck.security.approvals_redis import RedisApprovalStore

    return RedisApprovalStore(request.getfixturevalue("engine"))


async def test_an_approval_is_found_as_it_was_kept_and_listed_oldest_first(store: ApprovalStore) -> None:
    kept = approval("a", requested=1.0)
    await store.add(approval("b", "url", requested=2.0))
    await store.add(kept)
    found = await store.get("a")
    assert found is not None and found is not kept and found.to_json() == kept.to_json()
    assert (found.kind, found.binding, found.node, found.form_token) == ("operator", BINDING, "n1", "form-a")
    assert found.shown["arguments"] == {"a": [1]}
    assert [(w.id, w.kind) for w in await store.waiting()] == [("a", "operator"), ("b", "url")]
    assert await store.get("nothing") is None


async def test_an_approval_is_taken_once(store: ApprovalStore) -> None:
    await store.add(approval("a"))
    taken = await store.take("a")
    assert taken is not None and taken.binding == BINDING
    assert await store.take("a") is None  # single use: the second taker gets nothing
    assert await store.get("a") is None and await store.waiting() == []


async def test_a_deleted_or_expired_approval_is_gone(store: ApprovalStore) -> None:
    await store.add(approval("a"))
    await store.delete("a")
    assert await store.get("a") is None and await store.take("a") is None
    await store.add(approval("old", ttl=-1.0 if isinstance(store, MemoryApprovalStore) else 0.001))
    await asyncio.sleep(0.01)  # past a millisecond's expiry: Redis's own clock decides
    assert await store.get("old") is None and await store.waiting() == [] and await store.take("old") is None


async def test_wrong_sign_ins_are_counted_per_approval_and_forgotten_with_it(store: ApprovalStore) -> None:
    await store.add(approval("a"))
    assert [await store.miss("a") for _ in range(3)] == [1, 2, 3]
    assert await store.miss("b") == 1
    await store.take("a")
    await store.add(approval("a"))  # the same id again (never, in practice): its count starts over
    assert await store.miss("a") == 1


async def test_the_redis_store_keeps_an_approval_as_long_as_it_waits(engine: Any) -> None:
    from tooldeck.security.approvals_redis import RedisApprovalStore

    store = RedisApprovalStore(engine)
    await store.add(approval("a", ttl=60.0))
    await store.miss("a")
    assert 59_000 < await engine.client.pttl(engine.key("approval", "a")) <= 60_000
    assert 59_000 < await engine.client.pttl(engine.key("approval-miss", "a")) <= 60_000
    await store.take("a")
    assert await engine.client.keys("*") == []  # nothing left behind: value, index entry and count


async def test_two_processes_taking_one_approval_at_once_one_gets_it(engines: Callable[..., Any]) -> None:
    from tooldeck.security.approvals_redis import RedisApprovalStore

    first, second = RedisApprovalStore(engines()), RedisApprovalStore(engines())
    for round_ in range(20):
        await first.add(approval(f"a{round_}"))
        taken = await asyncio.gather(first.take(f"a{round_}"), second.take(f"a{round_}"))
        assert sorted(found is None for found in taken) == [False, True]


# --- Approvals: one process's end ----------------------------------------------------------------------------------


async def test_a_decision_settles_the_waiting_call_once_and_only_for_its_binding() -> None:
    approvals = Approvals(MemoryApprovalStore(), "n1")
    waiting = await approvals.open("operator", BINDING, {"tool": "deploy"}, 30)
    decided = asyncio.ensure_future(approvals.wait(waiting, 30))
    assert approvals.settle(waiting.id, ("token:alice", "deploy@1.0.0", "other"), Decision(True, "bob")) is False
    assert approvals.settle(waiting.id, ("token:mallory", *BINDING[1:]), Decision(True, "bob")) is False
    await asyncio.sleep(0)
    assert not decided.done()  # a decision bound to another call settles nothing
    assert await approvals.decide(waiting, Decision(True, "bob")) is None
    assert await decided == Decision(True, "bob")
    assert await approvals.decide(waiting, Decision(False, "carol")) == TAKEN  # single use
    await approvals.withdraw(waiting)
    assert await approvals.waiting("operator") == []


async def test_a_decision_that_comes_after_the_call_stopped_waiting_is_refused() -> None:
    store = MemoryApprovalStore()
    approvals = Approvals(store, "n1")
    waiting = await approvals.open("url", BINDING, {"tool": "deploy"}, 30)
    assert await approvals.wait(waiting, 0.01) is None
    found = await approvals.find(waiting.id, "url")
    assert found is not None and await approvals.find(waiting.id, "operator") is None  # kinds kept apart
    await approvals.withdraw(waiting)
    assert await approvals.find(waiting.id, "url") is None
    await store.add(found)  # say it was listed again somewhere: the call is not waiting any more
    assert await approvals.decide(found, Decision(True, "token:alice")) == STOPPED


async def test_a_decision_on_another_process_goes_through_the_relay_and_its_silence_is_reported() -> None:
    store = MemoryApprovalStore()
    here = Approvals(store, "n1")
    told: list[tuple[str, str, tuple[str, str, str], Decision]] = []

    async def relay(node: str, approval_id: str, binding: tuple[str, str, str], decision: Decision) -> bool | None:
        told.append((node, approval_id, binding, decision))
        return here.settle(approval_id, binding, decision) if node == "n1" else None

    there = Approvals(store, "n2", relay)
    waiting = await here.open("operator", BINDING, {"tool": "deploy"}, 30)
    found = await there.find(waiting.id, "operator")
    assert found is not None and found.node == "n1"
    assert await there.decide(found, Decision(False, "bob", "no")) is None
    assert await here.wait(waiting, 1) == Decision(False, "bob", "no")
    assert told == [("n1", waiting.id, BINDING, Decision(False, "bob", "no"))]
    gone = await here.open("operator", BINDING, {"tool": "deploy"}, 30)
    gone.node = "n3"  # a process that no longer answers
    await store.add(gone)
    problem = await there.decide(gone, Decision(True, "bob"))
    assert problem == "the process the call waits in (n3) did not answer: the call ended with it, and was not run"
    assert await store.get(gone.id) is None  # taken all the same: nobody else decides a call that is gone
    await here.withdraw(gone)
