"""The tool-definition benchmark's deck: definitions generated as files, each bound with a tool-wide
``@deck.implements(<id>)``; optionally a service that upgrades them while the deck serves.

Environment (all optional):
  BENCH_DEFS_DIR=<dir>   serve the definition files in <dir> (``deck.load_manifest``), for the tools/list row
  BENCH_UPGRADE_DEFS=N   register N definitions in code, add the ``bench_upgrades`` control tool and the upgrader
                         service (paused until the control tool switches it on), for the HTTP upgrade row

Run with `tooldeck serve benchmarks/servers/definitions_server.py [--http ...]`. As a script,
`python definitions_server.py --time-load <dir> plain|deferred` times ``deck.load_manifest(<dir>)`` in this fresh process and
prints the result as one JSON line.
"""

import asyncio
import copy
import gc
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from tooldeck import Deck

CAPABILITIES = ("forecast", "history", "alerts")


def tool_id(index: int) -> str:
    return f"weather{index:04d}"


def document(index: int, version: str = "1.0.0", capabilities: tuple[str, ...] = CAPABILITIES) -> dict[str, Any]:
    """A definition of three capabilities with three parameters each (as the main benchmark's extra tools)."""
    parameters = [
        {"name": "city", "type": "string", "required": True, "description": "City name"},
        {"name": "days", "type": "number", "description": "How many days (default 1)"},
        {"name": "metric", "type": "boolean", "description": "Metric units (default true)"},
    ]
    return {
        "id": tool_id(index),
        "name": f"Weather service {index}",
        "version": version,
        "description": f"Weather data, definition number {index} of the tool-definition benchmark.",
        "securityLevel": 0,
        "metadata": {"category": "weather", "tags": ["bench", "weather"]},
        "capabilities": [
            {
                "name": name,
                "description": f"The {name} for a city.",
                "parameters": parameters,
                "return": {"description": "A line of text", "schema": {"type": "string"}},
            }
            for name in capabilities
        ],
    }


async def weather(capability: str, city: str, days: float = 1, metric: bool = True) -> str:
    """The handler of every capability of every definition: answers ``<capability>:<city>``."""
    return f"{capability}:{city}"


async def weather_deferred(capability: "str", city: "str", days: "float" = 1, metric: "bool" = True) -> "str":
    """The same handler with its annotations as strings, as in a module with ``from __future__ import annotations``
    (this module has none, so that ``weather`` keeps evaluated annotations)."""
    return f"{capability}:{city}"


HANDLERS = {"plain": weather, "deferred": weather_deferred}


def bind(deck: Deck, count: int, handler: str = "plain") -> None:
    for index in range(count):
        deck.implements(tool_id(index))(HANDLERS[handler])


def count_files(directory: str) -> int:
    return sum(1 for name in os.listdir(directory) if name.endswith((".json", ".yaml", ".yml")))


# --- the upgrader (BENCH_UPGRADE_DEFS) ------------------------------------------------------------------------------


