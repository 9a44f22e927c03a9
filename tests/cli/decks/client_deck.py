"""A deck for the client command tests: every parameter type, a task-required tool, logging, a tool that waits
until it is cancelled, resources (text, binary, a template) and a prompt. Small pages, so listings paginate."""

import asyncio

from tooldeck import Context, Deck, Message

deck = Deck("client-deck", version="1.2.3", page_size=2)


@deck.tool
def kinds(count: int, ratio: float, flag: bool, tags: list[str], extra: dict[str, int], name: str = "x") -> dict:
    """Echo the arguments with their JSON types."""
    values = {"count": count, "ratio": ratio, "flag": flag, "tags": tags, "extra": extra, "name": name}
    return {key: [value, type(value).__name__] for key, value in values.items()}


@deck.tool
def greet(who: str) -> str:
    """Say hello."""
    return f"hello {who}"


@deck.tool(task="required")
async def build(steps: int, ctx: Context) -> str:
    """A task-required tool that reports progress."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
    return f"built in {steps} steps"


@deck.tool
async def chatty(ctx: Context) -> str:
    """Logs, then answers."""
    await ctx.log("warning", "disk almost full", logger="store")
    return "done"


@deck.tool(task="optional")
async def hang(marker: str, ctx: Context) -> str:
    """Waits until it is cancelled, then writes ``marker`` (the proof that cancellation reached it)."""
    await ctx.log("info", "started")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        with open(marker, "w") as file:
            file.write("cancelled")
        raise
    return "never"


@deck.tool
def fail() -> str:
    """Always fails."""
    from tooldeck import ToolError

    raise ToolError("the flux capacitor\nis broken")


@deck.resource("config://app", mime_type="application/json", description="The app's settings.")
def config() -> dict:
    return {"theme": "dark"}


@deck.resource("data://blob", mime_type="application/octet-stream")
def blob() -> bytes:
    return bytes(range(256))


@deck.resource_template("users://{user_id}/profile", description="A user's profile.")
def profile(user_id: int) -> str:
    return f"profile of {user_id}"


@deck.prompt
def review(code: str, language: str = "python") -> list[Message]:
    """Ask for a code review."""
    return [Message("user", f"Review this {language} code:\n{code}")]
