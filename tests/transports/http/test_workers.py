"""`tooldeck serve --http --workers N`: N processes on one port (SO_REUSEPORT), each a node of its own over the
deck's shared backends (a real Redis), a worker that dies started again, and SIGTERM draining them all; refused
with one line for a deck whose state is this process's memory."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_client import HttpClient, free_port, wait_for_port
from stdio_client import ROOT, TOOLDECK

DECK = "tests/transports/decks/workers_deck.py"


@pytest.fixture
def workers(redis_url: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    proc = subprocess.Popen([*TOOLDECK, "serve", DECK, "--http", "--port", str(port), "--workers", "3",
                             "--backend", redis_url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        wait_for_port(port, proc)
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.poll() is None:
            proc.kill()  # the supervisor, killed: its workers end with it (they hold its stderr until they do)
        proc.communicate(timeout=30)


def who_answers(url: str, connections: int) -> set[str]:
    """What `whoami` says over ``connections`` new connections (each may reach another worker)."""
    seen = set()
    for _ in range(connections):
        with HttpClient(url) as http:  # a client of its own: a connection of its own
            session = http.initialize()
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
            seen.add(http.post(call, session=session).json()["result"]["content"][0]["text"])
    return seen


def children(pid: int) -> set[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return {int(child) for child in found}


def test_three_workers_share_one_port_and_each_is_a_node_of_its_own(
    workers: tuple[subprocess.Popen[bytes], str],
) -> None:
    proc, url = workers
    seen = who_answers(url, 60)
    pids = {line.split()[0] for line in seen}
    nodes = {line.split()[1] for line in seen}
    assert len(pids) == 3 and len(nodes) == 3, seen  # the connections reached every worker
    assert pids == {str(pid) for pid in children(proc.pid)}
    assert len({node.rsplit("-", 1)[0] for node in nodes}) == 1  # <deck's node>-<slot>


def test_a_worker_that_dies_is_started_again_and_sigterm_ends_them_all(
    workers: tuple[subprocess.Popen[bytes], str],
) -> None:
    proc, url = workers
    first = children(proc.pid)
    victim = min(first)
    os.kill(victim, signal.SIGKILL)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    while "starting it again" not in line:
        assert line, "the supervisor ended without starting the worker again"
        line = proc.stderr.readline().decode()
    assert "killed by signal 9" in line
    assert len(who_answers(url, 30)) >= 1  # served meanwhile
    now = children(proc.pid)
    assert len(now) == 3 and victim not in now and len(now & first) == 2
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert all(not Path(f"/proc/{pid}").exists() for pid in now)


def test_workers_need_shared_backends(tmp_path: Path) -> None:
    deck = tmp_path / "app.py"
    deck.write_text("from tooldeck import Deck\ndeck = Deck('solo')\n")
    done = subprocess.run([*TOOLDECK, "serve", str(deck), "--http", "--workers", "2", "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == ("tooldeck: --workers 2 runs 2 processes, which must share their state: give --backend "
                           "redis://HOST:PORT/DB (or a deck whose backends are shared)\n")  # fmt: skip


def test_each_worker_writes_an_audit_trail_of_its_own_that_verifies(redis_url: str, tmp_path: Path) -> None:
    # The policy's trail is opened before the workers are forked; were it kept, every worker would write one file,
    # each with a chain of its own starting at seq 0, and `audit verify` would find records out of order.
    (tmp_path / "policy.toml").write_text(f'[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n')
    port = free_port()
    proc = subprocess.Popen([*TOOLDECK, "serve", DECK, "--http", "--port", str(port), "--workers", "2",
                             "--backend", redis_url, "--policy", str(tmp_path / "policy.toml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        wait_for_port(port, proc)
        nodes = {line.split()[1] for line in who_answers(f"http://127.0.0.1:{port}/mcp", 30)}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert len(nodes) == 2, nodes
    trails = sorted(tmp_path.glob("audit.*.jsonl"))
    written = {trail.name: len(trail.read_bytes().splitlines()) for trail in trails}
    assert {f"audit.{node}.jsonl" for node in nodes} <= set(written) and sum(written.values()) == 30, written
    done = subprocess.run([*TOOLDECK, "audit", "verify", *map(str, trails)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