class Upgrader:
    """Upgrades the served definitions every 10-50 ms while switched on: a patch bump (a new description) four times
    out of five, else a minor bump that adds a capability. Capabilities are never removed."""

    def __init__(self, deck: Deck, count: int, seed: int = 1) -> None:
        self.deck = deck
        self.random = random.Random(seed)
        self.current = {tool_id(i): document(i) for i in range(count)}
        self.on = asyncio.Event()
        self.stats: dict[str, int] = {"upgrades": 0, "patch": 0, "minor": 0, "failed": 0}
        self.first_failure: str | None = None
        self.apply_ns: list[int] = []
        # Garbage-collector pauses, by whether upgrades were on: the history the manager keeps grows the heap.
        self.gc_max_ms = {"with": 0.0, "without": 0.0}
        self.gc_full = {"with": 0, "without": 0}
        self._gc_started = 0
        self._controlled = False
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter_ns()
            return
        mode = "with" if self.on.is_set() else "without"
        pause = (time.perf_counter_ns() - self._gc_started) / 1e6
        self.gc_max_ms[mode] = max(self.gc_max_ms[mode], pause)
        self.gc_full[mode] += info.get("generation") == 2

    def register_all(self) -> None:
        self.deck.manager.apply([self._definition(doc) for doc in self.current.values()])

    def _definition(self, doc: dict[str, Any]) -> Any:
        from tooldeck.manifest.definition import parse_definition

        return parse_definition(doc, f"<{doc['id']}>")

    def next_document(self) -> tuple[dict[str, Any], str]:
        doc = copy.deepcopy(self.current[self.random.choice(list(self.current))])
        major, minor, patch = (int(part) for part in doc["version"].split("."))
        if self.random.random() < 0.2:
            number = len(doc["capabilities"])
            added = copy.deepcopy(doc["capabilities"][0])
            added["name"] = f"extra{number}"
            added["description"] = f"Extra capability {number}."
            doc["capabilities"].append(added)
            doc["version"] = f"{major}.{minor + 1}.0"
            return doc, "minor"
        doc["version"] = f"{major}.{minor}.{patch + 1}"
        doc["description"] = f"Weather data, revision {doc['version']}."
        return doc, "patch"

    async def run(self) -> None:
        while True:
            await self.on.wait()
            await asyncio.sleep(self.random.uniform(0.010, 0.050))
            if not self.on.is_set():
                continue
            doc, kind = self.next_document()
            started = time.perf_counter_ns()
            try:
                self.deck.manager.register(doc)  # on the loop's thread, as a service would do it
            except Exception as exc:  # counted and reported: the benchmark expects none
                self.stats["failed"] += 1
                self.first_failure = self.first_failure or f"{type(exc).__name__}: {exc}"
                continue
            self.apply_ns.append(time.perf_counter_ns() - started)
            self.current[doc["id"]] = doc
            self.stats["upgrades"] += 1
            self.stats[kind] += 1

    def control(self, upgrading: bool) -> dict[str, Any]:
        """Switch upgrading on or off; the counts so far (and the time one ``register`` took, p50/max)."""
        if not self._controlled:  # GC pauses count from the first block on, not from start-up and warm-up
            self._controlled = True
            self.gc_max_ms = {"with": 0.0, "without": 0.0}
            self.gc_full = {"with": 0, "without": 0}
        if upgrading:
            self.on.set()
        else:
            self.on.clear()
        ordered = sorted(self.apply_ns)
        timing = {}
        if ordered:
            timing = {"apply_p50_ms": ordered[len(ordered) // 2] / 1e6, "apply_max_ms": ordered[-1] / 1e6}
        capabilities = sum(len(doc["capabilities"]) for doc in self.current.values())
        return {
            **self.stats,
            "first_failure": self.first_failure,
            **timing,
            "gc_max_ms": self.gc_max_ms,
            "gc_full_collections": self.gc_full,
            "capabilities": capabilities,
            "tools": len(self.deck.tools),
        }


deck = Deck("bench-definitions", version="1.0.0")

if directory := os.environ.get("BENCH_DEFS_DIR"):
    bind(deck, count_files(directory))
    deck.load_manifest(directory)

if upgrade_count := int(os.environ.get("BENCH_UPGRADE_DEFS", "0")):
    upgrader = Upgrader(deck, upgrade_count)
    bind(deck, upgrade_count)
    upgrader.register_all()
    deck.services.append(upgrader.run)

    @deck.tool
    def bench_upgrades(upgrading: bool) -> dict[str, Any]:
        """Benchmark control: switch the upgrader on or off and return its counts."""
        return upgrader.control(upgrading)


def time_load(directory: str, handler: str) -> dict[str, Any]:
    """``deck.load_manifest(directory)`` in this (fresh) process, after binding a handler to every tool id."""
    fresh = Deck("bench-load", version="1.0.0")
    bind(fresh, count_files(directory), handler)
    started = time.perf_counter()
    applied = fresh.load_manifest(directory)
    elapsed = time.perf_counter() - started
    return {"load_s": elapsed, "definitions": len(applied), "tools": len(fresh.tools)}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--time-load":
        print(json.dumps(time_load(str(Path(sys.argv[2])), sys.argv[3])))
    else:
        deck.run()
