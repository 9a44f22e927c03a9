"""A deck whose tools send far more than a client reads: log lines on a call's stream, resource updates on the
session's GET stream. Each says on stderr (and through ``sent``, in-process) when it has sent everything."""

import asyncio
import sys
import threading

from tooldeck import Context, Deck

deck = Deck("flood", version="0.0.1")
sent = threading.Event()  # set when a flood has been handed to the transport whole
WATCHED = "flood://watched"


@deck.resource(WATCHED, mime_type="text/plain")
def watched() -> str:
    return "a resource whose updates flood a session's GET stream"


def done(what: str) -> None:
    print(f"flood: {what}", file=sys.stderr, flush=True)
    sent.set()


@deck.tool
async def flood(lines: int, size: int, ctx: Context) -> str:
    """Sends ``lines`` log lines of ``size`` bytes, yielding to the event loop every 500 (as a tool doing real work
    would), then answers."""
    pad = "x" * size
    for i in range(lines):
        await ctx.info(f"line {i} {pad}")
        if i % 500 == 499:
            await asyncio.sleep(0)
    done(f"{lines} lines sent")
    return f"{lines} lines"


@deck.tool
async def updates(count: int, size: int) -> str:
    """Announces ``count`` updates of a resource (a URI of ``size`` bytes under the watched one) to its subscribers."""
    uri = f"{WATCHED}/{'x' * size}"
    for i in range(count):
        deck.notify_resource_updated(f"{uri}/{i}")
        if i % 500 == 499:
            await asyncio.sleep(0)
    done(f"{count} updates sent")
    return f"{count} updates"


@deck.tool
def add(a: int, b: int) -> int:
    return a + b
