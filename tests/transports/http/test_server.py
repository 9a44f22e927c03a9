"""`tooldeck serve --http` for real: uvicorn on a loopback port, driven by httpx, stopped with SIGTERM."""

from __future__ import annotations

import inspect
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from http_client import HttpClient, free_port, initialize_message, wait_for_port
from stdio_client import ROOT, TOOLDECK

NOISY = "tests/transports/decks/noisy.py"
HELD = "tests/transports/decks/held.py"
TASKS = "tests/transports/decks/tasks_deck.py"


class Server:
    """A real server process on a free loopback port: ``tooldeck serve DECK --http`` by default, or ``command``.

    Its stdin is a pipe (``release`` writes a line: the held deck's tools wait for one); tasks are kept under a
    temporary ``XDG_STATE_HOME`` unless ``env`` names one, so no test writes to the real home directory. As a context
    manager it is stopped (killed if still running) on the way out.
    """

    def __init__(
        self, *extra: str, deck: str = NOISY, env: dict[str, str] | None = None, command: list[str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._state = tempfile.TemporaryDirectory(prefix="tooldeck-state-")
        argv = command or [*TOOLDECK, "serve", deck, "--http", "--port", str(self.port), *extra]
        self.proc = subprocess.Popen(
            [arg.replace("{port}", str(self.port)) for arg in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "XDG_STATE_HOME": self._state.name, **(env or {})},
        )
        try:
            wait_for_port(self.port, self.proc)
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def release(self, line: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        self._state.cleanup()


@pytest.fixture
def server() -> Iterator[Server]:
    with Server() as running:
        yield running


def tool_call(request_id: Any, name: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, **params}}  # fmt: skip


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Each SSE event as its fields (``id``, ``data``, ...), including priming events (an id, empty data)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = f"{fields[name]}\n{value}" if name in fields else value


def test_a_session_over_real_http(server: Server) -> None:
    with HttpClient(server.url) as http:
        session = http.initialize()  # initialize answered 200 with a session id, notifications/initialized 202
        call = http.post(tool_call(2, "add", {"a": 20, "b": 22}), session=session)
        assert call.json()["result"]["structuredContent"] == {"result": 42}

        with http.stream(tool_call(3, "wait", {"seconds": 0.05}, _meta={"progressToken": "w"}), session=session) as s:
            assert s.headers["content-type"] == "text/event-stream"
            messages = list(s.messages())
        assert [m.get("method") for m in messages] == ["notifications/progress", None]
        assert messages[-1]["result"]["structuredContent"] == {"result": "waited"}

        assert http.delete(session).status_code == 200
        assert http.post({"jsonrpc": "2.0", "id": 4, "method": "ping"}, session=session).status_code == 404


RUN_HELD_WITH_GRACE_1 = [
    sys.executable,
    "-c",
    "import sys; sys.path.insert(0, 'tests/transports/decks'); from held import deck; "
    "deck.run(transport='http', port={port}, graceful_timeout=1)",
]
LAUNCHERS = {"tooldeck serve --http": None, "deck.run(graceful_timeout=1)": RUN_HELD_WITH_GRACE_1}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_sigterm_ends_get_streams_at_once_and_a_post_in_flight_still_gets_its_response(launcher: str) -> None:
    with Server(deck=HELD, command=LAUNCHERS[launcher]) as server:
        with HttpClient(server.url) as http:
            session = http.initialize()
            call = tool_call(2, "held", {}, _meta={"progressToken": "h"})
            with http.stream(method="GET", session=session) as get, http.stream(call, session=session) as post:
                assert get.status_code == 200 and post.status_code == 200
                get_events = sse_events(get.response.iter_lines())
                assert next(get_events)["data"] == ""  # the GET stream is open (its priming event)
                messages = post.messages()
                assert next(messages)["method"] == "notifications/progress"  # the tool is running
                server.proc.send_signal(signal.SIGTERM)
                assert list(get_events) == []  # the GET stream ends (a read timeout otherwise) ...
                server.release("after the GET ended")  # ... while the POST is still held: then the tool returns
                rest = list(messages)
        assert rest == [{"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "released: after the GET ended"}],
            "structuredContent": {"result": "released: after the GET ended"}, "isError": False}}]  # fmt: skip
        assert server.proc.wait(15) == 0
        assert b"Traceback" not in server.proc.stderr.read()  # type: ignore[union-attr]


def test_graceful_timeout_defaults_to_10_seconds() -> None:
    from tooldeck.transports.http.server import http_server  # run_http passes its options on to it

    assert inspect.signature(http_server).parameters["graceful_timeout"].default == 10  # the README's "up to 10 s"


def test_sigterm_cancels_a_post_that_outlasts_graceful_timeout_and_exits_0() -> None:
    with Server(deck=HELD, command=RUN_HELD_WITH_GRACE_1) as server:
        with HttpClient(server.url) as http:
            session = http.initialize()
            with http.stream(tool_call(2, "stuck", {}, _meta={"progressToken": "s"}), session=session) as post:
                messages = post.messages()
                assert next(messages)["method"] == "notifications/progress"  # the tool is running
                signalled = time.monotonic()
                server.proc.send_signal(signal.SIGTERM)
                assert server.proc.wait(6) == 0  # 1 s of grace, then the work is cancelled: far sooner than 10 s
                waited = time.monotonic() - signalled
                try:
                    rest = list(messages)
                except httpx.HTTPError:  # the connection was dropped mid-stream
                    rest = []
        assert waited >= 1.0  # the POST was given its grace period first
        assert [m for m in rest if "result" in m or "error" in m] == []  # cancelled work sends no response
        assert b"timeout graceful shutdown exceeded" in server.proc.stderr.read()  # type: ignore[union-attr]


# --- command-line flags ---------------------------------------------------------------------------------------------


def test_allow_host_and_allow_origin_flags() -> None:
    with (
        Server("--allow-host", "mcp.example.com", "--allow-origin", "https://app.example.com") as server,
        HttpClient(server.url) as http,
    ):

        def initialize(headers: dict[str, str]) -> httpx.Response:
            return http.post(initialize_message(), version=None, headers=headers)

        assert initialize({"host": f"mcp.example.com:{server.port}"}).status_code == 200
        refused = initialize({"host": f"evil.example.com:{server.port}"})
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == (  # the command-line flag, and the Python option
            f"Forbidden: Host 'evil.example.com:{server.port}' is not allowed (DNS rebinding protection); allow it "
            "with --allow-host evil.example.com (tooldeck serve) or allowed_hosts=['evil.example.com'] (deck.run, "
            "deck.http_app)"
        )
        assert initialize({"origin": "https://app.example.com"}).status_code == 200
        refused = initialize({"origin": "https://evil.example.com"})
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == (
            "Forbidden: Origin 'https://evil.example.com' is not allowed; allow it with --allow-origin "
            "https://evil.example.com (tooldeck serve) or allowed_origins=['https://evil.example.com'] (deck.run, "
            "deck.http_app)"
        )


def test_probe_flags_and_the_probes_of_a_real_server() -> None:
    with Server("--healthz-path", "/alive", "--readyz-path", "/ready") as server:
        base = f"http://127.0.0.1:{server.port}"
        assert (httpx.get(f"{base}/alive").status_code, httpx.get(f"{base}/alive").text) == (200, "ok\n")
        assert (httpx.get(f"{base}/ready").status_code, httpx.get(f"{base}/ready").text) == (200, "ready\n")
        assert httpx.get(f"{base}/healthz").status_code == 404  # moved


def test_stateless_flag() -> None:
    with Server("--stateless") as server, HttpClient(server.url) as http:
        init = http.post(initialize_message(), version=None)
        assert init.status_code == 200 and "mcp-session-id" not in init.headers
        call = http.post(tool_call(2, "add", {"a": 40, "b": 2}))  # no session, no initialize before it
        assert call.status_code == 200 and "mcp-session-id" not in call.headers
        assert call.json()["result"]["structuredContent"] == {"result": 42}
        get = http.client.get(server.url, headers={"accept": "text/event-stream"})
        assert get.status_code == 405


def test_json_response_flag_answers_json_even_when_progress_comes_first() -> None:
    with Server("--json-response") as server, HttpClient(server.url) as http:
        session = http.initialize()
        call = http.post(tool_call(2, "wait", {"seconds": 0}, _meta={"progressToken": "w"}), session=session)
        assert call.status_code == 200
        assert call.headers["content-type"] == "application/json"
        assert call.json()["result"]["structuredContent"] == {"result": "waited"}


def test_serve_http_keeps_tasks_in_sqlite_under_xdg_state_home(tmp_path: Path) -> None:
    with Server(deck=TASKS, env={"XDG_STATE_HOME": str(tmp_path)}) as server:
        with HttpClient(server.url) as http:
            session = http.initialize()
            created = http.post(tool_call(2, "quick", {"n": 4}, task={}), session=session).json()
            task_id = created["result"]["task"]["taskId"]
            message = {"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task_id}}
            result = http.post(message, session=session).json()
            assert result["result"]["structuredContent"] == {"result": 40}
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(15) == 0
    path = tmp_path / "tooldeck" / "tasks-deck-tasks.sqlite3"
    assert path.is_file(), sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT task_id, status, tool FROM tasks").fetchall()
    assert rows == [(task_id, "completed", "quick")]


def test_bad_flags_and_ports_are_one_clear_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*TOOLDECK, "serve", NOISY, "--http", "--port", str(port)], capture_output=True,
                              text=True, cwd=ROOT, timeout=30)  # fmt: skip
    assert done.returncode != 0
    assert "address already in use" in done.stderr and "Traceback" not in done.stderr, done.stderr
    done = subprocess.run([*TOOLDECK, "serve", NOISY, "--http", "--port", "99999"], capture_output=True, text=True,
                          cwd=ROOT, timeout=30)  # fmt: skip
    assert done.returncode == 2
    assert "must be a port number" in done.stderr


