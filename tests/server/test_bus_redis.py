"""``RedisBus`` across processes: a publication reaches other real processes, in order, and their answers come back;
a server announces its changes to sessions that another server holds; a cancellation posted to one app stops the
request another app runs; and a 2026-07-28 task run by one deck is heard on a listen stream another deck holds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import fleet_peer
from asgi_client import AsgiClient
from helpers import adder_deck, client, sleep_until_cancelled
from server.test_stateless import Driver
from server.test_subscriptions import ACK, cancel, listen, next_messages, tagged
from tooldeck import Context, Deck
from tooldeck.engine.connection import Engine
from tooldeck.engine.hub import Hub
from tooldeck.security.principal import Principal
from tooldeck.server.backends import Backends
from tooldeck.server.bus_redis import RedisBus
from tooldeck.server.state_redis import RedisSessionStore
from tooldeck.tasks.redis import RedisTaskStore
from tooldeck.transports.http import HttpApp


async def test_a_publication_reaches_other_processes_and_their_answers_come_back(engine: Engine) -> None:
    peers = [await fleet_peer.start(engine.name, "echo") for _ in range(2)]
    try:
        await talk(engine, peers)
    finally:
        for peer in peers:
            if peer.returncode is None:
                peer.kill()
                await peer.wait()


async def talk(engine: Engine, peers: list[asyncio.subprocess.Process]) -> None:
    bus = RedisBus(engine)
    answers: list[Any] = []
    all_in = asyncio.Event()

    def heard(payload: Any) -> None:
        answers.append(payload)
        if len(answers) == 2 * 50:
            all_in.set()

    bus.subscribe("pong", heard)
    await bus.ready()
    for n in range(50):
        bus.publish("ping", {"n": n, "text": "é ✓"})
    async with asyncio.timeout(30):
        await all_in.wait()
        pids = {peer.pid for peer in peers}
        for pid in pids:  # each process answered every publication once, in the order they were published
            assert [a["got"] for a in answers if a["from"] == pid] == [{"n": n, "text": "é ✓"} for n in range(50)]
        assert {a["from"] for a in answers} == pids
        bus.publish("stop", None)
        assert [await peer.wait() for peer in peers] == [0, 0]


async def test_a_change_on_a_process_with_no_session_reaches_the_sessions_of_another(
    engines: Callable[..., Engine],
) -> None:
    # Deck A serves no one: with a MemoryBus it would skip announcing (no subscriber here); on a shared bus another
    # process may have listeners, so A announces, and B's client is told.
    deck_a = adder_deck("a", backends=Backends(bus=RedisBus(engines())))
    deck_b = adder_deck("b", backends=Backends(bus=RedisBus(engines())))
    async with client(deck_b) as c:
        await cast(RedisBus, deck_b.bus).ready()
        deck_a.add_tool(lambda: "new", name="new")
        note = await c.wait_for_notification("notifications/tools/list_changed", timeout=10)
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_a_cancellation_posted_to_another_app_reaches_the_request_through_redis(
    engines: Callable[..., Engine],
) -> None:
    # Two apps as two processes would have them: each its own engine (connections, hub), one Redis between them.
    started, cancelled = asyncio.Event(), asyncio.Event()

    def deck_with_a_slow_tool(engine: Engine) -> Deck:
        deck = adder_deck("slow", backends=Backends(bus=RedisBus(engine), sessions=RedisSessionStore(engine)))

        @deck.tool
        async def slow(ctx: Context) -> str:
            return await sleep_until_cancelled(cancelled, started)

        return deck

    first_engine, second_engine = engines(), engines()
    first = HttpApp(deck_with_a_slow_tool(first_engine))
    second = HttpApp(deck_with_a_slow_tool(second_engine))
    session = await AsgiClient(first).initialize()
    caller = AsgiClient(first)
    caller.checker.expect_no_messages()  # the cancelled call is answered by no message at all
    call = asyncio.ensure_future(
        caller.call(session, "long", "tools/call", {"name": "slow", "arguments": {}}, accept="application/json")
    )
    await asyncio.wait_for(started.wait(), 10)
    await Hub.of(first_engine).ready()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
    other = AsgiClient(second)
    other.checker.expect_no_messages()
    assert (await other.post(note, session=session)).status == 202  # the second app rebuilt the session from Redis
    await asyncio.wait_for(cancelled.wait(), 10)
    response = await asyncio.wait_for(call, 10)
    assert response.status == 202  # cancelled: no JSON-RPC response, as the spec asks
    await first.aclose()
    await second.aclose()


async def test_a_2026_task_run_by_one_deck_is_heard_on_a_listen_stream_another_deck_holds(
    engines: Callable[..., Engine],
) -> None:
    # Two decks as two processes: one Redis between them for the bus and the tasks. The task runs on the first; the
    # client's listen stream for it is open on the second, which hears each change as JSON through Redis.
    release = asyncio.Event()

    def deck_on(engine: Engine) -> Deck:
        deck = Deck("tasks", version="1.0.0", backends=Backends(bus=RedisBus(engine), tasks=RedisTaskStore(engine)))

        @deck.tool(task="optional")
        async def double(n: int) -> int:
            await release.wait()
            return 2 * n

        return deck

    first_engine, second_engine = engines(), engines()
    runner, holder = deck_on(first_engine), deck_on(second_engine)
    ada = Principal("ada")
    caller, listener = Driver(runner, principal=ada), Driver(holder, principal=ada)
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    try:
        created = await caller.request(1, "tools/call", {"name": "double", "arguments": {"n": 21}}, capabilities=tasks)
        task_id = created["result"]["taskId"]
        start = len(listener.out)
        await listen(listener, "L", {"taskIds": [task_id]}, capabilities=tasks)
        working = (await next_messages(listener, start, 2))[1]
        assert listener.out[start]["method"] == ACK
        assert working["method"] == "notifications/tasks" and working["params"]["status"] == "working"
        await Hub.of(second_engine).ready()  # the second deck hears the first's publications from now on
        release.set()
        done = (await next_messages(listener, start, 3))[2]
        record = await holder.task_manager().store.get(task_id, holder.task_manager().clock())
        assert record is not None and record.status == "completed"
        assert done == tagged("notifications/tasks", "L", {
            "taskId": task_id, "status": "completed", "createdAt": working["params"]["createdAt"],
            "lastUpdatedAt": record.to_modern()["lastUpdatedAt"], "ttlMs": record.ttl_ms,
            "result": {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42},
                       "isError": False, "resultType": "complete"},
        })  # fmt: skip
        cancel(listener, "L")
    finally:
        await runner.task_manager().aclose()
        await holder.task_manager().aclose()
