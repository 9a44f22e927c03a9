"""Tool definitions served by a Deck to a connected client (in-memory, every message schema-checked): live upgrades
announced with notifications/tools/list_changed, calls in flight finishing on the version they started with, and
removed capabilities becoming unknown tools."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import client
from tooldeck import Deck
from tooldeck.manifest.definition import DefinitionError
from tooldeck.transports.memory import ClientError, MemoryClient

LIST_CHANGED = "notifications/tools/list_changed"
NUMBER = {"type": "number"}

MODULE = """
import asyncio

started = asyncio.Event()
release = asyncio.Event()


async def add_v1(a, b=0):
    started.set()
    await release.wait()
    return {"version": "1.0.0", "sum": a + b}


def add_v2(a, b=0, c=0):
    return {"version": "1.1.0", "sum": a + b + c}


def subtract(a, b=0):
    return {"version": "any", "sum": a - b}


def multiply(a, b=0):
    return {"version": "1.1.0", "sum": a * b}
"""


def parameter(name: str, required: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "number", "required": required, "description": f"operand {name}"}


def capability(name: str, handler: str, *extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} numbers",
        "parameters": [parameter("a", True), parameter("b"), *extra],
        "handler": f"deck_calc_ops:{handler}",
        "return": {"schema": {"type": "object", "properties": {"version": {"type": "string"}, "sum": NUMBER}}},
    }


def calc(version: str, *capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "calc",
        "name": "Calc",
        "version": version,
        "description": "Arithmetic",
        "capabilities": list(capabilities),
    }


V1 = calc("1.0.0", capability("add", "add_v1"), capability("subtract", "subtract"))
V1_1 = calc(
    "1.1.0",
    capability("add", "add_v2", parameter("c")),
    capability("subtract", "subtract"),
    capability("multiply", "multiply"),
)
V2 = calc("2.0.0", capability("add", "add_v2", parameter("c")), capability("multiply", "multiply"))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with the handlers module; sys.path and the imported module are restored afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "deck_calc_ops.py").write_text(textwrap.dedent(MODULE))
    yield tmp_path
    sys.modules.pop("deck_calc_ops", None)


def write(directory: Path, document: dict[str, Any]) -> Path:
    path = directory / "calc.json"
    path.write_text(json.dumps(document))
    return path


async def names(c: MemoryClient) -> list[str]:
    return [tool["name"] for tool in await c.list_tools()]


async def settle(c: MemoryClient) -> None:
    """One round trip: whatever the server scheduled before it (an announcement, say) has been sent."""
    await c.request("ping")


async def test_a_live_upgrade_is_announced_and_listed(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1))
    async with client(deck) as c:
        assert await names(c) == ["calc.add", "calc.subtract"]
        assert c.notifications == []
        done = deck.load_manifest(write(here, V1_1))
        assert [str(applied) for applied in done] == [
            "tool definition calc: upgraded 1.0.0 -> 1.1.0 (minor: optional parameter 'c' added to 'add')"
        ]
        assert await c.wait_for_notification(LIST_CHANGED) == {"jsonrpc": "2.0", "method": LIST_CHANGED}
        tools = {tool["name"]: tool for tool in await c.list_tools()}
        assert list(tools) == ["calc.add", "calc.subtract", "calc.multiply"]
        assert tools["calc.add"]["inputSchema"] == {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "operand a"},
                "b": {"type": "number", "description": "operand b"},
                "c": {"type": "number", "description": "operand c"},
            },
            "required": ["a"],
            "additionalProperties": False,
        }
        assert tools["calc.add"]["_meta"]["tooldeck/version"] == "1.1.0"
        assert (await c.call_tool("calc.add", {"a": 1, "b": 2, "c": 3}))["structuredContent"] == {
            "version": "1.1.0",
            "sum": 6,
        }
        await settle(c)
        assert c.notifications == []  # one upgrade, one announcement


async def test_a_call_in_flight_finishes_on_the_old_version(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1))
    ops = sys.modules["deck_calc_ops"]
    async with client(deck) as c:
        in_flight = asyncio.create_task(c.call_tool("calc.add", {"a": 1, "b": 2}))
        async with asyncio.timeout(5):
            await ops.started.wait()
        deck.load_manifest(write(here, V1_1))
        await c.wait_for_notification(LIST_CHANGED)
        after = await c.call_tool("calc.add", {"a": 1, "b": 2, "c": 3})
        assert after["structuredContent"] == {"version": "1.1.0", "sum": 6}
        assert not in_flight.done()
        ops.release.set()
        before = await in_flight
        assert before["structuredContent"] == {"version": "1.0.0", "sum": 3} and before["isError"] is False


async def test_before_the_upgrade_the_new_parameter_is_refused(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1))
    async with client(deck) as c:
        refused = await c.call_tool("calc.subtract", {"a": 1, "c": 3})
        assert refused["isError"] is True
        assert refused["content"][0]["text"] == "Invalid arguments for tool 'calc.subtract': $: unexpected property 'c'"


async def test_a_removed_capability_becomes_an_unknown_tool(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1_1))
    async with client(deck) as c:
        assert (await c.call_tool("calc.subtract", {"a": 5, "b": 2}))["structuredContent"]["sum"] == 3
        deck.load_manifest(write(here, V2))
        await c.wait_for_notification(LIST_CHANGED)
        assert await names(c) == ["calc.add", "calc.multiply"]
        with pytest.raises(ClientError) as caught:
            await c.call_tool("calc.subtract", {"a": 5, "b": 2})
        assert (caught.value.code, caught.value.message) == (-32602, "Unknown tool: calc.subtract")


async def test_a_rollback_is_announced_and_brings_the_capability_back(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1_1))
    deck.load_manifest(write(here, V2))
    async with client(deck) as c:
        assert str(deck.manager.rollback("calc")) == "tool definition calc: rolled back 2.0.0 -> 1.1.0"
        await c.wait_for_notification(LIST_CHANGED)
        assert sorted(await names(c)) == ["calc.add", "calc.multiply", "calc.subtract"]


async def test_a_refused_upgrade_changes_nothing_and_announces_nothing(here: Path) -> None:
    deck = Deck("d")
    deck.load_manifest(write(here, V1_1))
    async with client(deck) as c:
        before = await c.list_tools()
        path = write(here, {**V2, "version": "1.2.0"})
        with pytest.raises(DefinitionError) as caught:
            deck.load_manifest(path)
        assert str(caught.value) == (
            f"{path}: $.version: 1.1.0 -> 1.2.0 is a minor bump, but capability 'subtract' removed "
            "($.capabilities[1]) needs a major one (2.0.0)"
        )
        await settle(c)
        assert c.notifications == [] and await c.list_tools() == before


async def test_one_announcement_per_set(here: Path) -> None:
    deck = Deck("d")

    @deck.implements("abacus")
    def abacus(capability: str, a: float, b: float = 0) -> dict[str, Any]:
        return {"version": "abacus", "sum": a + b}

    deck.load_manifest(write(here, V1))
    async with client(deck) as c:
        unbound = [{key: value for key, value in cap.items() if key != "handler"} for cap in V1["capabilities"]]
        (here / "abacus.json").write_text(json.dumps({**V1, "id": "abacus", "capabilities": unbound}))
        write(here, V1_1)
        done = deck.load_manifest(here)
        assert [applied.action for applied in done] == ["registered", "upgraded"]
        await c.wait_for_notification(LIST_CHANGED)
        await settle(c)
        assert c.notifications == []
        # replaced tools keep their place; new ones come last, in the order of the files
        assert await names(c) == [
            "calc.add", "calc.subtract", "abacus.add", "abacus.subtract", "calc.multiply"
        ]  # fmt: skip


async def test_definition_tools_and_python_tools_are_served_side_by_side(here: Path) -> None:
    deck = Deck("d")

    @deck.tool(version="3.1.0")
    def echo(text: str) -> str:
        return text

    deck.load_manifest(write(here, V1))
    async with client(deck) as c:
        assert await names(c) == ["echo", "calc.add", "calc.subtract"]
        deck.manager.unregister("calc")
        await c.wait_for_notification(LIST_CHANGED)
        assert await names(c) == ["echo"]
        assert (await c.call_tool("echo", {"text": "hi"}))["structuredContent"] == {"result": "hi"}


async def test_a_deck_that_served_nothing_announces_its_first_definition(here: Path) -> None:
    deck = Deck("d")
    async with client(deck) as c:
        assert c.initialize_result is not None
        assert c.initialize_result["capabilities"]["tools"] == {"listChanged": True}
        assert await c.list_tools() == []
        deck.load_manifest(write(here, V1))
        await c.wait_for_notification(LIST_CHANGED)
        assert await names(c) == ["calc.add", "calc.subtract"]
