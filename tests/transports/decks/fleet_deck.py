"""A deck for the fleet tests: two `tooldeck serve` processes on one SQLite task store, with a short task lease.

``rerunnable`` (idempotent) writes a line per run to ``log`` (this process's pid) and says so on stderr; its first run
waits forever, so it ends only when run once more by another process. ``slow`` (not idempotent) never ends.
"""

import asyncio
import os
import sys

from tooldeck import Deck

deck = Deck("fleet-deck", version="0.0.1", task_lease=1.5, task_lease_renewal=0.25)


@deck.tool(task="optional")
async def quick(n: int) -> int:
    return n * 10


@deck.tool(task="required")
async def slow() -> str:
    print(f"slow started in {os.getpid()}", file=sys.stderr, flush=True)
    await asyncio.sleep(3600)
    return "never"


@deck.tool(task="required", annotations={"idempotentHint": True})
async def rerunnable(log: str) -> str:
    with open(log, "a") as file:
        file.write(f"{os.getpid()}\n")
    with open(log) as file:
        runs = file.read().split()
    print(f"rerunnable run {len(runs)} started in {os.getpid()}", file=sys.stderr, flush=True)
    if len(runs) == 1:
        await asyncio.sleep(3600)
    return f"run {len(runs)}, in {os.getpid()}"
