"""A deck for the Redis fault tests: a plain tool, a task tool and a rate limit, so a call needs the shared backend
(its bucket), a task needs the task store, and a 2025 session needs the session store once it crosses processes."""

from __future__ import annotations

import asyncio

from tooldeck import Context, Deck
from tooldeck.security.policy import Policy


def make_deck(backends: object = None) -> Deck:
    deck = Deck("outage", backends=backends)  # type: ignore[arg-type]

    @deck.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @deck.tool(task="optional")
    async def job(ctx: Context, seconds: float = 0.0) -> str:
        """A task that ends after ``seconds``."""
        await asyncio.sleep(seconds)
        return "done"

    deck.apply_policy(Policy({"limits": {"per_principal": "100000/s"}}))  # every call takes from a bucket in Redis
    return deck


deck = make_deck()
