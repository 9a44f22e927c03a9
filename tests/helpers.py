"""Shared test drivers: a sans-IO session harness and an in-process client, both schema-checking every message.

Their checkers record violations (the server's send path would swallow an exception); the test fails at teardown.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from mcp_schema import LATEST, WireChecker
from tooldeck import Context, Deck
from tooldeck.server.session import Session
from tooldeck.transports.memory import MemoryClient, connect

CLIENT_INFO = {"name": "test-client", "version": "1.0"}


def init_params(version: str = LATEST, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO}


class Harness:
    """Drives a Session synchronously (no event loop): messages in, checked messages out."""

    def __init__(self, deck: Deck) -> None:
        self.checker = WireChecker(name="Harness")
        self.out: list[Any] = []
        self.session = Session(deck, self._emit)

    def _emit(self, message: Any, related: Any = None) -> None:
        decoded = orjson.loads(orjson.dumps(message))  # exactly what would cross the wire
        self.checker.received(decoded)
        self.out.append(decoded)

    def send(self, message: Any) -> list[Any]:
        """Deliver one decoded message; return what the session emitted in answer."""
        self.checker.sent(message)
        start = len(self.out)
        self.session.receive(orjson.loads(orjson.dumps(message)))
        return self.out[start:]

    def send_raw(self, data: bytes) -> list[Any]:
        from tooldeck.protocol.codec import decode
        from tooldeck.protocol.errors import ParseError

        start = len(self.out)
        try:
            message = decode(data)
        except ParseError as exc:
            self.session.receive_error(exc)
        else:
            self.checker.sent(message)
            self.session.receive(message)
        return self.out[start:]

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        replies = self.send(message)
        assert len(replies) == 1, replies
        return replies[0]

    def initialize(self, version: str = LATEST, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.request("initialize", init_params(version, capabilities), id="init")
        assert "result" in reply, reply
        assert self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}) == []
        return reply["result"]


def adder_deck(name: str, version: str = "1.0.0", **options: Any) -> Deck:
    """A deck whose one tool is ``add(a: int, b: int) -> int``; a test adds what else it needs."""
    deck = Deck(name, version=version, **options)

    @deck.tool
    def add(a: int, b: int) -> int:
        return a + b

    return deck


async def all_pages(c: MemoryClient, method: str, key: str) -> list[Any]:
    """Every item of a paginated list (``key`` of each result), following ``nextCursor`` to the last page."""
    items: list[Any] = []
    params: dict[str, Any] = {}
    while True:
        page = await c.request(method, params)
        items += page[key]
        if "nextCursor" not in page:
            return items
        params = {"cursor": page["nextCursor"]}


@asynccontextmanager
async def client(
    deck: Deck,
    *,
    version: str = LATEST,
    capabilities: dict[str, Any] | None = None,
    initialize: bool = True,
) -> AsyncIterator[MemoryClient]:
    """An in-process client whose every received message is checked against the official schema."""
    checker = WireChecker(name="helpers.client")
    async with connect(deck, initialize=False, observer=lambda data, message: checker.received(message)) as mc:
        original = mc.send

        def send(message: Any) -> None:
            checker.sent(message)
            original(message)

        mc.send = send  # type: ignore[method-assign]  # checked from the handshake on
        mc.checker = checker  # type: ignore[attr-defined]
        if initialize:
            await mc.initialize(version, capabilities)
        yield mc


async def sleep_until_cancelled(cancelled: asyncio.Event, started: asyncio.Event | None = None) -> str:
    """The body of an async tool that ends only by being cancelled: sets ``started``, then ``cancelled`` when the
    cancellation arrives, and lets it through."""
    if started is not None:
        started.set()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancelled.set()
        raise
    return "never"


def poll_until_cancelled(ctx: Context, started: threading.Event, stopped: threading.Event, seconds: float = 10) -> str:
    """The body of a sync tool that ends only by being cancelled: a worker thread cannot be interrupted, so it polls
    ``ctx.is_cancelled``; sets ``started``, then ``stopped`` once it sees the cancellation ("never cancelled" after
    ``seconds``)."""
    started.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.is_cancelled:
            stopped.set()
            return "stopped"
        time.sleep(0.001)  # the tool's poll interval, not a test waiting for something
    return "never cancelled"


_IMPORT_PROBE = """
import importlib.util, sys, types

# tooldeck/__init__.py imports the whole server; load the subpackages without it.
package = types.ModuleType("tooldeck")
package.__path__ = list(importlib.util.find_spec("tooldeck").submodule_search_locations)
sys.modules["tooldeck"] = package

{preload}
for name in {forget!r}:  # loaded by the preload (orjson imports some today): forgotten, so a re-import shows
    sys.modules.pop(name, None)
before = set(sys.modules)

{imports}

print(sorted(set(sys.modules) - before))
"""


def modules_added_by(imports: str, *, preload: str, forget: tuple[str, ...]) -> list[str]:
    """The modules a fresh interpreter loads for ``imports`` (tooldeck subpackages imported without the package's
    ``__init__``), after running ``preload`` and forgetting the ``forget`` modules it loaded."""
    import ast
    import subprocess
    import sys

    script = _IMPORT_PROBE.format(preload=preload, forget=forget, imports=imports)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return list(ast.literal_eval(done.stdout))


async def authenticate(backend: Any, scope: Any) -> Any:
    """An authentication backend's verdict on ``scope``, awaited when the backend had to look further."""
    outcome = backend.authenticate(scope)
    return await outcome if hasattr(outcome, "__await__") else outcome
