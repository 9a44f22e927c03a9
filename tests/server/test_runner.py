"""Resume: a coroutine started by hand continues correctly inside a real task (results, errors, cancellation)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tooldeck.server.runner import Resume


def start(coro: Any) -> Any:
    try:
        return coro.send(None)
    except StopIteration:  # pragma: no cover - these test coroutines always wait first
        raise AssertionError("expected the coroutine to wait") from None


async def waits_then_returns(gate: asyncio.Future[int]) -> int:
    first = await gate
    await asyncio.sleep(0)
    return first + 1


async def test_continues_to_the_result() -> None:
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    coro = waits_then_returns(gate)
    task = asyncio.ensure_future(Resume(coro, start(coro)))
    gate.set_result(41)
    assert await task == 42


async def test_errors_propagate() -> None:
    async def fails(gate: asyncio.Future[None]) -> None:
        await gate
        raise ValueError("boom")

    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    coro = fails(gate)
    task = asyncio.ensure_future(Resume(coro, start(coro)))
    gate.set_result(None)
    with pytest.raises(ValueError, match="boom"):
        await task


async def test_cancellation_reaches_the_coroutine() -> None:
    seen: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    coro = forever()
    task = asyncio.ensure_future(Resume(coro, start(coro)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


async def test_a_coroutine_may_swallow_a_throw_and_go_on() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0)
            return "finished anyway"
        return "never"

    coro = stubborn()
    task = asyncio.ensure_future(Resume(coro, start(coro)))
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "finished anyway"


# --- the runner's contract ---------------------------------------------------------------------------------------

from tooldeck import Deck  # noqa: E402
from tooldeck.protocol.errors import InvalidParamsError  # noqa: E402
from tooldeck.protocol.jsonrpc import Response  # noqa: E402
from tooldeck.server.request import RequestContext, Work  # noqa: E402
from tooldeck.server.runner import Runner  # noqa: E402


class Replies(list[Any]):
    dropped = 0

    def drop(self) -> None:
        self.dropped += 1


def request(request_id: Any = 1) -> RequestContext:
    return RequestContext.standalone(Deck("r"), None, request_id, "x", {}, "2025-11-25")  # type: ignore[arg-type]


async def test_own_work_that_does_not_wait_is_answered_inside_start_without_a_task() -> None:
    runner = Runner()

    async def quick() -> dict[str, Any]:
        return {"ok": True}

    replies = Replies()
    assert runner.start(request(), replies.append, Work(quick(), own=True)) is None
    assert replies == [{"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}]
    assert runner.in_flight == {}


async def test_own_work_that_waits_continues_in_a_task() -> None:
    runner = Runner()
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waits() -> dict[str, Any]:
        return {"n": await gate}

    replies = Replies()
    runner.start(request(), replies.append, Work(waits(), own=True))
    assert replies == [] and 1 in runner.in_flight
    gate.set_result(3)
    await runner.in_flight[1].task  # type: ignore[misc]
    assert replies == [{"jsonrpc": "2.0", "id": 1, "result": {"n": 3}}]


async def test_inline_work_is_handed_back_to_await_in_the_callers_task() -> None:
    runner = Runner()

    async def work() -> dict[str, Any]:
        assert asyncio.current_task() is me
        return {}

    me = asyncio.current_task()
    replies = Replies()
    awaitable = runner.start(request(), replies.append, Work(work()), inline=True)
    assert awaitable is not None and replies == []
    await awaitable
    assert replies == [{"jsonrpc": "2.0", "id": 1, "result": {}}]

    async def streams() -> dict[str, Any]:
        assert asyncio.current_task() is not me
        return {"streamed": True}

    streaming = runner.start(request(2), replies.append, Work(streams(), streams=True), inline=True)
    assert streaming is None  # work that streams always gets a task of its own
    await runner.in_flight[2].task  # type: ignore[misc]
    assert replies[-1] == {"jsonrpc": "2.0", "id": 2, "result": {"streamed": True}}


async def test_a_cancelled_request_is_never_answered() -> None:
    runner = Runner()
    started = asyncio.Event()

    async def forever() -> dict[str, Any]:
        started.set()
        await asyncio.sleep(60)
        return {}

    replies = Replies()
    runner.start(request(), replies, Work(forever()))
    await started.wait()
    flight = runner.cancel(1)
    assert flight is not None and flight.request.cancelled and replies.dropped == 1
    await asyncio.wait([flight.task])  # type: ignore[list-item]
    assert replies == [] and runner.cancel(1) is None


async def test_failures_are_answered_by_their_kind(caplog: Any) -> None:
    runner = Runner()

    async def invalid() -> dict[str, Any]:
        raise InvalidParamsError("Invalid params: no")

    async def bug() -> dict[str, Any]:
        raise RuntimeError("bug")

    replies = Replies()
    runner.start(request(1), replies.append, Work(invalid(), own=True))
    runner.start(request(2), replies.append, Work(bug(), own=True))
    assert replies == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid params: no"}},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error"}},
    ]
    assert "request 2 failed" in caplog.text


async def test_requests_to_the_client_are_numbered_resolved_and_failed_on_close() -> None:
    runner = Runner(node="n7")
    sent: list[Any] = []
    first, answered = runner.ask(lambda m, r: sent.append(m), "sampling/createMessage", {}, None)
    second, pending = runner.ask(lambda m, r: sent.append(m), "elicitation/create", {}, None)
    assert (first, second) == ("n7-1", "n7-2") and [m["id"] for m in sent] == ["n7-1", "n7-2"]
    assert not runner.resolve(Response(1, result={"ok": 1}))  # the number alone is not the id: another node's 1
    assert not runner.resolve(Response("n8-1", result={"ok": 1}))  # another node's first request
    assert runner.resolve(Response("n7-1", result={"ok": 1}))
    assert (await answered).result == {"ok": 1}
    assert not runner.resolve(Response("n7-99", result={}))  # nobody waits for n7-99
    runner.close()
    with pytest.raises(ConnectionError):
        await pending
