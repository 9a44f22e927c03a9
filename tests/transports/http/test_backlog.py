"""Clients that stop reading their SSE streams, against a real uvicorn server on a loopback socket: what waits for
them is bounded (``max_backlog`` messages per stream), the oldest notifications give way with a line in the server
log, responses and requests to the client never do, and everyone else is served meanwhile.

The in-process tests run the server in a thread (``http_server``), so they can look at the backlog itself; the last
one runs ``tooldeck serve --http`` as a subprocess and measures its resident memory, as the issue did.
"""

from __future__ import annotations

import http.client
import importlib.util
import logging
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import orjson
import pytest

from http_client import HttpClient, free_port, initialize_message, wait_for_port
from http_client import serve_http as serve_http_deck
from mcp_schema import LATEST, MODERN, WireChecker
from stdio_client import ROOT, TOOLDECK
from tooldeck.transports.http import HttpApp
from tooldeck.transports.http import modern as modern_exchange
from tooldeck.transports.http.channels import Channel, HttpSession
from tooldeck.transports.http.server import http_server


def load_deck() -> ModuleType:
    """The flood deck, as the subprocess test serves it; the in-process tests wait on its ``sent`` event."""
    spec = importlib.util.spec_from_file_location("flood_deck", Path(ROOT) / "tests/transports/decks/flood.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flood = load_deck()

BACKLOG = 50
SOON = 10.0
SMALL_BUFFER = 4096  # the server's send and the stalled client's receive buffers: little of a flood hides in them


class Live:
    def __init__(self, server: Any, port: int, channels: list[Channel]) -> None:
        self.server = server
        self.app: HttpApp = server.mcp_app
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.channels = channels  # every stream opened, request streams and GET streams alike

    def on_loop(self, fn: Any) -> Any:
        """Run ``fn`` on the server's event loop and return what it returns (the backlog is the loop's to read)."""
        import asyncio

        loop = self.app.deck._loop  # bound by the lifespan startup
        assert loop is not None

        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(SOON)


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


@contextmanager
def serving(**options: Any) -> Iterator[tuple[Live, Warnings]]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)  # accepted sockets inherit it (Linux)
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # connections wait in the backlog until the server accepts: no need to wait for it to start
    port = listener.getsockname()[1]
    server = http_server(flood.deck, port=port, graceful_timeout=1, **options)
    warnings = Warnings()
    logger = logging.getLogger("tooldeck")
    logger.addHandler(warnings)
    flood.sent.clear()
    channels: list[Channel] = []
    open_channel, open_standalone = HttpSession.open_channel, HttpSession.open_standalone

    def recorded(opened: Channel) -> Channel:
        if opened not in channels:
            channels.append(opened)
        return opened

    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="uvicorn")
    with (
        mock.patch.object(HttpSession, "open_channel", lambda self, ids: recorded(open_channel(self, ids))),
        mock.patch.object(HttpSession, "open_standalone", lambda self: recorded(open_standalone(self))),
        mock.patch.object(modern_exchange, "Channel", lambda *args: recorded(Channel(*args))),
    ):
        thread.start()
        try:
            yield Live(server, port, channels), warnings
        finally:
            server.should_exit = True
            thread.join(SOON)
            listener.close()
            logger.removeHandler(warnings)
    assert not thread.is_alive(), "the server did not stop"
    errors = [line for line in warnings.lines if line.startswith(("ERROR", "CRITICAL"))]
    assert errors == []


