"""The pollInterval tasks advertise (tasks/polling.py, server/task_manager.py): short while a task is young, longer as
it ages, so a client that polls at the advertised rate sees a short task finish soon after it does."""

from __future__ import annotations

import asyncio
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import client
from mcp_schema import check
from stdio_client import StdioServer
from tooldeck import Deck
from tooldeck.server.task_manager import TaskManager
from tooldeck.tasks import PollInterval, TaskRecord

# --- the interval function -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "interval"),
    [(-5.0, 50), (0.0, 50), (0.1, 50), (0.5, 50), (0.6, 60), (1.0, 100), (5.0, 500), (10.0, 1000), (50.0, 5000),
     (3600.0, 5000)],
)  # fmt: skip
def test_the_default_is_a_tenth_of_the_age_between_50_ms_and_5_s(age: float, interval: int) -> None:
    assert PollInterval().at(age) == interval


def test_the_interval_never_shrinks_as_a_task_ages() -> None:
    polling = PollInterval(100, 2000, 0.3)
    intervals = [polling.at(n / 100) for n in range(0, 10_000)]
    assert intervals == sorted(intervals)
    assert (intervals[0], intervals[-1]) == (100, 2000)


def test_a_fixed_interval_is_the_same_at_every_age() -> None:
    fixed = PollInterval.fixed(500)
    assert {fixed.at(age) for age in (0, 0.6, 10, 1e9)} == {500}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"floor_ms": 0}, "floor_ms must be a whole number of milliseconds >= 1, got 0"),
        ({"ceiling_ms": 2.5}, "ceiling_ms must be a whole number of milliseconds >= 1, got 2.5"),
        ({"floor_ms": 500, "ceiling_ms": 100}, "ceiling_ms (100) must not be below floor_ms (500)"),
        ({"fraction": 2}, "fraction must be a number from 0 to 1, got 2"),
        ({"fraction": True}, "fraction must be a number from 0 to 1, got True"),
    ],
)
def test_bad_settings_are_refused_in_words(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        PollInterval(**options)
    assert str(refused.value) == f"poll interval: {message}"


# --- what the task manager advertises ------------------------------------------------------------------------------


def manager(**options: Any) -> TaskManager:
    return TaskManager(None, None, None, None, **options)  # type: ignore[arg-type]  # _wire needs none of them


RUNNING = TaskRecord(task_id="t", tool="slow", created_at=1000.0, ttl_ms=60_000, poll_interval_ms=50)


def test_a_running_task_advertises_the_interval_for_its_age() -> None:
    tasks = manager()
    assert tasks._wire(RUNNING, 1000.0)["pollInterval"] == 50
    assert tasks._wire(RUNNING, 1010.0)["pollInterval"] == 1000
    wire = tasks._wire(RUNNING, 1100.0)
    assert wire["pollInterval"] == 5000
    check("2025-11-25", "Task", wire)


def test_a_finished_task_keeps_the_stored_interval() -> None:
    done = RUNNING.moved("completed", 1100.0, result={"content": []})
    assert manager()._wire(done, 1100.0)["pollInterval"] == 50


def test_poll_interval_ms_keeps_meaning_a_fixed_interval() -> None:
    tasks = manager(poll_interval_ms=500)
    assert tasks.poll_interval == PollInterval.fixed(500)
    assert tasks._wire(RUNNING, 1010.0)["pollInterval"] == 500
    tasks = manager(poll_interval=PollInterval(20, 1000))
    assert tasks._wire(RUNNING, 1000.0)["pollInterval"] == 20


async def test_the_stored_record_and_every_task_on_the_wire_are_valid(tmp_path: Path) -> None:
    deck = Deck("polling", task_store=f"sqlite:{tmp_path / 'tasks.sqlite3'}")
    release = asyncio.Event()

    @deck.tool(task="optional")
    async def wait() -> str:
        await release.wait()
        return "done"

    async with client(deck) as c:  # every message received is checked against the schema
        created = (await c.request("tools/call", {"name": "wait", "arguments": {}, "task": {}}))["task"]
        assert created["pollInterval"] == 50
        check("2025-11-25", "CreateTaskResult", {"task": created})
        got = await c.request("tasks/get", {"taskId": created["taskId"]})
        listed = (await c.request("tasks/list", {}))["tasks"]
        assert 50 <= got["pollInterval"] <= 5000 and 50 <= listed[0]["pollInterval"] <= 5000
        record = await deck.task_manager().store.get(created["taskId"], time.time())
        assert record is not None and record.poll_interval_ms == 50  # an integer, as the schema wants
        check("2025-11-25", "Task", record.to_wire())
        release.set()
        await c.request("tasks/result", {"taskId": created["taskId"]})


# --- a client that polls at the advertised rate, over a real stdio pipe ---------------------------------------------

SLOW_DECK = """
    import asyncio, os
    from tooldeck import Deck
    from tooldeck.tasks import PollInterval

    deck = Deck("slow")
    if os.environ.get("FIXED_POLL_MS"):
        deck.task_manager().poll_interval = PollInterval.fixed(int(os.environ["FIXED_POLL_MS"]))

    @deck.tool(task="required")
    async def slow() -> str:
        await asyncio.sleep(0.6)  # the work this test times: a 0.6 s task
        return "done"
"""


def poll_until_finished(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[float, list[int]]:
    """Run the 0.6 s task; poll tasks/get, sleeping exactly each advertised pollInterval (the client behaviour
    under test); return the seconds from sending the call to seeing it completed, and the intervals seen."""
    path = tmp_path / "slow.py"
    path.write_text(textwrap.dedent(SLOW_DECK))
    with StdioServer("serve", str(path), env=env) as server:
        server.initialize()
        started = time.monotonic()
        task = server.request("tools/call", {"name": "slow", "arguments": {}, "task": {}})["result"]["task"]
        intervals = [task["pollInterval"]]
        while task["status"] == "working":
            time.sleep(task["pollInterval"] / 1000)
            task = server.request("tasks/get", {"taskId": task["taskId"]})["result"]
            intervals.append(task["pollInterval"])
        elapsed = time.monotonic() - started
        assert task["status"] == "completed"
    return elapsed, intervals


def test_a_short_task_reaches_a_client_polling_at_the_advertised_rate_in_under_0_8_s(tmp_path: Path) -> None:
    elapsed, intervals = poll_until_finished(tmp_path)
    assert 0.6 <= elapsed < 0.8, (elapsed, intervals)
    running = intervals[:-1]  # the last is the completed task's: it keeps the interval it was created with
    assert running[0] == 50 and running == sorted(running) and 50 < running[-1] <= 100, intervals


def test_with_a_fixed_500_ms_interval_the_same_task_takes_a_second(tmp_path: Path) -> None:
    # The same measurement with the old fixed interval: what the adaptive one is for (and proof the test can fail).
    elapsed, intervals = poll_until_finished(tmp_path, env={"FIXED_POLL_MS": "500"})
    assert elapsed >= 1.0 and set(intervals) == {500}


def test_the_readme_s_polling_example_runs_as_written() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Tasks: long-running calls", 1)[1].split("\n## ", 1)[0]
    bullet = section.split("- **Polling**", 1)[1].split("\n- ", 1)[0]
    setting, fixed = re.findall(r"`(deck\.task_manager\(\)\.poll_interval = [^`]+|PollInterval\.fixed\(\d+\))`", bullet)
    deck = Deck("readme")
    exec(setting, {"deck": deck, "PollInterval": PollInterval})
    assert deck.task_manager().poll_interval == PollInterval(100, 2000, 0.1)
    assert eval(fixed, {"PollInterval": PollInterval}).at(60) == 500
    assert "a tenth of it, from 50 ms up to 5 s" in bullet and PollInterval() == PollInterval(50, 5000, 0.1)


# --- the task store option -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("redis:x", "task store 'redis:x': use 'memory' or 'sqlite:PATH'"),
        ("sqlite:{tmp}/missing/t.db", "task store 'sqlite:{tmp}/missing/t.db': the directory {tmp}/missing does not exist"),
        ("sqlite:{tmp}", "task store 'sqlite:{tmp}': {tmp} is a directory; give the database file, e.g. sqlite:{tmp}/tasks.sqlite3"),
    ],
)  # fmt: skip
def test_a_task_store_that_cannot_be_used_is_refused_at_start(tmp_path: Path, spec: str, message: str) -> None:
    from tooldeck.tasks.specs import check_store_spec

    with pytest.raises(ValueError) as refused:
        check_store_spec(spec.format(tmp=tmp_path))
    assert str(refused.value) == message.format(tmp=tmp_path)
