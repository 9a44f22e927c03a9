"""Two (and three) decks sharing one task store (a SQLite file, or Redis with an engine per deck), as processes of one
fleet do: a task is held by the node that
runs it under a lease that node renews; another node never touches a task whose lease is live, and takes over one
whose lease ran out (its process stopped renewing): an idempotent tool's task is run once more there, any other is
ended ``failed`` saying why; a task never runs a third time, and the first process's late outcome never overwrites
what the taker recorded. Time is the managers' injected clock; leases are tended by the test, never by sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import client
from mcp_schema import check
from server.test_stateless import Driver
from tooldeck import Context, Deck
from tooldeck.security.principal import Principal, principal_id
from tooldeck.server.takeover import STOPPED
from tooldeck.server.task_manager import TaskManager
from tooldeck.tasks import PollInterval, TaskStore

T0 = 1_000_000.0
LEASE = 30.0


class Runs:
    """Every run of a tool, in order, as ``tool@node``; ``until(n)`` waits for the n-th."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._changed = asyncio.Event()

    def add(self, run: str) -> None:
        self.seen.append(run)
        self._changed.set()

    async def until(self, count: int) -> None:
        while len(self.seen) < count:
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), 5)


class Node:
    """One deck of the fleet (its node id is ``name``), its clock, and a gate that holds its tools' work."""

    def __init__(self, store: Shared, runs: Runs, name: str) -> None:
        self.now = T0
        self.gate = asyncio.Event()  # releases the work of this node's tools
        self.started = asyncio.Event()
        self.deck = deck = Deck("fleet", task_store=store() if callable(store) else store, task_lease=LEASE,
                                task_lease_renewal=LEASE / 3, node_id=name)  # fmt: skip
        deck.task_manager().clock = lambda: self.now
        deck.task_manager().poll_interval = PollInterval.fixed(5)  # tasks/result of a task another node runs polls

        @deck.tool(task="required")
        async def held(ctx: Context) -> str:
            runs.add(f"held@{name}")
            self.started.set()
            await self.gate.wait()
            return f"held done on {name}"

        @deck.tool(task="required", annotations={"idempotentHint": True})
        async def again(n: int) -> str:
            runs.add(f"again({n})@{name}")
            self.started.set()
            await self.gate.wait()
            return f"again({n}) done on {name}"

        @deck.tool(task="optional", annotations={"idempotentHint": True})
        async def who(ctx: Context) -> str:
            runs.add(f"who@{name}")
            self.started.set()
            await self.gate.wait()
            return f"{principal_id(ctx.principal)} on {name}"

        @deck.tool(task="optional")
        async def quick(n: int) -> int:
            return n * 10

    @property
    def manager(self) -> TaskManager:
        return self.deck.task_manager()

    async def tend(self, now: float) -> int:
        self.now = now
        return await self.manager.tend_leases()


Shared = str | Callable[[], TaskStore]  # a store spec, or what makes each node its own store over the one backend


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Shared:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'tasks.sqlite3'}"
    from tooldeck.tasks.redis import RedisTaskStore

    engines = request.getfixturevalue("engines")
    return lambda: RedisTaskStore(engines())  # each node on an engine of its own, as each process is


async def create(c: Any, name: str, arguments: dict[str, Any] | None = None) -> str:
    result = await c.request("tools/call", {"name": name, "arguments": arguments or {}, "task": {}})
    check("2025-11-25", "CreateTaskResult", result)
    return str(result["task"]["taskId"])


async def status(c: Any, task_id: str) -> tuple[str, str | None]:
    got = await c.request("tasks/get", {"taskId": task_id})
    return got["status"], got.get("statusMessage")


