"""A deck with one tool that reports progress in steps and returns right after the last one (the case of a client
that drops the last progress notification when it arrives in the same read as the response)."""

import asyncio

from tooldeck import Context, Deck

deck = Deck("progress-steps", version="1.0.0")


@deck.tool
async def steps(count: int, ctx: Context) -> str:
    """Works in ``count`` steps, reporting progress after each; returns as soon as the last one is reported."""
    for step in range(1, count + 1):
        await asyncio.sleep(0.02)  # each step takes a moment, so every report before the last goes out on its own
        await ctx.report_progress(step, count, f"step {step} of {count}")
    return f"{count} steps done"
