"""Fleet mode for the HTTP tests: ``RoundRobin``, one ASGI app in front of several ``HttpApp``s (the processes of a
fleet, each its own deck over shared backends), that sends each request of a session to another app than the one
before — the adversarial load balancer: no request of a session is served by the process that served the last one.

``fleet_factory(kind, make_deck, ...)`` makes a stand-in for ``HttpApp(deck, **options)``: the deck it is given is the
first process's, ``make_deck()`` makes each other process's (the same tools), and they share the given deck's test
state (its ``state`` dict's values: the events a test waits on are set by whichever process runs the tool). A test
module that builds its apps with ``HttpApp(...)`` (or a ``make()`` of its own) runs unchanged in fleet mode once that
name is patched (test_fleet_mode.py).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from tooldeck import Deck
from tooldeck.server.backends import Backends
from tooldeck.transports.http import HttpApp
from transports.http.fleet_apps import KEYS, shared_memory


class RoundRobin:
    """Several apps as one ASGI app (see the module docstring); other attributes are the first app's, except
    ``sessions`` (every app's live sessions) and ``aclose`` (all of them)."""

    def __init__(self, apps: list[HttpApp], records: list[Backends]) -> None:
        self.apps = apps
        self.records = records
        self._opened = False
        self._turns = itertools.count(1)  # the first request goes to another process than the test's deck's
        self._last: dict[bytes, int] = {}  # session id -> the app that served its last request
        self.served: list[int] = []  # which app served each request, in order

    def __getattr__(self, name: str) -> Any:
        return getattr(self.apps[0], name)

    @property
    def sessions(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for app in self.apps:
            found.update(app.sessions)
        return found

    async def _open(self) -> None:
        self._opened = True
        for app in self.apps:
            await app.deck.open_backends()
            app.deck.bind_loop()
            ready = getattr(app.deck.backends.bus, "ready", None)
            if ready is not None:
                await ready()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not self._opened:
            await self._open()
        if scope["type"] != "http":
            for app in self.apps:
                await app(scope, receive, send)
            return
        session = dict(scope["headers"]).get(b"mcp-session-id")
        if session is None:
            turn = next(self._turns) % len(self.apps)
        else:
            turn = (self._last.get(session, next(self._turns)) + 1) % len(self.apps)
            self._last[session] = turn
        self.served.append(turn)
        await self.apps[turn](scope, receive, send)

    async def aclose(self) -> None:
        for app in self.apps:
            await app.aclose()

    async def shut_down(self) -> None:
        """Everything, as the test's loop ends: the apps, their decks, their Redis connections."""
        for app in self.apps:
            await app.aclose()
            await app.deck.aclose()
        for record in {id(r): r for r in self.records}.values():
            await record.aclose()


def fleet_factory(kind: str, make_deck: Callable[[], Deck], at_loop_end: Callable[[Callable[[], Awaitable[None]]], None],
                  count: int = 2) -> Callable[..., RoundRobin]:  # fmt: skip
    """A stand-in for ``HttpApp(deck, **options)`` that makes ``count`` apps over shared backends (``kind``:
    "memory", or a Redis URL) behind a ``RoundRobin``."""
    from tooldeck.server.backends import backends_from_spec

    memory = shared_memory() if kind == "memory" else None

    def make(deck: Deck, **options: Any) -> RoundRobin:
        # a deck maker may take the test's deck, to make the others alike (its policy, say)
        takes_deck = any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                         for p in inspect.signature(make_deck).parameters.values())  # fmt: skip
        decks = [deck] + [make_deck(deck) if takes_deck else make_deck() for _ in range(count - 1)]  # type: ignore[call-arg]
        state = getattr(deck, "state", None)
        records = []
        for each in decks:
            if each is not deck and state is not None:
                each.state.update(state)  # type: ignore[attr-defined]  # one set of test events for every process
            record = memory if memory is not None else backends_from_spec(kind, keys=KEYS)
            each.use_backends(record)
            records.append(record)
        robin = RoundRobin([HttpApp(each, **options) for each in decks], records)
        at_loop_end(robin.shut_down)
        return robin

    return make
