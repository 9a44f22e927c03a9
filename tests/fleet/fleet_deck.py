"""The deck the fleet tests serve from three ``tooldeck serve --http --backend redis://...`` processes.

Each process is given its node id with ``--node-id``; its task lease is ``$FLEET_LEASE`` seconds. Every run of a
task's work appends a line ``<what> <tag> <node>`` to ``$FLEET_RUNS`` (one ``write`` to a file opened for appending:
lines of several processes never mix), so a test counts how often each task ran, and where.
"""

import asyncio
import os

from tooldeck import Context, Deck

LEASE = float(os.environ.get("FLEET_LEASE", "3"))
deck = Deck("fleet", version="1.0.0", task_lease=LEASE, task_lease_renewal=LEASE / 6)


def ran(what: str, tag: str) -> None:
    runs = os.environ.get("FLEET_RUNS")
    if runs:
        fd = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{what} {tag} {deck.node_id}\n".encode())
        finally:
            os.close(fd)


@deck.tool
async def echo(tag: str) -> str:
    """A plain call: says which process answered."""
    return f"{tag}@{deck.node_id}"


@deck.tool(task="required")
async def job(tag: str, seconds: float) -> str:
    """A task that is not idempotent: taken over from a dead process, it ends failed."""
    ran("job", tag)
    await asyncio.sleep(seconds)
    return f"job {tag} done"


@deck.tool(task="required", annotations={"idempotentHint": True})
async def redo(tag: str, seconds: float) -> str:
    """An idempotent task: taken over from a dead process, it runs once more."""
    ran("redo", tag)
    await asyncio.sleep(seconds)
    return f"redo {tag} done"


@deck.tool
async def ask(tag: str, ctx: Context) -> str:
    """Asks the client for a word (elicitation), then says it."""
    answer = await ctx.elicit(f"A word for {tag}?", {"type": "object", "properties": {"word": {"type": "string"}},
                                                      "required": ["word"]})  # fmt: skip
    return f"{tag}: {(answer.content or {}).get('word')}"


@deck.tool
async def think(tag: str, ctx: Context) -> str:
    """Asks the client's model (sampling)."""
    result = await ctx.sample(f"Say {tag}", max_tokens=20)
    return f"{tag}: {result['content']['text']}"


@deck.tool
async def nap(tag: str, seconds: float, ctx: Context) -> str:
    """Says it started (a log line, so the answer is a stream), then sleeps: a call to cancel."""
    await ctx.info(f"napping {tag}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        ran("nap-cancelled", tag)
        raise
    return f"nap {tag} done"


@deck.resource("fleet://board", mime_type="text/plain")
def board() -> str:
    return "the board"


@deck.tool
async def touch() -> str:
    """Tells the subscribers of fleet://board that it changed."""
    deck.notify_resource_updated("fleet://board")
    return "touched"


@deck.prompt
def hello() -> str:
    """A prompt that stays, so that the deck always offers prompts (and their list_changed)."""
    return "hello"


def flag() -> str:
    """A prompt that comes and goes."""
    return "flag"


@deck.tool
async def toggle() -> str:
    """Adds the prompt ``flag`` to this process, or removes it: prompts/list_changed, fleet-wide."""
    if deck.prompts.get("flag") is None:
        deck.add_prompt(flag)
        return "added"
    deck.remove_prompt("flag")
    return "removed"


@deck.tool(security_level=5, scopes=["fleet:admin"])
async def admin(tag: str) -> str:
    """Level 5: needs the scope fleet:admin."""
    return f"admin {tag}"


@deck.tool(security_level=8, version="2.0.0")
async def launch(tag: str) -> str:
    """Level 8: runs only once the user confirmed it."""
    ran("launch", tag)
    return f"launched {tag}"
