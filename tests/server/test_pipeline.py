"""The call pipeline: every entry point that runs user code goes through its steps, which may await and refuse."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from helpers import client, poll_until_cancelled, sleep_until_cancelled
from tooldeck import Context, Deck, ToolError
from tooldeck.protocol.errors import RefusedError
from tooldeck.server.pipeline import Call
from tooldeck.server.request import RequestContext


def guarded_deck() -> tuple[Deck, list[tuple[str, str]]]:
    """A deck with a tool, a task tool, a resource, a template and a prompt, and an async policy that records each
    call it sees and refuses the ones named "secret"."""
    deck = Deck("guarded", task_ttl=60)
    seen: list[tuple[str, str]] = []

    @deck.tool
    def open_tool() -> str:
        return "open"

    @deck.tool(name="secret")
    def secret_tool() -> str:
        return "leaked"

    @deck.tool(name="secret_task", task="optional")
    async def secret_task() -> str:
        return "leaked"

    @deck.resource("data://secret")
    def secret_resource() -> str:
        return "leaked"

    deck.add_resource("data://static-secret", "leaked")

    @deck.resource_template("data://secret/{part}")
    def secret_template(part: str) -> str:
        return "leaked"

    @deck.prompt(name="secret")
    def secret_prompt() -> str:
        return "leaked"

    async def policy(request: RequestContext, call: Call) -> None:
        await asyncio.sleep(0)  # a policy may await (a key set, a limiter, a confirmation)
        seen.append((call.kind, call.name))
        if "secret" in call.name:
            raise RefusedError(f"{call.kind} {call.name!r} is not allowed for this principal", http_status=403)

    deck.policies.append(policy)
    return deck, seen


async def test_every_entry_point_that_runs_user_code_is_refused_by_the_policy() -> None:
    deck, seen = guarded_deck()
    async with client(deck) as c:
        assert (await c.call_tool("open_tool"))["structuredContent"] == {"result": "open"}
        entries = [
            ("tools/call", {"name": "secret", "arguments": {}}),
            ("tools/call", {"name": "secret_task", "arguments": {}, "task": {}}),
            ("resources/read", {"uri": "data://secret"}),
            ("resources/read", {"uri": "data://static-secret"}),
            ("resources/read", {"uri": "data://secret/x"}),
            ("prompts/get", {"name": "secret"}),
        ]
        for method, params in entries:
            response = await c.request_raw(method, params)
            assert response["error"]["code"] == -32000, (method, params, response)
            assert "is not allowed for this principal" in response["error"]["message"]
        assert await c.request("tasks/list", {}) == {"tasks": []}  # the refused task was never created
    assert {kind for kind, _ in seen} == {"tool", "resource", "prompt"}
    assert len(seen) == 7


async def test_a_policy_that_raises_a_tool_error_gives_an_error_result_not_a_protocol_error() -> None:
    deck = Deck("polite")

    @deck.tool
    def work() -> str:
        return "done"

    def deny(request: RequestContext, call: Call) -> None:  # a plain function works too
        raise ToolError("not during maintenance")

    deck.policies.append(deny)
    async with client(deck) as c:
        result = await c.call_tool("work")
        assert result == {"content": [{"type": "text", "text": "not during maintenance"}], "isError": True}


async def test_a_policy_sees_the_request_and_the_arguments_as_sent() -> None:
    deck = Deck("inspect")
    got: list[Any] = []

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    deck.policies.append(lambda request, call: got.append((request.method, request.revision, call.arguments)))
    async with client(deck, version="2025-06-18") as c:
        await c.call_tool("add", {"a": 1, "b": 2})
    assert got == [("tools/call", "2025-06-18", {"a": 1, "b": 2})]


async def test_sanitisers_and_auditors_see_every_result() -> None:
    deck = Deck("audited")
    audit: list[tuple[str, bool]] = []

    @deck.tool
    def shout(text: str) -> str:
        return text.upper()

    def redact(request: RequestContext, call: Call, result: dict[str, Any]) -> dict[str, Any]:
        return {**result, "content": [{"type": "text", "text": "[redacted]"}]}

    deck.pipeline.sanitisers.append(redact)
    deck.pipeline.auditors.append(lambda request, call, result: audit.append((call.name, result["isError"])))
    async with client(deck) as c:
        result = await c.call_tool("shout", {"text": "hi"})
        assert result["content"] == [{"type": "text", "text": "[redacted]"}]
        await c.call_tool("shout", {"text": 3})  # invalid arguments: an isError result, audited too
    assert audit == [("shout", False), ("shout", True)]


# --- run: sync tools, time-outs ----------------------------------------------------------------------------------


async def test_a_blocked_sync_tool_never_stalls_other_requests() -> None:
    deck = Deck("blocking")
    started, release, returned = threading.Event(), threading.Event(), threading.Event()

    @deck.tool
    def block() -> str:
        started.set()
        release.wait(10)  # a sync tool that blocks until the test releases it
        returned.set()
        return "unblocked"

    async with client(deck) as c:
        call = asyncio.ensure_future(c.call_tool("block"))
        assert await asyncio.to_thread(started.wait, 10)
        assert await c.request("ping") == {}
        # Had the tool held the event loop, ping could only have been answered after it returned: no clock needed.
        assert not returned.is_set() and not call.done()
        release.set()
        assert (await call)["structuredContent"] == {"result": "unblocked"}


async def test_an_async_tool_past_its_timeout_is_cancelled_and_says_so() -> None:
    deck = Deck("timed")
    cancelled = asyncio.Event()

    @deck.tool(timeout=0.05)
    async def slow() -> str:
        return await sleep_until_cancelled(cancelled)

    async with client(deck) as c:
        result = await c.call_tool("slow")
        assert result == {
            "content": [{"type": "text", "text": "Tool 'slow' timed out after 0.05 s and was stopped"}],
            "isError": True,
        }
        assert cancelled.is_set()


async def test_a_sync_tool_past_the_deck_timeout_ends_and_its_late_result_is_dropped_and_logged() -> None:
    deck = Deck("timed", tool_timeout=0.05)
    release = threading.Event()
    logged = LogWaiter("tooldeck.workers", "dropped")

    @deck.tool
    def stuck() -> str:
        release.wait(10)
        return "late"

    try:
        async with client(deck) as c:
            result = await c.call_tool("stuck")
            assert result["isError"] and "timed out after 0.05 s" in result["content"][0]["text"]
            release.set()
            assert await asyncio.to_thread(logged.event.wait, 10)  # the late result reached the loop, and was dropped
            assert await c.request("ping") == {}
            assert [m for m in c.unrouted if "late" in str(m)] == []  # nothing followed the time-out's answer
        assert "stuck" in logged.message
    finally:
        logged.close()


class LogWaiter(logging.Handler):
    """Sets ``event`` when a record containing ``text`` reaches ``logger`` (from any thread)."""

    def __init__(self, logger: str, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.event = threading.Event()
        self.message = ""
        self.logger = logging.getLogger(logger)
        self.logger.addHandler(self)
        self.level_before = self.logger.level
        self.logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.message = record.getMessage()
            self.event.set()

    def close(self) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)
        super().close()


async def test_a_tool_timeout_overrides_the_deck_default() -> None:
    deck = Deck("timed", tool_timeout=0.01)

    @deck.tool(timeout=30)
    async def patient() -> str:
        await asyncio.sleep(0.05)
        return "waited"

    async with client(deck) as c:
        assert (await c.call_tool("patient"))["structuredContent"] == {"result": "waited"}


async def test_cancellation_reaches_a_sync_tool_through_its_context() -> None:
    deck = Deck("cancel")
    started, saw = threading.Event(), threading.Event()

    @deck.tool
    def poll(ctx: Context) -> str:
        return poll_until_cancelled(ctx, started, saw)

    async with client(deck) as c:
        call = asyncio.ensure_future(c.request_raw("tools/call", {"name": "poll", "arguments": {}}, id="p"))
        assert await asyncio.to_thread(started.wait, 10)
        c.notify("notifications/cancelled", {"requestId": "p"})
        assert await asyncio.to_thread(saw.wait, 10)
        assert not call.done()  # no response for a cancelled request
        call.cancel()


async def test_a_tool_error_refusal_of_a_task_call_is_an_error_response_and_creates_no_task() -> None:
    deck = Deck("tasks", task_ttl=60)

    @deck.tool(task="optional")
    async def job() -> str:
        return "done"

    def deny(request: RequestContext, call: Call) -> None:
        raise ToolError("no jobs today")

    deck.policies.append(deny)
    async with client(deck) as c:
        response = await c.request_raw("tools/call", {"name": "job", "arguments": {}, "task": {}})
        assert response["error"] == {"code": -32000, "message": "no jobs today"}
        assert await c.request("tasks/list", {}) == {"tasks": []}


async def test_a_tool_error_refusal_of_a_resource_or_prompt_is_a_refusal_not_an_internal_error() -> None:
    deck, _ = guarded_deck()
    deck.policies.clear()

    def deny(request: RequestContext, call: Call) -> None:
        raise ToolError(f"{call.name} is closed")

    deck.policies.append(deny)
    async with client(deck) as c:
        for method, params, name in [
            ("resources/read", {"uri": "data://static-secret"}, "data://static-secret"),
            ("resources/read", {"uri": "data://secret"}, "data://secret"),
            ("prompts/get", {"name": "secret"}, "secret"),
        ]:
            response = await c.request_raw(method, params)
            assert response["error"] == {"code": -32000, "message": f"{name} is closed"}, method


async def test_a_sync_tools_progress_arrives_before_its_result_on_every_call() -> None:
    # The worker pool waits for a lone sync call instead of going back to the loop; what the tool sent meanwhile
    # through its Context must still reach the client first, on the first call (a new thread) and the later ones.
    deck = Deck("progress")

    @deck.tool
    def steps(ctx: Context) -> str:
        ctx.report_progress(1, 2)
        ctx.info("halfway")
        return "done"

    async with client(deck) as c:
        for call in range(4):
            c.notifications.clear()
            result = await c.call_tool("steps", {}, progressToken=call)
            assert result["structuredContent"] == {"result": "done"}
            assert [n["method"] for n in c.notifications] == ["notifications/progress", "notifications/message"], call


async def test_a_refused_caller_is_told_so_before_its_prompt_arguments_are_checked() -> None:
    deck, _ = guarded_deck()
    async with client(deck) as c:
        response = await c.request_raw("prompts/get", {"name": "secret", "arguments": {"nope": "1"}})
        assert response["error"]["code"] == -32000 and "is not allowed" in response["error"]["message"]
