"""A deck with task-capable tools, for the restart tests (served over stdio with a SQLite task store and a task lease
of 1 s, so a task its killed process left running is taken over within a second or so)."""

import asyncio

from tooldeck import Deck

deck = Deck("tasks-deck", version="0.0.1", task_lease=1.0, task_lease_renewal=0.2)


@deck.tool(task="optional")
async def quick(n: int) -> int:
    return n * 10


@deck.tool(task="required")
async def slow() -> str:
    await asyncio.sleep(3600)
    return "never"
