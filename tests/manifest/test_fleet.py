"""The tool manager fleet-wide (manifest/fleet.py): two or three decks, each as one process would have it, over one
shared definitions store (in memory, and in a real Redis through ``backends_from_spec``). A change made on one is
served by the others within a second, exactly once, under the version rules judged against what the fleet serves;
a deck that starts later serves what the fleet serves."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from helpers import client
from manifest.test_manager import calc
from tooldeck import Deck
from tooldeck.manifest import fleet as fleet_module
from tooldeck.manifest.definition import DefinitionError, parse_definition
from tooldeck.manifest.problems import ManagerError
from tooldeck.manifest.store import MemoryDefinitionStore
from tooldeck.manifest.watch import DirectoryWatcher
from tooldeck.server.backends import Backends, backends_from_spec
from tooldeck.server.bus import MemoryBus
from tooldeck.transports.memory import MemoryClient

WITHIN = 1.0  # seconds in which every process serves a committed change


V1 = calc("1.0.0")
V2 = calc("1.1.0", "add", "subtract", "multiply")  # a minor upgrade: a capability added


def tool_wide(capability: str, x: float) -> str:
    return f"{capability}({x})"


class Fleet:
    """Makes decks as the processes of one fleet would have them: the same code, each with its own backends
    (``redis``: its own connection to the one server; ``memory``: one record shared in this process)."""

    def __init__(self, kind: str, make_backends: Callable[[], Backends], at_end: Callable[..., None]) -> None:
        self.kind = kind
        self.make_backends = make_backends
        self.at_end = at_end

    def deck(self, *definitions: dict[str, Any]) -> Deck:
        deck = Deck("fleet", backends=self.make_backends())
        deck.implements("calculator")(tool_wide)
        deck.implements("abacus")(tool_wide)
        for document in definitions:
            deck.manager.register(document)  # as loaded at start, before the deck opens its backends
        self.at_end(deck.aclose)
        return deck

    async def started(self, *definitions: dict[str, Any]) -> Deck:
        deck = self.deck(*definitions)
        await deck.open_backends()
        return deck


@pytest.fixture(params=["memory", "redis"])
def fleet(request: pytest.FixtureRequest, at_loop_end: Callable[..., None]) -> Fleet:
    if request.param == "memory":
        shared = Backends(bus=MemoryBus(), definitions=MemoryDefinitionStore())
        return Fleet("memory", lambda: shared, at_loop_end)
    url = request.getfixturevalue("redis_url")
    return Fleet("redis", lambda: backends_from_spec(url), at_loop_end)


def listing(*documents: dict[str, Any]) -> dict[str, str]:
    """What tools/list shows of these definitions: each tool's name and its definition's digest."""
    listed = {}
    for document in documents:
        definition = parse_definition(document)
        for name in definition.tool_names():
            listed[name] = f"sha256:{definition.digest}"
    return listed


async def listed(c: MemoryClient) -> dict[str, str]:
    return {tool["name"]: tool["_meta"]["tooldeck/digest"] for tool in await c.list_tools()}


async def until_listed(c: MemoryClient, expected: dict[str, str], since: float) -> float:
    """Seconds from ``since`` until ``c``'s deck lists ``expected``: listed again at each list_changed the client
    gets, as a client does; fails after ``WITHIN`` seconds."""
    while True:
        now = await listed(c)
        if now == expected:
            return time.monotonic() - since
        left = since + WITHIN - time.monotonic()
        assert left > 0, f"after {WITHIN} s the deck still lists {now}"
        try:
            await c.wait_for_notification("notifications/tools/list_changed", timeout=left)
        except TimeoutError:
            pass  # one last look above


async def test_an_upgrade_on_one_process_is_listed_by_the_others_within_a_second(fleet: Fleet) -> None:
    here, *others = [await fleet.started(V1) for _ in range(3)]
    async with client(others[0]) as second, client(others[1]) as third:
        for c in (second, third):
            assert await listed(c) == listing(V1)
        started = time.monotonic()
        applied = await here.manager.aupgrade(V2)
        assert (applied.action, applied.old_version, applied.new_version) == ("upgraded", "1.0.0", "1.1.0")
        for c in (second, third):
            assert await until_listed(c, listing(V2), started) < WITHIN
    for deck in others:
        assert deck.manager.get("calculator").version == "1.1.0"  # type: ignore[union-attr]
        assert [d.version for d in deck.manager.history("calculator")] == ["1.0.0"]  # the history is the fleet's
    assert await here.backends.definitions.revision() == 2  # type: ignore[union-attr]  # the start, the upgrade


async def test_a_rollback_on_another_process_is_listed_by_all_within_a_second(fleet: Fleet) -> None:
    here, *others = [await fleet.started(V1) for _ in range(3)]
    await here.manager.aupgrade(V2)
    async with client(here) as first, client(others[0]) as second:
        started = time.monotonic()
        applied = await others[1].manager.arollback("calculator")  # rolled back where the upgrade was not made
        assert (applied.action, applied.old_version, applied.new_version) == ("rolled back", "1.1.0", "1.0.0")
        for c in (first, second):
            assert await until_listed(c, listing(V1), started) < WITHIN
    assert here.manager.history("calculator") == []
    with pytest.raises(ManagerError, match="no earlier version was served"):
        await here.manager.arollback("calculator")  # the fleet went back already: there is nothing before 1.0.0


async def test_a_downgrade_is_refused_by_every_process_even_one_that_has_not_heard_of_the_upgrade(
    fleet: Fleet,
) -> None:
    here, there = await fleet.started(V1), await fleet.started(V1)
    await here.manager.aupgrade(V2)
    # Nothing awaited since: "there" may not have served 1.1.0 yet, and still the rules are judged against it.
    with pytest.raises(DefinitionError, match=r"1\.1\.0 -> 1\.0\.1 is a lower version; use rollback"):
        await there.manager.aregister(calc("1.0.1"))
    with pytest.raises(DefinitionError, match=r"calculator@1\.1\.0 was served with digest"):  # the pin, fleet-wide
        await there.manager.aregister(calc("1.1.0", "add", "subtract", "divide"))
    assert there.manager.get("calculator").version == "1.1.0"  # type: ignore[union-attr]
    assert await here.backends.definitions.revision() == 2  # type: ignore[union-attr]  # no refused change got in


async def test_a_process_that_has_not_heard_of_a_registration_may_upgrade_and_unregister_it_at_once(
    fleet: Fleet,
) -> None:
    here, there = await fleet.started(V1), await fleet.started(V1)
    abacus = calc("0.1.0", "count", tool_id="abacus")
    await here.manager.aregister(abacus)
    upgraded = await there.manager.aupgrade(calc("0.1.1", "count", tool_id="abacus", description="Counting"))
    assert (upgraded.action, upgraded.old_version, upgraded.new_version) == ("upgraded", "0.1.0", "0.1.1")
    await here.manager.aregister(calc("0.2.0", "count", "carry", tool_id="abacus"))
    assert (await there.manager.aunregister("abacus")).old_version == "0.2.0"
    await here.manager.aregister(calc("0.3.0", "count", "carry", tool_id="abacus"))
    both = await asyncio.gather(here.manager.aunregister("abacus"), there.manager.aunregister("abacus"))
    assert sorted(applied.action for applied in both) == ["unchanged", "unregistered"]  # once, whoever came second
    with pytest.raises(ManagerError, match="cannot upgrade 'nothing': it is not served"):
        await there.manager.aupgrade(calc("1.0.0", tool_id="nothing"))


async def test_a_process_that_starts_later_serves_the_fleet_s_state_and_brings_only_news(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    here = await fleet.started(V1)
    await here.manager.aupgrade(V2)
    abacus = calc("0.1.0", "count", tool_id="abacus")
    # A process restarted with the old files: 1.0.0 is a version the fleet has decided on (it moved on), so it is
    # not offered again; abacus is news, and is registered fleet-wide.
    late = await fleet.started(V1, abacus)
    async with client(late) as c:
        assert await listed(c) == listing(V2, abacus)
    async with client(here) as c:
        assert await until_listed(c, listing(V2, abacus), time.monotonic()) < WITHIN
    # A file of the same version as the fleet's but with other content is refused (logged), the fleet's serves.
    caplog.set_level(logging.ERROR, "tooldeck.manifest")
    changed = await fleet.started(calc("1.1.0", "add", "subtract", "divide"))
    assert changed.manager.get("calculator").digest == parse_definition(V2).digest  # type: ignore[union-attr]
    assert "calculator@1.1.0 was served by the fleet with digest" in caplog.text


async def test_a_higher_version_brought_by_a_new_release_upgrades_the_fleet(fleet: Fleet) -> None:
    old = await fleet.started(V1)
    new = await fleet.started(V2)  # a rolling restart: the first process of the new release
    assert new.manager.get("calculator").version == "1.1.0"  # type: ignore[union-attr]
    async with client(old) as c:
        assert await until_listed(c, listing(V2), time.monotonic()) < WITHIN


async def test_a_rolled_back_version_is_not_brought_back_by_a_process_restarting_with_its_files(fleet: Fleet) -> None:
    here = await fleet.started(V1)
    await here.manager.aupgrade(V2)
    await here.manager.arollback("calculator")
    restarted = await fleet.started(V2)
    assert restarted.manager.get("calculator").version == "1.0.0"  # type: ignore[union-attr]


async def test_the_same_change_from_two_processes_at_once_is_applied_once(fleet: Fleet) -> None:
    here, there = await fleet.started(V1), await fleet.started(V1)
    done = await asyncio.gather(here.manager.aupgrade(V2), there.manager.aupgrade(V2))
    assert sorted(applied.action for applied in done) == ["unchanged", "upgraded"]
    assert await here.backends.definitions.revision() == 2  # type: ignore[union-attr]
    assert [d.version for d in there.manager.history("calculator")] == ["1.0.0"]  # not 1.0.0 and 1.1.0 twice


async def test_two_processes_watching_one_directory_apply_each_change_once(fleet: Fleet, tmp_path: Path) -> None:
    (tmp_path / "calc.json").write_bytes(orjson.dumps(V1))
    decks = [fleet.deck(), fleet.deck()]
    watchers = [DirectoryWatcher(deck.manager, tmp_path) for deck in decks]
    for deck, watcher in zip(decks, watchers, strict=True):
        watcher.load()  # at start, as `tooldeck serve DIR --watch` does
        await deck.open_backends()
    store = decks[0].backends.definitions
    assert await store.revision() == 1  # type: ignore[union-attr]  # the first to open registered it
    (tmp_path / "calc.json").write_bytes(orjson.dumps(V2))
    problems = await asyncio.gather(*(w.aapply(w.read([str(tmp_path / "calc.json")])) for w in watchers))
    assert problems == [[], []]
    assert await store.revision() == 2  # type: ignore[union-attr]  # one commit for the one change
    (tmp_path / "calc.json").unlink()
    await asyncio.gather(*(w.aapply(w.read([str(tmp_path / "calc.json")])) for w in watchers))
    assert await store.revision() == 3  # type: ignore[union-attr]
    for deck in decks:
        assert "calculator" not in deck.manager and deck.manager.last_served("calculator").version == "1.1.0"  # type: ignore[union-attr]


async def test_on_the_event_loop_a_change_is_awaited_and_from_a_worker_thread_it_waits(fleet: Fleet) -> None:
    here, there = await fleet.started(V1), await fleet.started(V1)
    with pytest.raises(ManagerError, match=r"await the manager's a-form \(await deck\.manager\.aupgrade"):
        here.manager.upgrade(V2)  # this thread runs the loop: it cannot wait for the shared store
    applied = await asyncio.to_thread(here.manager.upgrade, V2)  # a sync tool's thread may: it waits for the loop
    assert applied.action == "upgraded"
    async with client(there) as c:
        assert await until_listed(c, listing(V2), time.monotonic()) < WITHIN


async def test_a_change_not_heard_of_is_caught_up_by_looking_at_the_store(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_module, "RESYNC", 0.05)
    here, there = await fleet.started(V1), await fleet.started(V1)
    there.bind_loop()  # starts its services: the look at the store's revision is one
    assert there.manager.fleet is not None
    there.manager.fleet.subscription.cancel()  # the bus message will be lost to it (Redis away for a moment)
    await here.manager.aupgrade(V2)
    async with client(there) as c:
        assert await until_listed(c, listing(V2), time.monotonic()) < WITHIN


async def emptied(deck: Deck) -> None:
    """The shared store loses everything, as a Redis restarted without persistence does."""
    store = deck.backends.definitions
    if isinstance(store, MemoryDefinitionStore):
        store.__init__()  # type: ignore[misc]
    else:
        await deck.backends.engine.client.flushdb()


async def test_a_store_that_lost_its_state_is_given_it_again_and_changes_go_on(fleet: Fleet) -> None:
    here, there = await fleet.started(V1), await fleet.started(V1)
    await here.manager.aupgrade(V2)
    async with client(there) as c:
        assert await until_listed(c, listing(V2), time.monotonic()) < WITHIN
    await emptied(here)
    v3 = calc("1.2.0", "add", "subtract", "multiply", "divide")
    applied = await there.manager.aupgrade(v3)  # finds the store empty: writes back what it serves, then commits
    assert (applied.action, applied.old_version) == ("upgraded", "1.1.0")
    async with client(here) as c:  # the new revision 2 is not mistaken for the old one: its epoch differs
        assert await until_listed(c, listing(v3), time.monotonic()) < WITHIN
    assert [d.version for d in here.manager.history("calculator")] == ["1.0.0", "1.1.0"]  # nothing was lost
    with pytest.raises(DefinitionError, match="lower version"):
        await here.manager.aregister(calc("1.0.5"))  # and the rules hold on it


async def test_a_process_that_cannot_make_a_definition_s_tools_serves_none_of_them(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    here = await fleet.started(V1)
    lacking = Deck("fleet", backends=fleet.make_backends())  # no @implements("calculator") in this process
    fleet.at_end(lacking.aclose)
    caplog.set_level(logging.ERROR, "tooldeck.manifest")
    await lacking.open_backends()
    assert "tool definition calculator@1.0.0 cannot be served by this process" in caplog.text
    assert "calculator" in lacking.manager and [t.name for t in lacking.tools] == []
    await here.manager.aupgrade(V2)  # the fleet goes on, and this process follows what it can
    async with client(here) as c:
        assert await listed(c) == listing(V2)


async def test_without_a_definitions_store_the_manager_keeps_its_own(redis_url: str) -> None:
    deck = Deck("alone")
    deck.implements("calculator")(tool_wide)
    deck.manager.register(V1)
    await deck.open_backends()
    assert deck.backends.definitions is None and deck.manager.fleet is None
    assert deck.manager.upgrade(V2).action == "upgraded"  # on the loop's thread, as always
    record = backends_from_spec(redis_url)
    try:
        from tooldeck.manifest.store_redis import RedisDefinitionStore

        assert isinstance(record.definitions, RedisDefinitionStore)  # a redis:// spec shares them
    finally:
        await record.aclose()


def test_until_listed_can_fail() -> None:
    class Stuck:
        async def list_tools(self) -> list[dict[str, Any]]:
            return []

        async def wait_for_notification(self, method: str, timeout: float) -> None:
            raise TimeoutError

    async def run() -> None:
        await until_listed(Stuck(), {"a": "b"}, time.monotonic())  # type: ignore[arg-type]

    with pytest.raises(AssertionError, match="still lists"):
        asyncio.run(run())
