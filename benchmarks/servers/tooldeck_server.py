"""The benchmark tools on tooldeck: echo (async), echo_sync, sleep; BENCH_TOOLS=N adds N three-parameter tools.

Run with `tooldeck serve benchmarks/servers/tooldeck_server.py` (stdio).
"""

import asyncio
import os

from tooldeck import Deck

deck = Deck("bench", version="1.0.0")


@deck.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@deck.tool
def echo_sync(text: str) -> str:
    """Return the text unchanged (a sync tool)."""
    return text


@deck.tool
async def sleep(ms: int) -> str:
    """Sleep for ms milliseconds, then answer."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


def make_extra_tool(index: int):
    def extra(city: str, days: int, metric: bool) -> str:
        return f"{index}:{city}:{days}:{metric}"

    extra.__doc__ = f"Extra tool number {index} for the tools/list benchmark."
    return extra


for i in range(int(os.environ.get("BENCH_TOOLS", "0"))):
    deck.add_tool(make_extra_tool(i), name=f"tool_{i:04d}")

if __name__ == "__main__":
    deck.run()
