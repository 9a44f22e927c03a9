"""A deck whose tools end when the test says so, for the HTTP shutdown tests.

``held`` reports progress (so the client knows it is running), then returns when a line arrives on the server's
stdin; ``stuck`` reports progress and never returns. Nothing here sleeps: the test decides when work ends.
"""

import asyncio
import os

from tooldeck import Context, Deck

deck = Deck("held", version="0.0.1")


async def stdin_line() -> str:
    """The next chunk written to stdin, read on the event loop (no thread is left blocked if we are cancelled)."""
    loop = asyncio.get_running_loop()
    arrived: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        if not arrived.done():
            arrived.set_result(os.read(0, 4096))

    loop.add_reader(0, readable)
    try:
        return (await arrived).decode().strip()
    finally:
        loop.remove_reader(0)


@deck.tool
async def held(ctx: Context) -> str:
    await ctx.report_progress(0, 1)
    return f"released: {await stdin_line()}"


@deck.tool
async def stuck(ctx: Context) -> str:
    await ctx.report_progress(0, 1)
    await asyncio.Event().wait()
    return "never"
