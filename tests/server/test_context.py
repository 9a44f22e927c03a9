"""Context, the tool's handle on its request: what it checks before anything is sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tooldeck import Deck
from tooldeck.server.context import Context
from tooldeck.server.request import RequestContext


class Peer:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any, related: Any) -> None:
        self.sent.append(message)

    def loop(self) -> Any:
        return asyncio.get_running_loop()


def context(token: Any = "t") -> tuple[Context, Peer]:
    peer = Peer()
    params = {"_meta": {"progressToken": token}} if token is not None else {}
    request = RequestContext.standalone(Deck("c"), peer, 1, "tools/call", params, "2025-11-25")  # type: ignore[arg-type]
    return Context(request, "tool"), peer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("1",), "progress must be a number, got str"),
        ((True,), "progress must be a number, got bool"),
        ((1, "10"), "total must be a number or None, got str"),
        ((1, False), "total must be a number or None, got bool"),
        ((1, 10, 5), "message must be a string or None, got int"),
    ],
)
async def test_report_progress_checks_every_argument(args: tuple[Any, ...], message: str) -> None:
    ctx, peer = context()
    with pytest.raises(TypeError, match=f"^{message}$"):
        ctx.report_progress(*args)
    assert peer.sent == []  # nothing invalid reaches the client


async def test_report_progress_sends_growing_values_only_with_a_token() -> None:
    ctx, peer = context()
    await ctx.report_progress(1, 4, "one")
    await ctx.report_progress(1, 4)  # not growing: dropped
    await ctx.report_progress(2)
    assert [m["params"] for m in peer.sent] == [
        {"progressToken": "t", "progress": 1, "total": 4, "message": "one"},
        {"progressToken": "t", "progress": 2},
    ]
    silent, quiet_peer = context(token=None)
    await silent.report_progress(1)
    assert quiet_peer.sent == []


async def test_nothing_is_sent_once_the_request_is_cancelled_or_finished() -> None:
    ctx, peer = context()
    ctx.request.cancel()
    assert ctx.is_cancelled
    await ctx.report_progress(1)
    finished, other = context()
    finished.finished = True
    await finished.report_progress(1)
    await finished.info("late")
    assert peer.sent == [] and other.sent == []
