"""Fixtures for the testing client's tests: every message any ``tooldeck.testing`` client exchanges is checked
against the official schema (violations fail the test at teardown), and a deck that uses every feature."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mcp_schema import WireChecker
from tooldeck import Context, Deck, EmbeddedResource, Message, ToolError
from tooldeck.testing import session as testing_session


@pytest.fixture(autouse=True)
def schema_checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[WireChecker]]:
    """Each client's wire gets a WireChecker (the root conftest fails the test for what it records); the list of
    checkers is the fixture's value, so a test can see that they ran."""
    wire = testing_session._Wire
    checkers: list[WireChecker] = []
    init, send, observe = wire.__init__, wire.send, wire._observe

    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        self.checker = WireChecker(name="tooldeck.testing")
        checkers.append(self.checker)
        init(self, *args, **kwargs)

    def checked_send(self: Any, message: Any) -> None:
        self.checker.sent(message)
        send(self, message)

    def checked_observe(self: Any, data: bytes, message: Any) -> None:
        self.checker.received(message)
        observe(self, data, message)

    monkeypatch.setattr(wire, "__init__", checked_init)
    monkeypatch.setattr(wire, "send", checked_send)
    monkeypatch.setattr(wire, "_observe", checked_observe)
    yield checkers


@dataclass
class Report:
    city: str
    celsius: float


class Signals:
    """Events the deck's tools set, for tests that wait on them."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.release = threading.Event()


@pytest.fixture
def signals() -> Signals:
    return Signals()


@pytest.fixture
def deck(signals: Signals) -> Deck:
    """A deck with a tool of every shape, a resource, a template, a prompt with completion."""
    deck = Deck("features", version="2.0.0", instructions="Use it in tests.")

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    @deck.tool
    async def forecast(city: str, ctx: Context) -> Report:
        await ctx.report_progress(1, 2, "looking")
        await ctx.debug("a detail")
        await ctx.info(f"forecast for {city}")
        await ctx.report_progress(2, 2, "done")
        return Report(city, 21.5)

    @deck.tool
    def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    @deck.tool
    def crash() -> str:
        raise KeyError("secret detail")

    @deck.tool
    async def book(city: str, ctx: Context) -> str:
        form = {"type": "object", "properties": {"nights": {"type": "integer", "minimum": 1}}, "required": ["nights"]}
        answer = await ctx.elicit(f"How many nights in {city}?", form)
        if not answer.accepted:
            return f"Booking: {answer.action}."
        reply = await ctx.sample(f"Suggest a hotel in {city}", max_tokens=50, system_prompt="Be brief.")
        return f"{answer.content['nights']} nights at {reply['content']['text']} ({reply['model']})"

    @deck.tool(task="optional")
    async def render(scene: str, ctx: Context) -> str:
        await ctx.report_progress(1, 1, "rendered")
        await ctx.info(f"rendering {scene}")
        return f"video of {scene}"

    @deck.tool(task="optional")
    async def hang(ctx: Context) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            signals.cancelled.set()
            raise
        return "never"

    @deck.resource("config://app", mime_type="application/json")
    def app_config() -> dict[str, str]:
        return {"theme": "dark"}

    @deck.resource("data://logo", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG"

    @deck.resource_template("users://{user_id}/profile", complete={"user_id": ["ada", "alan", "grace"]})
    async def profile(user_id: str) -> list[EmbeddedResource]:
        return [EmbeddedResource(f"users://{user_id}/profile", text=f"profile of {user_id}")]

    @deck.prompt(complete={"language": ["python", "rust", "go"]})
    def review(code: str, language: str = "python") -> list[Message]:
        """Ask for a code review."""
        return [Message("user", f"Review this {language} code:\n{code}")]

    return deck
