"""The benchmark tools on tooldeck: echo (async), echo_sync, sleep; BENCH_TOOLS=N adds N three-parameter tools;
BENCH_TASKS=1 adds echo_task, echo that may be called as a task (only then does the deck declare the tasks capability,
so the other rows see the same three tools and capabilities as the peers').

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


if os.environ.get("BENCH_TASKS") == "1":

    @deck.tool(task="optional")
    async def echo_task(text: str) -> str:
        """Return the text unchanged (may be called as a task)."""
        return text


def make_extra_tool(index: int):
    def extra(city: str, days: int, metric: bool) -> str:
        return f"{index}:{city}:{days}:{metric}"

    extra.__doc__ = f"Extra tool number {index} for the tools/list benchmark."
    return extra


for i in range(int(os.environ.get("BENCH_TOOLS", "0"))):
    deck.add_tool(make_extra_tool(i), name=f"tool_{i:04d}")

if __name__ == "__main__":
    deck.run()
