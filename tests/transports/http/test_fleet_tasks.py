"""Tasks across the processes of a fleet (two apps over shared backends: one in-memory record, or Redis), each
client request going to the other process than the task runs on: ``tasks/cancel`` stops the work where it runs, at
once; a task's status notifications reach the client's GET stream wherever it is open; a 2026-07-28 task's questions
are seen (``tasks/get``) and answered (``tasks/update``) through the process that does not run it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from asgi_client import AsgiClient, Response
from eras import modern
from tooldeck import Context, Deck
from tooldeck.server.backends import Backends
from transports.http.fleet_apps import KINDS, Fleet, fleet_for
from transports.http.test_eras import answer

EXT = "io.modelcontextprotocol/tasks"
ASKING = {"elicitation": {}, "extensions": {EXT: {}}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def make_deck(backends: Backends) -> Deck:
    deck = Deck("fleet-tasks", backends=backends)
    state: dict[str, Any] = {"started": asyncio.Event(), "stopped": asyncio.Event(), "gate": asyncio.Event()}
    deck.state = state  # type: ignore[attr-defined]

    @deck.tool(task="optional")
    async def held(ctx: Context) -> str:
        state["started"].set()
        try:
            await state["gate"].wait()
        except asyncio.CancelledError:
            state["stopped"].set()
            raise
        return "released"

    @deck.tool(task="optional")
    async def asks(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME_FORM, key="name")
        return f"hello {(answer.content or {}).get('name')}"

    return deck


@pytest.fixture(params=KINDS)
def fleet(request: pytest.FixtureRequest, at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Fleet:
    return fleet_for(request, at_loop_end, make_deck)


async def get_stream(client: AsgiClient, session: str) -> Response:
    stream = await client.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session,
                                                  "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert stream.status == 200
    return stream


async def statuses(stream: Response, task_id: str, until: str) -> list[str]:
    """The statuses announced for ``task_id`` on ``stream``, up to ``until``."""
    seen: list[str] = []
    async for event in stream.events(timeout=5):
        message = event.message
        if message and message.get("method") == "notifications/tasks/status" and message["params"]["taskId"] == task_id:
            seen.append(message["params"]["status"])
            if seen[-1] == until:
                return seen
    raise AssertionError(f"the stream ended before {until!r}: {seen}")


async def start_task(client: AsgiClient, session: str, name: str) -> str:
    response = await client.call(session, "start", "tools/call", {"name": name, "arguments": {}, "task": {}})
    body = await response.json()
    return str(body["result"]["task"]["taskId"])


async def test_a_cancel_through_another_process_stops_the_work_where_it_runs_and_is_announced(fleet: Fleet) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    session = await a.initialize()
    stream = await get_stream(b, session)  # the client's GET stream is open on the second process
    task_id = await start_task(a, session, "held")  # the task runs on the first
    await asyncio.wait_for(first.deck.state["started"].wait(), 5)
    assert task_id in first.deck.task_manager().running

    cancelled = await (await b.call(session, "cancel", "tasks/cancel", {"taskId": task_id})).json()
    assert cancelled["result"]["status"] == "cancelled"
    await asyncio.wait_for(first.deck.state["stopped"].wait(), 5)  # at once, not at the next lease renewal
    assert await statuses(stream, task_id, "cancelled") == ["cancelled"]
    got = await (await a.call(session, "get", "tasks/get", {"taskId": task_id})).json()
    assert got["result"]["status"] == "cancelled"
    await stream.close()


async def test_status_notifications_reach_the_stream_on_another_process(fleet: Fleet) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    session = await a.initialize()
    stream = await get_stream(b, session)
    task_id = await start_task(a, session, "held")
    await asyncio.wait_for(first.deck.state["started"].wait(), 5)
    first.deck.state["gate"].set()
    assert await statuses(stream, task_id, "completed") == ["completed"]
    result = await (await b.call(session, "result", "tasks/result", {"taskId": task_id})).json()
    assert result["result"]["structuredContent"] == {"result": "released"}
    await stream.close()


async def modern_answer(client: AsgiClient, request_id: Any, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    """A 2026-07-28 request with the tasks extension (and its headers: tasks/* mirror the task id as Mcp-Name)."""
    names = {"mcp_name": params["taskId"]} if method.startswith("tasks/") else {}
    status, body, _ = await answer(client, modern(request_id, method, params, capabilities=ASKING), **names)
    return status, body


async def modern_call(client: AsgiClient, request_id: Any, method: str, params: dict[str, Any]) -> Any:
    status, body = await modern_answer(client, request_id, method, params)
    assert status == 200, body
    return body


async def test_a_2026_task_s_questions_are_seen_and_answered_through_another_process(fleet: Fleet) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    created = await modern_call(a, 1, "tools/call", {"name": "asks", "arguments": {}})
    task_id = created["result"]["taskId"]
    manager = first.deck.task_manager()
    for _ in range(1000):  # the task runs on the first process until it asks (turns of the loop, no time)
        inputs = manager.inputs.get(task_id)
        if inputs is not None and inputs.pending:
            break
        await asyncio.sleep(0)
    got = await modern_call(b, 2, "tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "input_required"
    assert list(got["result"]["inputRequests"]) == ["name"]
    assert got["result"]["inputRequests"]["name"]["method"] == "elicitation/create"

    wrong = {"taskId": task_id, "inputResponses": {"name": {"action": "maybe"}}}
    _, refused = await modern_answer(b, 3, "tasks/update", wrong)
    assert refused["error"]["code"] == -32602 and "inputResponses.name" in refused["error"]["message"]
    accept = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    await modern_call(b, 4, "tasks/update", {"taskId": task_id, "inputResponses": accept})
    running = manager.running.get(task_id)
    if running is not None:
        await asyncio.wait_for(asyncio.shield(running), 5)
    done = await modern_call(b, 5, "tasks/get", {"taskId": task_id})
    assert done["result"]["status"] == "completed"
    assert done["result"]["result"]["structuredContent"] == {"result": "hello Ada"}


async def test_a_2026_task_cancelled_through_another_process_stops_where_it_runs(fleet: Fleet) -> None:
    first, second = await fleet.start(2)
    a, b = AsgiClient(first), AsgiClient(second)
    created = await modern_call(a, 1, "tools/call", {"name": "held", "arguments": {}})
    task_id = created["result"]["taskId"]
    await asyncio.wait_for(first.deck.state["started"].wait(), 5)
    await modern_call(b, 2, "tasks/cancel", {"taskId": task_id})
    await asyncio.wait_for(first.deck.state["stopped"].wait(), 5)  # at once, on the process running it
    got = await modern_call(a, 3, "tasks/get", {"taskId": task_id})
    assert got["result"]["status"] == "cancelled"