class StalledClient:
    """A raw socket with a small receive buffer: it sends requests, then reads nothing until told to."""

    def __init__(self, port: int, checker: WireChecker) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)  # before connecting: the window
        self.sock.settimeout(SOON)
        self.sock.connect(("127.0.0.1", port))
        self.checker = checker

    def request(self, method: str, message: Any, headers: dict[str, str]) -> None:
        if message is not None:
            self.checker.sent(message)
        body = orjson.dumps(message) if message is not None else b""
        lines = [f"{method} /mcp HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(body)}",
                 *(f"{k}: {v}" for k, v in headers.items())]  # fmt: skip
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def read_stream(self) -> list[Any]:
        """Read the stream to its end now: every JSON-RPC message in it, each schema-checked."""
        response = http.client.HTTPResponse(self.sock)
        response.begin()
        assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
        messages = []
        for block in response.read().split(b"\n\n"):
            data = [line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
            if data and data != [b""]:
                message = orjson.loads(b"\n".join(data))
                self.checker.received(message)
                messages.append(message)
        return messages

    def close(self) -> None:
        self.sock.close()


def headers(session: str | None, version: str = LATEST) -> dict[str, str]:
    found = {"content-type": "application/json", "accept": "application/json, text/event-stream",
             "mcp-protocol-version": version}  # fmt: skip
    if session is not None:
        found["mcp-session-id"] = session
    if version == MODERN:  # the mirrored headers of a 2026-07-28 tools/call
        found |= {"mcp-method": "tools/call", "mcp-name": "flood"}
    return found


def flood_call(lines: int, modern: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "flood", "arguments": {"lines": lines, "size": 1000}}
    if modern:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {},
                           "io.modelcontextprotocol/clientInfo": {"name": "stalled", "version": "1"},
                           "io.modelcontextprotocol/logLevel": "info"}  # fmt: skip
    return {"jsonrpc": "2.0", "id": "flood", "method": "tools/call", "params": params}


def others_are_served(live: Live) -> None:
    with HttpClient(live.url) as client:
        session = client.initialize()
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
        }
        assert client.post(call, session=session).json()["result"]["structuredContent"] == {"result": 5}


def queued(live: Live) -> list[int]:
    """How many messages wait, not yet written, on each stream the server opened (a 2026-07-28 request has no
    session, so no registry holds its channel: the channels are recorded as they open, see ``serving``)."""
    return live.on_loop(lambda: [len(channel.queue) for channel in live.channels])


# --- a call's stream ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_calls_stream_that_is_not_read_keeps_at_most_the_backlog_and_its_response(era: str) -> None:
    lines = 3000
    modern = era == MODERN
    with serving(max_backlog=BACKLOG) as (live, warnings):
        checker = WireChecker(name=f"stalled client ({era})")
        session = None
        if not modern:
            with HttpClient(live.url) as opener:
                session = opener.initialize()  # the stalled client's session; opened by a client that reads
            checker.sent(initialize_message())
        stalled = StalledClient(live.port, checker)
        try:
            stalled.request("POST", flood_call(lines, modern), headers(session, MODERN if modern else LATEST))
            assert flood.sent.wait(SOON), "the tool did not finish sending"
            others_are_served(live)  # while the stalled stream is full
            backlog = queued(live)
            assert max(backlog) <= BACKLOG + 1  # the oldest notifications gave way; the response waits with the rest
            messages = stalled.read_stream()
        finally:
            stalled.close()
    logged = [m["params"]["data"].split()[1] for m in messages if m.get("method") == "notifications/message"]
    assert messages[-1]["result"]["structuredContent"] == {"result": f"{lines} lines"}
    assert len(logged) < lines  # some were dropped ...
    assert logged[-BACKLOG:] == [str(i) for i in range(lines - BACKLOG, lines)]  # ... the oldest: the last ones came
    assert [int(n) for n in logged] == sorted(int(n) for n in logged)  # in order, with a gap
    assert any("not keeping up" in line and f"{BACKLOG} messages" in line for line in warnings.lines), warnings.lines
    reported = [int(m.group(1)) for m in map(re.compile(r"dropped (\d+) notification").search, warnings.lines) if m]
    assert sum(reported) == lines - len(logged)  # every drop is in the log


# --- the session's GET stream ---------------------------------------------------------------------------------------