async def test_a_second_deck_never_fails_the_first_decks_running_tasks(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    async with client(first.deck) as a, client(second.deck) as b:
        running = await create(a, "held")
        await asyncio.wait_for(first.started.wait(), 5)
        quick = await create(b, "quick", {"n": 4})  # the second deck's first task request starts its manager
        assert (await b.request("tasks/result", {"taskId": quick}))["structuredContent"] == {"result": 40}
        second.now = first.now = T0 + LEASE - 0.001  # the lease is live to its last instant
        assert await second.tend(T0 + LEASE - 0.001) == 0
        assert await status(a, running) == ("working", None)
        assert await status(b, running) == ("working", None)  # the same task, seen from the other deck
        first.gate.set()
        assert (await a.request("tasks/result", {"taskId": running}))["structuredContent"] == {
            "result": "held done on first"
        }
    assert runs.seen == ["held@first"]


async def test_a_renewed_lease_is_never_taken_over(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    async with client(first.deck) as a, client(second.deck):
        running = await create(a, "again", {"n": 1})
        await asyncio.wait_for(first.started.wait(), 5)
        for step in range(1, 10):  # the owner renews every third of a lease; the other node looks just after
            await first.tend(T0 + step * LEASE / 3)
            assert await second.tend(T0 + step * LEASE / 3 + LEASE * 0.99) == 0
        assert await status(a, running) == ("working", None)
        first.gate.set()
        await a.request("tasks/result", {"taskId": running})
    assert runs.seen == ["again(1)@first"]


async def test_after_the_lease_an_idempotent_task_runs_once_more_and_any_other_fails_saying_why(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    async with client(first.deck) as a, client(second.deck) as b:
        held = await create(a, "held")
        await asyncio.wait_for(first.started.wait(), 5)
        first.started.clear()
        again = await create(a, "again", {"n": 7})
        await asyncio.wait_for(first.started.wait(), 5)
        await create(b, "quick", {"n": 1})
        # The first process stops renewing (as if it died); at the lease's end its tasks are the second's.
        assert await second.tend(T0 + LEASE) == 2
        assert await status(b, held) == ("failed", STOPPED)
        failed = await b.request("tasks/result", {"taskId": held})
        assert failed["isError"] is True and failed["content"] == [{"type": "text", "text": STOPPED}]
        await asyncio.wait_for(second.started.wait(), 5)
        assert runs.seen == ["held@first", "again(7)@first", "again(7)@second"]
        assert await status(b, again) == ("working", None)

        # The first process was only stalled: its work ends while the second's run still goes on, and what it tries
        # to record changes nothing (the task is the second's now).
        watchers = set(first.manager.running.values())
        assert len(watchers) == 2
        first.gate.set()
        await asyncio.wait_for(asyncio.wait(watchers), 5)  # its work ended and tried to settle the tasks
        assert not first.manager.running
        assert await status(a, held) == ("failed", STOPPED)
        assert await status(a, again) == ("working", None)

        second.gate.set()
        result = await b.request("tasks/result", {"taskId": again})
        assert result["structuredContent"] == {"result": "again(7) done on second"}
        assert (await a.request("tasks/result", {"taskId": again}))["structuredContent"] == {
            "result": "again(7) done on second"
        }
        assert await second.tend(T0 + 10 * LEASE) == 0  # finished tasks are never taken over
    assert sorted(runs.seen) == ["again(7)@first", "again(7)@second", "held@first"]


async def test_a_task_never_runs_a_third_time(store: Shared) -> None:
    runs = Runs()
    first, second, third = Node(store, runs, "first"), Node(store, runs, "second"), Node(store, runs, "third")
    async with client(first.deck) as a, client(second.deck), client(third.deck) as c:
        again = await create(a, "again", {"n": 1})
        await asyncio.wait_for(first.started.wait(), 5)
        assert await second.tend(T0 + LEASE) == 1  # first run lost: run once more on the second
        await asyncio.wait_for(second.started.wait(), 5)
        # The second dies too (it never renews); the third finds the task on its second run: it is failed.
        assert await third.tend(T0 + 2 * LEASE + 1) == 1
        assert await status(c, again) == ("failed", STOPPED)
        assert runs.seen == ["again(1)@first", "again(1)@second"]
        first.gate.set()
        second.gate.set()


async def test_a_node_that_lost_a_task_stops_its_work(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    async with client(first.deck) as a, client(second.deck):
        again = await create(a, "again", {"n": 2})
        await asyncio.wait_for(first.started.wait(), 5)
        watcher = first.manager.running[again]
        assert await second.tend(T0 + LEASE) == 1
        await first.tend(T0 + LEASE + 1)  # its renewal finds the task held by the second: the work here stops
        await asyncio.wait_for(asyncio.wait({watcher}), 5)
        assert watcher.done() and again not in first.manager.running  # stopped: its gate was never opened
        second.gate.set()
        assert (await a.request("tasks/result", {"taskId": again}))["structuredContent"] == {
            "result": "again(2) done on second"
        }
    assert runs.seen == ["again(2)@first", "again(2)@second"]


async def test_two_nodes_racing_to_take_over_one_task_exactly_one_wins(store: Shared) -> None:
    runs = Runs()
    nodes = [Node(store, runs, name) for name in ("first", "second", "third")]
    async with client(nodes[0].deck) as a, client(nodes[1].deck), client(nodes[2].deck):
        tasks = []
        for n in range(12):
            tasks.append(await create(a, "again" if n % 2 else "held", {"n": n} if n % 2 else {}))
        await runs.until(12)
        won = await asyncio.gather(nodes[1].tend(T0 + LEASE), nodes[2].tend(T0 + LEASE))
        assert sum(won) == 12
        await runs.until(18)  # 12 first runs, 6 runs once more
        reruns = sorted(r for r in runs.seen if not r.endswith("@first"))
        assert sorted(int(r[6:].partition(")")[0]) for r in reruns) == [1, 3, 5, 7, 9, 11]  # each once
        for task_id in tasks[::2]:
            assert await status(a, task_id) == ("failed", STOPPED)
        for node in nodes:
            node.gate.set()
        for task_id in tasks[1::2]:
            assert (await a.request("tasks/result", {"taskId": task_id}))["structuredContent"]["result"].startswith(
                "again("
            )


async def test_a_2026_task_is_taken_over_in_its_era_under_its_identity(store: Shared) -> None:
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    ci = Principal("ci")
    a, b, other = Driver(first.deck, principal=ci), Driver(second.deck, principal=ci), Driver(second.deck)
    ids = {}
    for name in ("who", "held"):
        created = await a.request(name, "tools/call", {"name": name, "arguments": {}}, capabilities=tasks)
        ids[name] = created["result"]["taskId"]
    await runs.until(2)
    assert await second.tend(T0 + LEASE) == 2
    await runs.until(3)
    assert runs.seen == ["who@first", "held@first", "who@second"]
    second.gate.set()
    await asyncio.wait_for(asyncio.wait({second.manager.running[ids["who"]]}), 5)
    got = (await b.request(1, "tasks/get", {"taskId": ids["who"]}, capabilities=tasks))["result"]
    assert got["status"] == "completed"  # the 2026 era's outcome: any result completes the task
    assert got["result"]["structuredContent"] == {"result": "token:ci on second"}  # run again as the same identity
    failed = (await b.request(2, "tasks/get", {"taskId": ids["held"]}, capabilities=tasks))["result"]
    assert (failed["status"], failed["statusMessage"]) == ("failed", STOPPED)
    assert failed["error"] == {"code": -32603, "message": STOPPED}
    refused = await other.request(3, "tasks/get", {"taskId": ids["who"]}, capabilities=tasks)
    assert refused["error"]["code"] == -32602  # still another identity's task, on the node that took it over
    first.gate.set()


async def test_a_task_whose_tool_is_not_idempotent_where_it_is_taken_over_is_failed(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    second.deck.remove_tool("again")

    @second.deck.tool(name="again", task="required")  # the same tool, not marked idempotent on this node
    async def again(n: int) -> str:
        runs.add(f"again({n})@second")
        return "ran again"

    async with client(first.deck) as a, client(second.deck) as b:
        task_id = await create(a, "again", {"n": 5})
        await runs.until(1)
        assert await second.tend(T0 + LEASE) == 1
        assert await status(b, task_id) == ("failed", STOPPED)
        first.gate.set()
    assert runs.seen == ["again(5)@first"]


async def test_a_task_cancelled_on_another_node_stops_where_it_runs_at_the_next_renewal(store: Shared) -> None:
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    async with client(first.deck) as a, client(second.deck) as b:
        task_id = await create(a, "held")
        await runs.until(1)
        watcher = first.manager.running[task_id]
        assert (await b.request("tasks/cancel", {"taskId": task_id}))["status"] == "cancelled"
        assert not watcher.done()  # the second cannot reach the first's work; the store tells the first
        await first.tend(T0 + 1)
        await asyncio.wait_for(asyncio.wait({watcher}), 5)
        assert task_id not in first.manager.running
        assert await status(a, task_id) == ("cancelled", "Cancelled by the client")
    assert runs.seen == ["held@first"]


async def test_a_task_taken_over_while_it_waited_for_its_approver_waits_for_one_again(
    store: Shared, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[authentication.stdio]\nsubject = "alice"\n[approvals]\ntools = ["again"]\n')
    runs = Runs()
    first, second = Node(store, runs, "first"), Node(store, runs, "second")
    for node in (first, second):
        node.deck.apply_policy(policy)
    async with client(first.deck) as a, client(second.deck) as b:
        again = await create(a, "again", {"n": 3})
        assert await status(a, again) == ("working", "Waiting for an approver (four eyes)")
        assert len(await first.deck.access.approvals.waiting("operator")) == 1 and runs.seen == []
        assert await second.tend(T0 + LEASE) == 1  # the first stops renewing while its task still waits
        for _ in range(200):  # the second admits the task again: it waits for an approver there, and never runs
            if await second.deck.access.approvals.waiting("operator"):
                break
            await asyncio.sleep(0.01)
        (waiting,) = await second.deck.access.approvals.waiting("operator")
        assert waiting.shown["tool"] == "again" and runs.seen == []
        assert await status(b, again) == ("working", "Waiting for an approver (four eyes)")
        assert await second.deck.access.decide(waiting.id, Principal("bob", scopes=["approver"]), True) is None
        await runs.until(1)
        assert runs.seen == ["again(3)@second"]
        second.gate.set()
        result = await b.request("tasks/result", {"taskId": again})
        assert result["structuredContent"] == {"result": "again(3) done on second"}