def test_deck_run_http_is_the_same_server() -> None:
    code = (
        "import sys; sys.path.insert(0, 'tests/transports/decks'); from noisy import deck; "
        "deck.run(transport='http', port={port})"
    )
    with Server(command=[sys.executable, "-c", code]) as server:
        with HttpClient(server.url) as http:
            http.initialize()
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(15) == 0


def test_the_deck_served_is_busy_while_more_than_one_request_runs() -> None:
    import threading

    from http_client import serving_in_thread
    from tooldeck import Deck

    deck = Deck("busy")
    entered = threading.Semaphore(0)
    release = threading.Event()

    @deck.tool
    def hold(n: int) -> int:
        entered.release()
        release.wait(10)
        return n

    assert not deck.busy()
    with serving_in_thread(deck) as port, HttpClient(f"http://127.0.0.1:{port}/mcp") as http:
        session = http.initialize()
        answers: list[Any] = []

        def call(n: int) -> None:
            message = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": "hold", "arguments": {"n": n}},
            }
            answers.append(http.post(message, session=session).json())

        callers = [threading.Thread(target=call, args=(n,)) for n in (1, 2)]
        callers[0].start()
        assert entered.acquire(timeout=10)
        assert not deck.busy()  # one request: its audit record would be written at once
        callers[1].start()
        assert entered.acquire(timeout=10)
        assert deck.busy()  # two: uvicorn runs both, and the trail would write their turn's records together
        release.set()
        for caller in callers:
            caller.join(10)
        assert sorted(answer["result"]["structuredContent"]["result"] for answer in answers) == [1, 2]
    assert not deck.busy()
