"""A deck whose tools hold a worker thread or the event loop, for the stdio shutdown tests."""

import asyncio
import time

from tooldeck import Context, Deck

deck = Deck("blocking", version="0.0.1")


@deck.tool
def sleep_sync(seconds: float, ctx: Context) -> str:
    """Blocks its worker thread (reports progress first, so a test knows it runs)."""
    ctx.report_progress(0.5, 1.0)
    time.sleep(seconds)
    return "slept"


@deck.tool
async def pause(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "paused"


@deck.tool
def echo(text: str) -> str:
    return text
