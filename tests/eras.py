"""Shared pieces of the tests of both protocol eras: the 2026-07-28 envelope, and a deck with a bit of everything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tooldeck import Context, Deck, ToolError
from tooldeck.security.tokens import hash_token

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


def meta(version: str = MODERN, capabilities: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    """A request's ``_meta`` envelope; ``more`` adds keys as given (``logLevel=`` maps to its full name)."""
    found: dict[str, Any] = {VERSION_KEY: version, CAPS_KEY: capabilities or {},
                             INFO_KEY: {"name": "era-test", "version": "1"}}  # fmt: skip
    if "logLevel" in more:
        found[LOG_KEY] = more.pop("logLevel")
    found.update(more)
    return found


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None, **envelope: Any) -> dict[str, Any]:
    """A 2026-07-28 request: ``params`` plus the envelope (``envelope`` goes to ``meta``)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**(params or {}), "_meta": meta(**envelope)},
    }


def era_deck(**options: Any) -> Deck:
    """Tools (plain, streaming, failing, asking the client), a resource, a template, a prompt with completions."""
    deck = Deck("eras", version="2.0.0", instructions="Serves both eras.", **options)

    @deck.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @deck.tool
    async def steps(ctx: Context) -> str:
        """Report progress and log along the way."""
        await ctx.report_progress(1, 2)
        await ctx.log("info", "halfway")
        await ctx.report_progress(2, 2)
        return "done"

    @deck.tool
    def fail() -> str:
        """Always fails."""
        raise ToolError("this tool fails on purpose")

    @deck.tool
    async def ask_name(ctx: Context) -> str:
        """Asks the user for a name."""
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str(answer)

    @deck.tool
    async def think(ctx: Context) -> str:
        """Asks the client's model."""
        await ctx.sample("What is the capital of France?", max_tokens=100)
        return "thought"

    @deck.tool(security_level=5, scopes=["weather:read"])
    def weather() -> str:
        """Level 5: needs an authenticated caller with weather:read."""
        return "sunny"

    @deck.resource("test://static-text", description="A fixed text.", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @deck.resource_template("test://template/{id}/data", description="Data by id.", mime_type="application/json",
                            complete={"id": ["123", "124"]})  # fmt: skip
    def data(id: str) -> dict[str, Any]:
        return {"id": id, "templateTest": True}

    @deck.prompt(complete={"language": ["python", "perl", "rust"]})
    def review(language: str) -> str:
        """Review code in a language."""
        return f"Review this {language} code."

    return deck


def token_policy(tmp_path: Path) -> Path:
    """A policy file with two bearer tokens: ``reader-secret`` (subject reader, scope weather:read) and
    ``nobody-secret`` (subject nobody, no scopes)."""
    path = tmp_path / "policy.toml"
    path.write_text(f"""
[[authentication.tokens]]
subject = "reader"
sha256 = "{hash_token("reader-secret")}"
scopes = ["weather:read"]

[[authentication.tokens]]
subject = "nobody"
sha256 = "{hash_token("nobody-secret")}"
scopes = []
""")
    return path
