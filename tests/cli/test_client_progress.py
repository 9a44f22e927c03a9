"""``tooldeck call`` while it waits: a progress bar only when stderr is a terminal (a real pty), a task's status while
it is polled, and Ctrl-C (SIGINT) passed on to the server as notifications/cancelled or tasks/cancel."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_client import serve_http
from stdio_client import ROOT, TOOLDECK

DECK = "tests/cli/decks/client_deck.py"


def run_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Runs the command with stderr on a pseudo-terminal; returns (status, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*TOOLDECK, *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT
    )
    os.close(slave)
    seen = bytearray()
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            seen += data
    finally:
        os.close(master)
    assert proc.stdout is not None
    stdout = proc.stdout.read().decode()
    return proc.wait(timeout=60), stdout, seen.decode(errors="replace")


def test_progress_bar_on_a_terminal() -> None:
    status, stdout, terminal = run_on_a_terminal("call", "count_primes", "limit=2000000")
    assert status == 0, terminal
    assert '"count": 148933' in stdout
    assert "\r\x1b[K[" in terminal and "%" in terminal  # a bar redrawn in place
    assert "primes up to 2000000" in terminal  # with the server's message
    assert terminal.endswith("\r\x1b[K")  # and cleared at the end
    assert "\n" not in terminal.replace("\r\n", "\n").strip("\n")  # one line, never a new one


def test_no_progress_when_stderr_is_not_a_terminal() -> None:
    done = subprocess.run(
        [*TOOLDECK, "call", "count_primes", "limit=2000000"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0
    assert done.stderr == ""


def test_task_status_on_a_terminal_is_the_in_place_line() -> None:
    status, stdout, terminal = run_on_a_terminal("call", DECK, "build", "steps=2")
    assert (status, stdout) == (0, "built in 2 steps\n"), terminal
    assert "\r\x1b[Ktask " in terminal and ": working" in terminal
    assert "tooldeck: task" not in terminal  # the line-per-change form is for logs, not terminals
    assert terminal.endswith("\r\x1b[K")


def test_task_required_tool_runs_as_a_task_in_process() -> None:
    done = subprocess.run([*TOOLDECK, "call", DECK, "build", "steps=3"], capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, "built in 3 steps\n"), done.stderr
    lines = done.stderr.splitlines()
    task_id = lines[0].removeprefix("tooldeck: task ").removesuffix(": working")
    assert len(task_id) >= 16 and lines[-1] == f"tooldeck: task {task_id}: completed"


def test_optional_task_with_the_task_option_and_json() -> None:
    done = subprocess.run(
        [*TOOLDECK, "call", "count_primes", "limit=100", "--task", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert '"io.modelcontextprotocol/related-task"' in done.stdout  # the tasks/result answer, as it came
    assert ": completed" in done.stderr


# --- Ctrl-C ---------------------------------------------------------------------------------------------------


def wait_for_lines(proc: subprocess.Popen[bytes], *texts: str, timeout: float = 30.0) -> list[str]:
    """The stderr lines up to the point where each of ``texts`` has been in one of them (in any order). Reads the
    pipe itself: a buffered reader would hold lines that select() no longer sees."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    while not all(text.encode() in seen for text in texts):
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        data = os.read(proc.stderr.fileno(), 65536) if ready else b""
        if not data:
            proc.kill()
            raise AssertionError(f"not all of {texts} came; stderr: {seen!r}")
        seen += data
    return seen.decode().splitlines(keepends=True)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_http(DECK, "--task-store", "memory") as endpoint:
        yield endpoint


@pytest.mark.parametrize("where", ["in process", "stdio", "http"])
@pytest.mark.parametrize("as_task", [False, True], ids=["plain", "task"])
def test_ctrl_c_cancels_the_call_on_the_server(
    where: str, as_task: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    marker = tmp_path / "cancelled"
    args = ["call", "hang", f"marker={marker}", *(["--task"] if as_task else [])]
    if where == "in process":
        args.insert(1, DECK)
    elif where == "stdio":
        args += ["--", sys.executable, "-m", "tooldeck", "serve", DECK]
    else:
        args += ["--url", request.getfixturevalue("url")]
    proc = subprocess.Popen([*TOOLDECK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    # The tool is running (its log line came through) and, for a task, the task was created.
    before = wait_for_lines(proc, "[info] started", *([": working"] if as_task else []))
    proc.send_signal(signal.SIGINT)
    stdout, rest = proc.communicate(timeout=30)
    stderr = "".join(before) + rest.decode()
    assert proc.returncode == 130
    assert stdout == b""
    assert stderr.endswith("tooldeck: interrupted\n")
    if as_task:
        (created,) = [line for line in before if line.endswith(": working\n")]
        task_id = created.strip().removeprefix("tooldeck: task ").removesuffix(": working")
        assert f"tooldeck: task {task_id}: cancelled" in stderr
    if where == "http":  # the server runs on: the cancellation reaches the tool soon, not before we exit
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling a file another process writes: there is no event to wait on
    assert marker.read_text() == "cancelled"  # the tool saw the cancellation
