"""stdio endings as a real subprocess sees them: regular files for stdin/stdout under every loop, EOF that finishes
what was asked, and signals that stop at once even while a sync tool holds a thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK, StdioServer, checked_replies, handshake

BLOCKING = "tests/transports/decks/blocking.py"


def call(request_id: object, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize("which", ["stdin", "stdout", "both"])
def test_regular_files_for_stdin_or_stdout_answer_every_request(tmp_path: Path, loop: str, which: str) -> None:
    # 50 tool calls need the event loop: uvloop used to abort (status 134) on a regular file before answering any.
    sent = [*handshake(), *(call(i, "echo", {"text": f"n{i}"}) for i in range(50))]
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in sent))
    replies_file = tmp_path / "replies.jsonl"
    env = {**os.environ, "TOOLDECK_LOOP": loop}
    with open(requests, "rb") as stdin_file, open(replies_file, "wb") as stdout_file:
        stdin = stdin_file if which in ("stdin", "both") else subprocess.PIPE
        stdout = stdout_file if which in ("stdout", "both") else subprocess.PIPE
        proc = subprocess.Popen([*TOOLDECK, "serve", BLOCKING], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                cwd=ROOT, env=env)  # fmt: skip
        piped_in = requests.read_bytes() if stdin is subprocess.PIPE else None
        out, err = proc.communicate(piped_in, timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    lines = replies_file.read_bytes().splitlines() if stdout is not subprocess.PIPE else out.splitlines()
    replies = checked_replies(lines, sent)
    answered = {r["id"]: r for r in replies}
    assert len(replies) == 51  # the initialize reply and all 50 calls, nothing else
    for i in range(50):
        assert answered[i]["result"]["structuredContent"] == {"result": f"n{i}"}  # type: ignore[index]


def test_a_piped_session_gets_every_answer_before_the_server_exits() -> None:
    # `printf '<initialize>\n<initialized>\n<tools/call>\n' | tooldeck serve`: EOF arrives with the call; the call
    # is finished and answered, then the process exits with status 0 (the spec's stdio shutdown).
    sent = [*handshake(), call("slow", "pause", {"seconds": 0.2}), call("sync", "sleep_sync", {"seconds": 0.2})]
    done = subprocess.run([*TOOLDECK, "serve", BLOCKING], input=b"".join(orjson.dumps(m) + b"\n" for m in sent),
                          capture_output=True, cwd=ROOT, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    replies = checked_replies(done.stdout.splitlines(), sent)
    results = {r["id"]: r["result"]["structuredContent"] for r in replies if "result" in r and r["id"] != "init"}  # type: ignore[index]
    assert results == {"slow": {"result": "paused"}, "sync": {"result": "slept"}}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_at_once_even_while_a_sync_tool_runs(sig: int) -> None:
    with StdioServer("serve", BLOCKING) as server:
        server.initialize()
        server.send({**call("busy", "sleep_sync", {"seconds": 30}), "params": {
            "name": "sleep_sync", "arguments": {"seconds": 30}, "_meta": {"progressToken": "p"}}})  # fmt: skip
        assert server.read()["method"] == "notifications/progress"  # the worker thread is now asleep
        server.proc.send_signal(sig)
        start = time.monotonic()
        assert server.wait(timeout=10) == 0
        assert time.monotonic() - start < 5  # not held for the 30 s the thread sleeps
        assert server.rest_of_stdout() == b""  # the late result is dropped: no response after the signal


def test_run_stdio_takes_the_drain_timeout(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(ROOT) / 'tests' / 'transports' / 'decks')!r})\n"
        "from blocking import deck\n"
        "deck.run(drain_timeout=0.5)\n"
    )
    sent = [*handshake(), call("slow", "pause", {"seconds": 30})]
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], input=b"".join(orjson.dumps(m) + b"\n" for m in sent),
                          capture_output=True, cwd=ROOT, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert time.monotonic() - start < 15  # the 30 s call was cut at the 0.5 s drain
    replies = checked_replies(done.stdout.splitlines(), sent)
    assert [r.get("id") for r in replies] == ["init"]  # the cancelled call gets no response
