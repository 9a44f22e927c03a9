"""Tasks in a SQLite store outlive the process: a finished result survives a restart, and a task that was running
when the server was SIGKILLed is reported failed afterwards, never stuck in "working"."""

from __future__ import annotations

import signal
from pathlib import Path

from stdio_client import StdioServer

DECK = "tests/transports/decks/tasks_deck.py"


def serve(store: Path) -> StdioServer:
    server = StdioServer("serve", DECK, "--task-store", f"sqlite:{store}")
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
        interrupted = second.request("tasks/get", {"taskId": running_id}, id="f")["result"]
        assert interrupted["status"] == "failed"
        assert interrupted["statusMessage"] == "interrupted by server restart"
        listed = second.request("tasks/list", {}, id="g")["result"]["tasks"]
        assert {t["taskId"] for t in listed} == {done_id, running_id}
    finally:
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
