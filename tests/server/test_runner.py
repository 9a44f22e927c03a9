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
