"""tools/call end to end through the in-process transport: results, content, errors, context, concurrency."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

import pytest

from helpers import client, sleep_until_cancelled
from tooldeck import Audio, Context, Deck, EmbeddedResource, Image, ResourceLink, Text, ToolError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


@dataclass
class Point:
    x: float
    y: float


class Weather(TypedDict):
    temperature: float
    conditions: str


class Color(Enum):
    RED = "red"
    BLUE = "blue"


def make_deck(**options: Any) -> Deck:
    deck = Deck("calls", **options)

    @deck.tool
    async def echo(text: str) -> str:
        return text

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    @deck.tool
    def weather(city: str) -> Weather:
        return {"temperature": 21.5, "conditions": f"sunny in {city}"}

    @deck.tool
    def midpoint(a: Point, b: Point) -> Point:
        return Point((a.x + b.x) / 2, (a.y + b.y) / 2)

    @deck.tool
    def paint(color: Color) -> str:
        assert isinstance(color, Color)
        return color.name

    @deck.tool
    def liar() -> Weather:
        return {"temperature": "hot", "conditions": 3}  # type: ignore[typeddict-item]

    @deck.tool
    def broken() -> str:
        raise RuntimeError("database password is hunter2")

    @deck.tool
    def refuse(reason: str) -> str:
        raise ToolError(f"cannot do that: {reason}")

    @deck.tool
    def everything():  # type: ignore[no-untyped-def]  # no annotation: unstructured content
        return [
            "plain text",
            Text("annotated", annotations={"audience": ["user"], "priority": 0.5}),
            Image(PNG, "image/png", annotations={"last_modified": "2025-01-12T15:00:58Z"}),
            Audio(b"RIFF....WAVE", "audio/wav"),
            ResourceLink("file:///tmp/report.txt", "report", mime_type="text/plain", size=12),
            EmbeddedResource("test://doc", text="hello", mime_type="text/plain"),
            EmbeddedResource("test://bin", blob=b"\x00\x01", mime_type="application/octet-stream"),
        ]

    @deck.tool
    def nothing() -> None:
        return None

    return deck


async def test_scalar_results_are_wrapped_and_mirrored_as_text() -> None:
    async with client(make_deck()) as c:
        assert await c.call_tool("echo", {"text": "hi"}) == {
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"result": "hi"},
            "isError": False,
        }
        result = await c.call_tool("add", {"a": 2, "b": 3})
        assert result["structuredContent"] == {"result": 5}
        assert result["content"] == [{"type": "text", "text": "5"}]


async def test_object_results_are_structured_with_json_text() -> None:
    async with client(make_deck()) as c:
        result = await c.call_tool("weather", {"city": "Oslo"})
        assert result["structuredContent"] == {"temperature": 21.5, "conditions": "sunny in Oslo"}
        assert result["content"] == [{"type": "text", "text": '{"temperature":21.5,"conditions":"sunny in Oslo"}'}]


async def test_dataclass_and_enum_arguments_are_converted() -> None:
    async with client(make_deck()) as c:
        result = await c.call_tool("midpoint", {"a": {"x": 0, "y": 0}, "b": {"x": 2, "y": 4}})
        assert result["structuredContent"] == {"x": 1.0, "y": 2.0}
        assert (await c.call_tool("paint", {"color": "blue"}))["structuredContent"] == {"result": "BLUE"}


async def test_output_that_violates_the_output_schema_is_an_error_not_a_lie() -> None:
    async with client(make_deck()) as c:
        result = await c.call_tool("liar")
        assert result["isError"] is True
        assert "structuredContent" not in result
        text = result["content"][0]["text"]
        assert "does not match its outputSchema" in text
        assert "$.temperature" in text and "$.conditions" in text


async def test_every_content_type() -> None:
    async with client(make_deck()) as c:
        result = await c.call_tool("everything")
        assert "structuredContent" not in result
        assert result["content"] == [
            {"type": "text", "text": "plain text"},
            {"type": "text", "text": "annotated", "annotations": {"audience": ["user"], "priority": 0.5}},
            {
                "type": "image",
                "data": "iVBORw0KGgoAAAAAAAAAAA==",
                "mimeType": "image/png",
                "annotations": {"lastModified": "2025-01-12T15:00:58Z"},
            },
            {"type": "audio", "data": "UklGRi4uLi5XQVZF", "mimeType": "audio/wav"},
            {
                "type": "resource_link",
                "uri": "file:///tmp/report.txt",
                "name": "report",
                "mimeType": "text/plain",
                "size": 12,
            },
            {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "hello"}},
            {
                "type": "resource",
                "resource": {"uri": "test://bin", "mimeType": "application/octet-stream", "blob": "AAE="},
            },
        ]


async def test_none_result_is_empty_content() -> None:
    async with client(make_deck()) as c:
        assert await c.call_tool("nothing") == {"content": [], "isError": False}


# --- errors -------------------------------------------------------------------------------------------------------


async def test_unknown_tool_is_a_protocol_error() -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("tools/call", {"name": "nope", "arguments": {}})
        assert response["error"] == {"code": -32602, "message": "Unknown tool: nope"}


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({}, '"name"'),
        ({"name": 3}, '"name"'),
        ({"name": "echo", "arguments": [1]}, '"arguments" must be an object'),
        ({"name": "echo", "arguments": {"text": "x"}, "_meta": []}, '"_meta"'),
        ({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": 1.5}}, "progressToken"),
    ],
)
async def test_malformed_calls_are_32602(params: dict[str, Any], text: str) -> None:
    async with client(make_deck()) as c:
        response = await c.request_raw("tools/call", params)
        assert response["error"]["code"] == -32602
        assert text in response["error"]["message"]


async def test_invalid_arguments_name_each_field_and_why() -> None:
    async with client(make_deck()) as c:
        result = await c.call_tool("add", {"a": "one", "c": 3})
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert text.startswith("Invalid arguments for tool 'add': ")
        assert "$.a" in text  # wrong type
        assert "'b'" in text  # missing
        assert "'c'" in text  # unexpected


MASKED = re.compile(
    r"Tool 'broken' failed with an internal error \(ref ([0-9a-f]{8})\); details are in the server log\."
)


async def test_tool_exceptions_are_masked_and_the_log_has_the_traceback_with_the_same_ref(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="tooldeck")
    async with client(make_deck()) as c:
        results = [await c.call_tool("broken") for _ in range(2)]
    refs = []
    for result in results:
        assert result["isError"] is True and "structuredContent" not in result
        (content,) = result["content"]
        match = MASKED.fullmatch(content["text"])
        assert match is not None, content["text"]
        refs.append(match.group(1))
    assert refs[0] != refs[1]  # each failure has its own reference
    records = [r for r in caplog.records if r.name.startswith("tooldeck") and r.levelno == logging.ERROR]
    assert [re.findall(r"\(ref ([0-9a-f]{8})\)", r.getMessage()) for r in records] == [[ref] for ref in refs]
    for record in records:
        assert record.exc_info is not None
        assert record.exc_info[0] is RuntimeError and str(record.exc_info[1]) == "database password is hunter2"
        assert "Traceback" in caplog.handler.format(record)


async def test_unmasked_errors_show_the_exception(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="tooldeck")
    async with client(make_deck(mask_errors=False)) as c:
        result = await c.call_tool("broken")
    assert result == {
        "content": [
            {"type": "text", "text": "Error executing tool 'broken': RuntimeError: database password is hunter2"}
        ],
        "isError": True,
    }
    (record,) = [r for r in caplog.records if r.name.startswith("tooldeck")]
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError  # the log still has the traceback


async def test_tool_error_text_reaches_the_model() -> None:
    async with client(make_deck()) as c:
        assert await c.call_tool("refuse", {"reason": "no"}) == {
            "content": [{"type": "text", "text": "cannot do that: no"}],
            "isError": True,
        }


# --- context: progress, logging, cancellation ---------------------------------------------------------------------


def context_deck() -> tuple[Deck, dict[str, Any]]:
    deck = Deck("ctx")
    state: dict[str, Any] = {"started": asyncio.Event(), "cancelled": asyncio.Event(), "release": threading.Event()}

    @deck.tool
    async def steps(n: int, ctx: Context) -> str:
        for i in range(1, n + 1):
            await ctx.report_progress(i, n, f"step {i}")
            await ctx.report_progress(i, n)  # not greater: dropped
        await ctx.log("info", "done stepping", logger="steps")
        await ctx.debug("details")
        return "ok"

    @deck.tool
    def sync_steps(n: int, ctx: Context) -> str:
        for i in range(n):
            ctx.report_progress(i + 0.5)
            ctx.warning({"step": i})
        return "ok"

    @deck.tool
    async def forever(ctx: Context) -> str:
        return await sleep_until_cancelled(state["cancelled"], state["started"])

    @deck.tool
    def blocking(ctx: Context) -> str:
        state["release"].wait(10)
        return "released"

    return deck, state


async def test_progress_is_sent_only_with_a_token_and_always_increases() -> None:
    deck, _ = context_deck()
    async with client(deck) as c:
        await c.call_tool("steps", {"n": 3})
        assert [n["method"] for n in c.notifications] == ["notifications/message"]
        c.notifications.clear()
        await c.call_tool("steps", {"n": 3}, progressToken="tok")
        progress = [n["params"] for n in c.notifications if n["method"] == "notifications/progress"]
        assert progress == [
            {"progressToken": "tok", "progress": 1, "total": 3, "message": "step 1"},
            {"progressToken": "tok", "progress": 2, "total": 3, "message": "step 2"},
            {"progressToken": "tok", "progress": 3, "total": 3, "message": "step 3"},
        ]


async def test_log_notifications_follow_the_level() -> None:
    deck, _ = context_deck()
    async with client(deck) as c:
        await c.call_tool("steps", {"n": 1})
        logs = [n["params"] for n in c.notifications if n["method"] == "notifications/message"]
        assert logs == [{"level": "info", "data": "done stepping", "logger": "steps"}]  # debug is below "info"
        c.notifications.clear()
        await c.request("logging/setLevel", {"level": "debug"})
        await c.call_tool("steps", {"n": 1})
        assert [n["params"]["level"] for n in c.notifications if n["method"] == "notifications/message"] == [
            "info",
            "debug",
        ]
        c.notifications.clear()
        await c.request("logging/setLevel", {"level": "error"})
        await c.call_tool("steps", {"n": 1})
        assert c.notifications == []


async def test_sync_tools_report_through_the_loop_thread() -> None:
    deck, _ = context_deck()
    async with client(deck) as c:
        result = await c.call_tool("sync_steps", {"n": 2}, progressToken=5)
        assert result["structuredContent"] == {"result": "ok"}
        kinds = [(n["method"], n["params"].get("progress", n["params"].get("data"))) for n in c.notifications]
        assert kinds == [
            ("notifications/progress", 0.5),
            ("notifications/message", {"step": 0}),
            ("notifications/progress", 1.5),
            ("notifications/message", {"step": 1}),
        ]


async def test_cancellation_stops_the_tool_and_no_response_is_sent() -> None:
    deck, state = context_deck()
    async with client(deck) as c:
        call = asyncio.ensure_future(c.request_raw("tools/call", {"name": "forever", "arguments": {}}, id="slow"))
        await asyncio.wait_for(state["started"].wait(), 5)
        c.notify("notifications/cancelled", {"requestId": "slow", "reason": "user gave up"})
        await asyncio.wait_for(state["cancelled"].wait(), 5)  # the tool saw CancelledError
        assert await c.request("ping") == {}
        assert not call.done()
        assert c.unrouted == []
        assert c.session.in_flight == {}
        call.cancel()


async def test_cancelling_a_finished_request_is_harmless() -> None:
    deck, _ = context_deck()
    async with client(deck) as c:
        await c.call_tool("steps", {"n": 1})
        c.notify("notifications/cancelled", {"requestId": 1})
        assert await c.request("ping") == {}


async def test_reusing_an_in_flight_id_is_refused() -> None:
    deck, state = context_deck()
    async with client(deck) as c:
        first = asyncio.ensure_future(c.request_raw("tools/call", {"name": "forever", "arguments": {}}, id=77))
        await asyncio.wait_for(state["started"].wait(), 5)
        c.checker.sent({"jsonrpc": "2.0", "id": 77, "method": "ping"})
        c.session.receive({"jsonrpc": "2.0", "id": 77, "method": "ping"})
        duplicate = await asyncio.wait_for(first, 5)  # the refusal carries the same id
        assert duplicate["error"]["code"] == -32600
        assert "already in use" in duplicate["error"]["message"]


async def test_sync_tools_do_not_block_the_loop() -> None:
    deck, state = context_deck()
    async with client(deck) as c:
        call = asyncio.ensure_future(c.call_tool("blocking"))
        assert await asyncio.wait_for(c.request("ping"), 2) == {}
        state["release"].set()
        assert (await call)["structuredContent"] == {"result": "released"}


# --- concurrency ---------------------------------------------------------------------------------------------------


async def test_async_tools_run_concurrently() -> None:
    deck = Deck("concurrent")
    arrived: list[int] = []
    everyone = asyncio.Event()

    @deck.tool
    async def meet(count: int) -> int:
        arrived.append(len(arrived))
        if len(arrived) == count:
            everyone.set()
        await everyone.wait()  # returns only once all `count` calls are running at the same time
        return count

    async with client(deck) as c:
        calls = asyncio.gather(*(c.call_tool("meet", {"count": 32}) for _ in range(32)))
        results = await asyncio.wait_for(calls, 10)
        assert [r["structuredContent"] for r in results] == [{"result": 32}] * 32


async def test_sync_tools_run_concurrently_in_the_worker_pool() -> None:
    deck = Deck("threads")
    barrier = threading.Barrier(32, timeout=10)

    @deck.tool
    def meet() -> int:
        return barrier.wait()  # BrokenBarrierError (an error result) unless all 32 are in worker threads at once

    async with client(deck) as c:
        results = await asyncio.gather(*(c.call_tool("meet") for _ in range(32)))
        assert sorted(r["structuredContent"]["result"] for r in results) == list(range(32)), results[0]


async def test_max_threads_bounds_the_sync_tools_running_at_once() -> None:
    n = 2
    deck = Deck("bounded", max_threads=n)
    started = [threading.Event() for _ in range(n + 1)]
    release = [threading.Event() for _ in range(n + 1)]
    worker: dict[int, int] = {}

    @deck.tool
    def hold(i: int) -> int:
        worker[i] = threading.get_ident()
        started[i].set()
        release[i].wait(10)
        return i

    @deck.tool
    async def mark() -> str:
        return "marked"

    async with client(deck) as c:
        calls = [asyncio.ensure_future(c.call_tool("hold", {"i": i})) for i in range(n)]
        for i in range(n):
            assert await asyncio.to_thread(started[i].wait, 10)
        calls.append(asyncio.ensure_future(c.call_tool("hold", {"i": n})))
        # Sent after call n+1 and answered on the loop: by its reply, call n+1 has been handed to the pool.
        await asyncio.wait_for(asyncio.ensure_future(c.call_tool("mark")), 10)
        assert not started[n].is_set()  # every worker is held
        release[0].set()
        assert await asyncio.to_thread(started[n].wait, 10)
        assert worker[n] == worker[0]  # it ran on the worker call 0 gave back: the pool has no other
        for event in release:
            event.set()
        results = await asyncio.gather(*calls)
        assert [r["structuredContent"] for r in results] == [{"result": i} for i in range(n + 1)]


async def test_list_changed_is_sent_when_tools_change_while_serving() -> None:
    deck = make_deck()
    async with client(deck) as c:
        deck.add_tool(lambda: "new", name="fresh")
        deck.add_tool(lambda: "newer", name="fresher")
        note = await c.wait_for_notification("notifications/tools/list_changed")
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        await c.request("ping")
        assert [n for n in c.notifications if n["method"].endswith("list_changed")] == []  # one per burst
        assert "fresher" in [t["name"] for t in await c.list_tools()]
        deck.remove_tool("fresh")
        await c.wait_for_notification("notifications/tools/list_changed")
        assert "fresh" not in [t["name"] for t in await c.list_tools()]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
async def test_older_revisions_are_served_with_their_schema(version: str) -> None:
    async with client(make_deck(), version=version) as c:
        assert c.initialize_result is not None
        assert c.initialize_result["protocolVersion"] == version
        await c.list_tools()
        await c.call_tool("weather", {"city": "Rome"})
        await c.call_tool("add", {"a": 1})
