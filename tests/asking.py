"""A deck whose tools, prompt and resource ask the client (elicitation, sampling), for the tests of multi round-trip
requests (2026-07-28) and of the same code in a 2025 session; and the pieces of a client's retry."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from eras import modern
from tooldeck import Context, Deck, Message

KEY = b"k" * 32  # the state key the stdio and HTTP tests share with their server (its $TOOLDECK_STATE_KEY)
RUNS: list[str] = []  # what each run of ``count_runs`` did, in order: code before a question runs on every round


def form(field: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model"}


def asking_deck(**options: Any) -> Deck:
    deck = Deck("asking", version="1.0.0", **options)

    @deck.tool
    async def greet(ctx: Context) -> str:
        """Asks for a name, then greets."""
        answer = await ctx.elicit("What is your name?", form("name"))
        return f"Hello, {(answer.content or {}).get('name')}!" if answer.accepted else f"No name ({answer.action})"

    @deck.tool
    async def two_steps(ctx: Context) -> str:
        """Asks for a name, then for a colour."""
        RUNS.append("start")
        name = (await ctx.elicit("Step 1: your name?", form("name"))).content or {}
        RUNS.append("named")
        color = (await ctx.elicit("Step 2: your favourite colour?", form("color"))).content or {}
        return f"{name.get('name')} likes {color.get('color')}"

    @deck.tool
    async def at_once(ctx: Context) -> str:
        """Asks two things at once, under keys of its own."""
        answer, greeting = await asyncio.gather(
            ctx.elicit("What is your name?", form("name"), key="user_name"),
            ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        )
        return f"{greeting['content']['text']}, {(answer.content or {}).get('name')}"

    @deck.tool
    async def capital(ctx: Context) -> str:
        """Asks the client's model."""
        result = await ctx.sample("What is the capital of France?", max_tokens=100)
        return f"The model says {result['content']['text']}"

    @deck.tool
    async def count_roots(ctx: Context) -> str:
        """Asks the client for its roots."""
        roots = await ctx.list_roots(key="client_roots")
        return f"Found {len(roots)} root(s): {', '.join(root['uri'] for root in roots)}"

    @deck.tool(security_level=8, version="3.0.0")
    def wipe(disk: str) -> str:
        """Level 8: runs only once the user confirmed it."""
        RUNS.append(f"wiped {disk}")
        return f"wiped {disk}"

    @deck.prompt
    async def briefing(topic: str, ctx: Context) -> list[Message]:
        """Asks the user for context before it is made."""
        answer = await ctx.elicit(f"What should the briefing on {topic} stress?", form("context"))
        return [Message("user", f"Brief me on {topic}, stressing {(answer.content or {}).get('context')}.")]

    @deck.resource("test://asked", description="Asks who reads it.", mime_type="text/plain")
    async def asked(ctx: Context) -> str:
        answer = await ctx.elicit("Who is reading?", form("reader"))
        return f"Read by {(answer.content or {}).get('reader')}"

    return deck


def retry(request_id: Any, first: dict[str, Any], interim: dict[str, Any], responses: dict[str, Any],
          **envelope: Any) -> dict[str, Any]:  # fmt: skip
    """The client's retry of ``first`` after the interim result ``interim``: a new id, the same method and params,
    the answers and the echoed state."""
    params = {k: v for k, v in first["params"].items() if k not in ("_meta", "inputResponses", "requestState")}
    params["inputResponses"] = responses
    if "requestState" in interim:
        params["requestState"] = interim["requestState"]
    return modern(request_id, first["method"], params, **envelope)


def code_in(interim: dict[str, Any], key: str = "input-1") -> str:
    """The confirmation code a level 8-10 question shows the user."""
    found = re.search(r"enter the code (\d{6})", interim["inputRequests"][key]["params"]["message"])
    assert found is not None, interim
    return found.group(1)
