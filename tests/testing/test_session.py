"""The async testing client (``async with Client(deck)``) on the test's own loop: the same features, awaited, with
async callbacks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tooldeck import Context, Deck
from tooldeck.testing import AsyncClient, Client, Elicitation, Progress, SamplingRequest, ToolCallError


async def test_async_with_gives_awaitable_methods_on_the_test_s_own_loop(deck: Deck) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    @deck.tool
    async def where() -> str:
        loops.append(asyncio.get_running_loop())
        return "here"

    async with Client(deck) as client:
        assert isinstance(client, AsyncClient)
        assert (await client.call_tool("where")).data == "here"
        assert (await client.call_tool("add", {"a": 20, "b": 22})).data == 42
        assert "forecast" in [tool["name"] for tool in await client.list_tools()]
    assert loops == [asyncio.get_running_loop()]


async def test_async_callbacks_answer_elicitation_sampling_and_progress(deck: Deck) -> None:
    progress: list[Progress] = []

    async def nights(question: Elicitation) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"nights": 4}

    async def model(request: SamplingRequest) -> str:
        await asyncio.sleep(0)
        return f"an answer to {request.text!r}"

    async def on_progress(update: Progress) -> None:
        await asyncio.sleep(0)
        progress.append(update)

    async with Client(deck, elicitation=nights, sampling=model) as client:
        booked = await client.call_tool("book", {"city": "Rome"})
        assert booked.data == "4 nights at an answer to 'Suggest a hotel in Rome' (tooldeck.testing)"
        result = await client.call_tool("forecast", {"city": "Rome"}, progress=on_progress)
    assert progress == result.progress == [Progress(1, 2, "looking"), Progress(2, 2, "done")]


async def test_an_async_callback_s_failure_is_raised_at_the_call(deck: Deck) -> None:
    async def broken(question: Elicitation) -> dict[str, Any]:
        raise LookupError("no such guest")

    async with Client(deck, elicitation=broken) as client:
        with pytest.raises(LookupError, match="no such guest"):
            await client.call_tool("book", {"city": "Rome"})


async def test_tasks_and_errors_awaited(deck: Deck, signals: Any) -> None:
    async with Client(deck) as client:
        started = await client.start_task("render", {"scene": "outro"})
        result = await client.task_result(started.task_id)
        assert (result.data, result.logs[0].data) == ("video of outro", "rendering outro")
        assert [task.status for task in await client.list_tasks()] == ["completed"]
        with pytest.raises(ToolCallError, match="refused: because"):
            await client.call_tool("refuse", {"reason": "because"})
        hanging = await client.start_task("hang")
        assert (await client.cancel_task(hanging.task_id)).status == "cancelled"
    assert signals.cancelled.is_set()


async def test_notifications_and_timeouts_awaited(deck: Deck, signals: Any) -> None:
    async with Client(deck, timeout=0.2) as client:
        deck.remove_tool("crash")
        note = await client.wait_for_notification("notifications/tools/list_changed")
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        with pytest.raises(TimeoutError, match="tools/call got no answer within 0.2 s"):
            await client.call_tool("hang")
        await asyncio.wait_for(asyncio.to_thread(signals.cancelled.wait, 5), 6)
        assert signals.cancelled.is_set()
        await client.ping()


async def test_a_sync_client_works_inside_an_async_test_too(deck: Deck) -> None:
    with Client(deck) as client:  # its own loop, in its own thread: the test's loop is only blocked meanwhile
        assert client.call_tool("add", {"a": 1, "b": 2}).data == 3


async def test_older_revisions_and_extra_capabilities(deck: Deck) -> None:
    @deck.tool
    def revision(ctx: Context) -> str:
        return str(ctx.request.revision)

    async with Client(deck, protocol_version="2025-03-26", capabilities={"experimental": {"x": {}}}) as client:
        assert client.initialize_result["protocolVersion"] == "2025-03-26"
        result = await client.call_tool("revision")
        assert (result.text, result.data) == ("2025-03-26", None)  # no structuredContent before 2025-06-18
        assert client.session.client_capabilities == {"experimental": {"x": {}}}
