"""A deck with task-capable tools, for the restart tests (served over stdio with a SQLite task store)."""

import asyncio

from tooldeck import Deck

deck = Deck("tasks-deck", version="0.0.1")


@deck.tool(task="optional")
async def quick(n: int) -> int:
    return n * 10


@deck.tool(task="required")
async def slow() -> str:
    await asyncio.sleep(3600)
    return "never"
