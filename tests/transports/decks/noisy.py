"""A deck whose tools misbehave on stdout, for the stdio transport tests."""

import asyncio
import os
import subprocess
import sys

from tooldeck import Context, Deck

deck = Deck("noisy", version="0.0.1")
print("a banner printed at import time")  # must not reach the protocol stream


@deck.tool
def shout(text: str) -> str:
    print("debug output from a tool")
    os.write(1, b"raw bytes on fd 1\n")
    subprocess.run([sys.executable, "-c", "print('a child process writing to stdout')"], check=True)
    return text.upper()


@deck.tool
async def wait(seconds: float, ctx: Context) -> str:
    await ctx.report_progress(0.5, 1.0)
    await asyncio.sleep(seconds)
    return "waited"


@deck.tool
def add(a: int, b: int) -> int:
    return a + b