def test_a_get_stream_that_is_not_read_keeps_at_most_the_backlog() -> None:
    count = 3000
    with serving(max_backlog=BACKLOG) as (live, warnings), HttpClient(live.url) as client:
        session = client.initialize()
        subscribe = {"jsonrpc": "2.0", "id": "sub", "method": "resources/subscribe", "params": {"uri": flood.WATCHED}}
        assert client.post(subscribe, session=session).json()["result"] == {}
        stalled = StalledClient(live.port, client.checker)  # the same session, so the same checker
        try:
            get_headers = {k: v for k, v in headers(session).items() if k != "content-type"}
            stalled.request("GET", None, get_headers | {"accept": "text/event-stream"})
            call = {"jsonrpc": "2.0", "id": "updates", "method": "tools/call",
                    "params": {"name": "updates", "arguments": {"count": count, "size": 1000}}}  # fmt: skip
            assert client.post(call, session=session).json()["result"]["structuredContent"] == {
                "result": f"{count} updates"
            }
            others_are_served(live)
            assert max(queued(live)) <= BACKLOG
            live.on_loop(lambda: live.app.registry.live[session].close())  # ends the GET stream: read what it had
            messages = stalled.read_stream()
        finally:
            stalled.close()
    uris = [m["params"]["uri"].rsplit("/", 1)[1] for m in messages]
    assert len(uris) < count
    assert uris[-BACKLOG:] == [str(i) for i in range(count - BACKLOG, count)]  # the newest updates are kept
    assert any("not keeping up" in line for line in warnings.lines), warnings.lines


# --- the measurement: a real `tooldeck serve --http`, 100,000 lines of 1 KB ----------------------------------


def said(stderr: Any) -> bytes:
    """The next line the flood deck's tools wrote on the server's stderr (the banner and log lines are skipped)."""
    while line := stderr.readline():
        if line.startswith(b"flood: "):
            return bytes(line)
    raise EOFError("the server closed stderr")


def resident_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the server's memory from /proc")
def test_a_server_flooding_a_client_that_never_reads_stays_within_a_few_mib() -> None:
    port = free_port()
    proc = subprocess.Popen([*TOOLDECK, "serve", "tests/transports/decks/flood.py", "--http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        wait_for_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        with HttpClient(url) as client:
            session = client.initialize()
            with client.stream(flood_call(2000), session=session) as warm:  # every code path loaded, once
                assert list(warm.messages())[-1]["result"]["structuredContent"] == {"result": "2000 lines"}
        assert proc.stderr is not None
        assert said(proc.stderr).startswith(b"flood: 2000 lines sent")
        before = resident_mib(proc.pid)
        checker = WireChecker(name="stalled client (subprocess)")
        checker.sent(initialize_message())
        stalled = StalledClient(port, checker)
        try:
            stalled.request("POST", flood_call(100_000), headers(session))
            line = said(proc.stderr)  # the tool says so when it has sent all of them
            assert line.startswith(b"flood: 100000 lines sent"), line
            grown = resident_mib(proc.pid) - before
            with HttpClient(url) as other:  # still serving
                other_session = other.initialize()
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}  # fmt: skip
                assert other.post(call, session=other_session).json()["result"]["structuredContent"] == {"result": 3}
            messages = stalled.read_stream()
        finally:
            stalled.close()
        assert messages[-1]["result"]["structuredContent"] == {"result": "100000 lines"}
        assert grown < 20, f"resident memory grew by {grown:.0f} MiB"  # unbounded, it was +140 MiB
    finally:
        proc.kill()
        proc.communicate()


def test_serve_takes_the_backlog_bound_on_the_command_line() -> None:
    # An async tool that sends 400 lines without yielding: with --max-backlog 3 only the last three wait for the
    # stream when it is written, then the response (the default, 1000, would keep all 400).
    with serve_http_deck("tests/transports/decks/flood.py", "--max-backlog", "3") as url, HttpClient(url) as client:
        session = client.initialize()
        with client.stream(flood_call(400), session=session) as stream:
            messages = list(stream.messages())
    assert [m["params"]["data"].split()[1] for m in messages[:-1]] == ["397", "398", "399"]
    assert messages[-1]["result"]["structuredContent"] == {"result": "400 lines"}
