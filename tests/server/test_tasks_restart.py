"""Tasks in a SQLite store outlive the process: a finished result survives a restart, and a task that was running
when its process was SIGKILLed is taken over once its lease runs out, never left in "working". Two live processes
share the store without touching each other's running tasks."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

from stdio_client import StdioServer
from tooldeck.server.takeover import STOPPED

DECK = "tests/transports/decks/tasks_deck.py"  # a lease of 1 s, renewed every 0.2 s
FLEET = "tests/transports/decks/fleet_deck.py"  # a lease of 1.5 s, renewed every 0.25 s
TAKEOVER_WITHIN = 1.5 + 0.25 + 3.0  # the lease, one renewal period, and a grace for a loaded machine


def serve(store: Path, deck: str = DECK) -> StdioServer:
    server = StdioServer("serve", deck, "--task-store", f"sqlite:{store}")
    reply = server.initialize()
    assert "tasks" in reply["result"]["capabilities"]
    return server


def test_results_survive_and_running_tasks_fail_after_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "tasks.sqlite3"
    first = serve(store)
    try:
        done = first.request("tools/call", {"name": "quick", "arguments": {"n": 4}, "task": {}}, id="a")
        done_id = done["result"]["task"]["taskId"]
        result = first.request("tasks/result", {"taskId": done_id}, id="b")
        assert result["result"]["structuredContent"] == {"result": 40}
        running = first.request("tools/call", {"name": "slow", "arguments": {}, "task": {}}, id="c")
        running_id = running["result"]["task"]["taskId"]
        assert first.request("tasks/get", {"taskId": running_id}, id="d")["result"]["status"] == "working"
        first.proc.send_signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
    finally:
        first.kill()

    second = serve(store)
    try:
        again = second.request("tasks/result", {"taskId": done_id}, id="e")["result"]
        assert again["structuredContent"] == {"result": 40}
        assert again["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": done_id}}
        ended = second.request("tasks/result", {"taskId": running_id}, id="f")["result"]  # waits for the takeover
        assert ended["isError"] is True and ended["content"] == [{"type": "text", "text": STOPPED}]
        interrupted = second.request("tasks/get", {"taskId": running_id}, id="g")["result"]
        assert (interrupted["status"], interrupted["statusMessage"]) == ("failed", STOPPED)
        listed = second.request("tasks/list", {}, id="h")["result"]["tasks"]
        assert {t["taskId"] for t in listed} == {done_id, running_id}
    finally:
        second.kill()


def test_two_processes_share_the_store_and_the_survivor_takes_over_after_the_lease(tmp_path: Path) -> None:
    store, log = tmp_path / "tasks.sqlite3", tmp_path / "runs.log"
    ids = (f"r{n}" for n in itertools.count())
    first, second = serve(store, FLEET), serve(store, FLEET)
    try:
        call = {"name": "slow", "arguments": {}, "task": {}}
        slow = first.request("tools/call", call, id=next(ids))["result"]["task"]["taskId"]
        first.wait_for_stderr(f"slow started in {first.proc.pid}")
        call = {"name": "rerunnable", "arguments": {"log": str(log)}, "task": {}}
        again = first.request("tools/call", call, id=next(ids))["result"]["task"]["taskId"]
        first.wait_for_stderr(f"rerunnable run 1 started in {first.proc.pid}")
        call = {"name": "quick", "arguments": {"n": 4}, "task": {}}
        quick = second.request("tools/call", call, id=next(ids))["result"]["task"]["taskId"]
        assert second.request("tasks/result", {"taskId": quick}, id=next(ids))["result"]["structuredContent"] == {
            "result": 40
        }

        # Both alive for over two leases: the first renews, and the second, looking all along, never takes over.
        looked, until = 0, time.monotonic() + 3.5
        while time.monotonic() < until:
            for task_id in (slow, again):
                assert second.request("tasks/get", {"taskId": task_id}, id=next(ids))["result"]["status"] == "working"
            looked += 1
            time.sleep(0.1)  # an observation window: nothing may happen in it, so there is no event to wait on
        assert looked >= 10

        first.proc.send_signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
        killed = time.monotonic()
        ended = second.request("tasks/result", {"taskId": slow}, id=next(ids))["result"]  # waits for the takeover
        assert ended["isError"] is True and ended["content"] == [{"type": "text", "text": STOPPED}]
        result = second.request("tasks/result", {"taskId": again}, id=next(ids))["result"]
        assert result["structuredContent"] == {"result": f"run 2, in {second.proc.pid}"}
        assert time.monotonic() - killed < TAKEOVER_WITHIN
        assert log.read_text().split() == [str(first.proc.pid), str(second.proc.pid)]  # once each, never a third
        statuses = {t: second.request("tasks/get", {"taskId": t}, id=next(ids))["result"] for t in (slow, again)}
        assert (statuses[slow]["status"], statuses[slow]["statusMessage"]) == ("failed", STOPPED)
        assert statuses[again]["status"] == "completed"
        second.close_stdin()
        assert second.wait() == 0
        stderr = second.stderr_so_far()
        assert "slow started" not in stderr  # a task that is not idempotent never runs again
        assert stderr.count(f"task {slow}: node ") == stderr.count(f"task {again}: node ") == 1  # taken over once
    finally:
        first.kill()
        second.kill()


def test_a_bad_task_store_is_one_clear_line(tmp_path: Path) -> None:
    import subprocess

    from stdio_client import ROOT, TOOLDECK

    for spec, message in (
        ("redis://x", "use 'memory' or 'sqlite:PATH'"),
        (f"sqlite:{tmp_path}/missing/dir/tasks.db", "does not exist"),
    ):
        done = subprocess.run([*TOOLDECK, "serve", DECK, "--task-store", spec], capture_output=True, text=True,
                              cwd=ROOT, timeout=30, input="")  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
