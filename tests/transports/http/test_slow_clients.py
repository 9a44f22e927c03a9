"""Slow and stalled clients against a real uvicorn server on a loopback socket: request heads and bodies that do not
arrive in time, clients that leave mid-body, and the connection cap.

The server runs in a thread of this process (``http_server``, the server ``run_http`` runs), so a test can see what
it holds: its open connections and request tasks are sets that signal a condition when they change. Slow clients
are raw sockets; the normal client served alongside them is ``HttpClient`` (httpx).
"""

from __future__ import annotations

import http.client
import inspect
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from unittest import mock

import orjson
import pytest

from helpers import adder_deck
from http_client import HttpClient, initialize_message
from tooldeck.transports.http import HttpApp
from tooldeck.transports.http.connections import limited_protocol
from tooldeck.transports.http.server import http_server

LIMIT = 0.5  # the header and body time limits of these tests, in seconds
SOON = 5.0  # the bound on any wait for something that should happen at once, or at a time limit
HEAD = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json\r\n"
INITIALIZE = orjson.dumps(initialize_message())


class WatchedSet(set[Any]):
    """A set that notifies ``changed`` on every add and discard: uvicorn keeps its connections and tasks in these."""

    def __init__(self, changed: threading.Condition) -> None:
        super().__init__()
        self.changed = changed

    def add(self, item: Any) -> None:
        with self.changed:
            super().add(item)
            self.changed.notify_all()

    def discard(self, item: Any) -> None:
        with self.changed:
            super().discard(item)
            self.changed.notify_all()


class Live:
    """A running server: its port and URL, its app, and its open connections and request tasks."""

    def __init__(self, server: Any, port: int) -> None:
        self.server = server
        self.app: HttpApp = server.mcp_app
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.changed = threading.Condition()
        self.connections = server.server_state.connections = WatchedSet(self.changed)
        self.tasks = server.server_state.tasks = WatchedSet(self.changed)

    def wait_until(self, predicate: Callable[[], bool], timeout: float = SOON) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), "the server did not get there in time"

    def wait_until_idle(self) -> None:
        """Every connection closed and every request task done: nothing of any client is held."""
        self.wait_until(lambda: not self.connections and not self.tasks)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=SOON)


class ErrorLog(logging.Handler):
    """Errors uvicorn or tooldeck logged while the server ran (an exception in the app, say): the test fails on any."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def serving(parser: str = "httptools", **options: Any) -> Iterator[Live]:
    """The server on a loopback port; ``parser="h11"`` serves with uvicorn's h11 protocol, as where httptools is
    missing."""
    options = {"header_timeout": LIMIT, "body_timeout": LIMIT, **options}
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # connections wait in the backlog until the server accepts: no need to wait for it to start
    port = listener.getsockname()[1]
    without_httptools = mock.patch("tooldeck.transports.http.server.corked_protocol", lambda: None)
    with without_httptools if parser == "h11" else nullcontext():
        server = http_server(adder_deck("slow-clients"), port=port, graceful_timeout=1, **options)
    names = {"h11": "LimitedH11Protocol", "httptools": "LimitedCorkedHttpToolsProtocol"}
    assert server.config.http.__name__ == names[parser]
    live = Live(server, port)
    errors = ErrorLog()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "tooldeck")]
    for logger in loggers:
        logger.addHandler(errors)  # uvicorn configured its loggers when its Config was made: this handler stays
    thread = threading.Thread(target=live.server.run, kwargs={"sockets": [listener]}, name="uvicorn")
    thread.start()
    try:
        yield live
    finally:
        live.server.should_exit = True
        thread.join(SOON * 2)
        listener.close()
        for logger in loggers:
            logger.removeHandler(errors)
    assert not thread.is_alive(), "the server did not stop"
    assert [record.getMessage() for record in errors.records] == []


PARSERS = pytest.mark.parametrize("parser", ["httptools", "h11"])


def read_to_close(sock: socket.socket) -> bytes:
    """All the server sends until it closes the connection (a socket timeout fails the test)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def parse(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one whole response with a content-length."""
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert len(body) == int(headers["content-length"])
    headers.pop("date", None)  # uvicorn's, on the answers the app sends
    return int(status_line.split()[1]), headers, body


def error_body(message: str, code: int = -32600) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "error": {"code": code, "message": message}})


def served(live: Live) -> str:
    """A normal client is served meanwhile: it opens a session and calls a tool. Returns the session's id."""
    with HttpClient(live.url) as client:
        session = client.initialize()
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
        }
        assert client.post(call, session=session).json()["result"]["structuredContent"] == {"result": 5}
    return session


# --- request heads ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /mc", HEAD, HEAD + b"content-len"],
    ids=["nothing", "half a request line", "headers without their end", "half a header"],
)
@PARSERS
def test_a_head_that_stalls_is_closed_at_header_timeout(parser: str, sent: bytes) -> None:
    with serving(parser) as live, live.connect() as slow:
        opened = time.monotonic()
        slow.sendall(sent)
        served(live)  # while the slow client stalls
        data = read_to_close(slow)
        waited = time.monotonic() - opened
        assert LIMIT - 0.05 <= waited < LIMIT + 2
        if sent:  # part of a request arrived: it is answered
            body = error_body("Request Timeout: the request headers did not arrive within 0.5 s")
            assert parse(data) == (408, {"content-type": "application/json", "content-length": str(len(body)),
                                         "connection": "close"}, body)  # fmt: skip
        else:  # a connection that never spoke is just closed
            assert data == b""
        live.wait_until_idle()


@PARSERS
def test_the_next_head_on_a_kept_alive_connection_has_its_own_time_limit(parser: str) -> None:
    with serving(parser) as live, live.connect() as slow:
        slow.sendall(b"GET /elsewhere HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        response = http.client.HTTPResponse(slow)
        response.begin()
        response.read()
        assert response.status == 404 and not response.will_close
        started = time.monotonic()
        slow.sendall(b"GET /elsewhere HTTP/1.1\r\nhost:")  # uvicorn's keep-alive timer stops at the first byte
        data = read_to_close(slow)
        assert LIMIT - 0.05 <= time.monotonic() - started < LIMIT + 2
        assert parse(data)[0] == 408
        live.wait_until_idle()


def test_a_head_that_arrives_slowly_but_in_time_is_served() -> None:
    with serving(header_timeout=2.0) as live, live.connect() as client:
        head = HEAD + b"content-length: %d\r\n\r\n" % len(INITIALIZE)
        for i in range(0, len(head), 16):
            client.sendall(head[i : i + 16])
            time.sleep(0.02)  # the client's pace, not a wait for anything
        client.sendall(INITIALIZE)
        response = http.client.HTTPResponse(client)
        response.begin()
        assert response.status == 200 and response.getheader("mcp-session-id")
        assert orjson.loads(response.read())["result"]["serverInfo"]["name"] == "slow-clients"


# --- request bodies --------------------------------------------------------------------------------------------------

BODY_TIMED_OUT = error_body("Request Timeout: the request body did not arrive within 0.5 s")


@pytest.mark.parametrize(
    "sent",
    [HEAD + b"transfer-encoding: chunked\r\n\r\n10\r\n" + INITIALIZE[:10], HEAD + b"transfer-encoding: chunked\r\n\r\n",
     HEAD + b"content-length: %d\r\n\r\n" % len(INITIALIZE) + INITIALIZE[:-1]],
    ids=["half a chunk", "no chunk", "all but the last byte"],
)  # fmt: skip
def test_a_body_that_stalls_is_408_at_body_timeout_and_its_connection_closed(sent: bytes) -> None:
    with serving(header_timeout=30.0) as live, live.connect() as slow:
        started = time.monotonic()
        slow.sendall(sent)
        session = served(live)
        data = read_to_close(slow)
        assert LIMIT - 0.05 <= time.monotonic() - started < LIMIT + 2
        assert parse(data) == (408, {"content-type": "application/json", "connection": "close",
                                     "content-length": str(len(BODY_TIMED_OUT))}, BODY_TIMED_OUT)  # fmt: skip
        assert list(live.app.sessions) == [session]  # the initialize in the stalled body opened none
        live.wait_until_idle()


def test_a_slow_but_steady_chunked_upload_is_served() -> None:
    with serving(body_timeout=3.0) as live, live.connect() as client:
        client.sendall(HEAD + b"transfer-encoding: chunked\r\n\r\n")
        started = time.monotonic()
        for i in range(0, len(INITIALIZE), 8):  # ~20 chunks over ~1 s: longer than the header time limit
            piece = INITIALIZE[i : i + 8]
            client.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            time.sleep(0.05)  # the client's pace, not a wait for anything
        client.sendall(b"0\r\n\r\n")
        assert time.monotonic() - started > LIMIT
        response = http.client.HTTPResponse(client)
        response.begin()
        assert response.status == 200
        session = response.getheader("mcp-session-id")
        assert orjson.loads(response.read())["result"]["serverInfo"]["name"] == "slow-clients"
        assert session in live.app.sessions


def test_a_client_that_leaves_mid_body_is_released() -> None:
    with serving(body_timeout=30.0) as live:
        with live.connect() as slow:
            slow.sendall(HEAD + b"transfer-encoding: chunked\r\n\r\n10\r\n" + INITIALIZE[:10])
            live.wait_until(lambda: len(live.tasks) == 1)  # the request reached the app and reads its body
        live.wait_until_idle()  # long before the body time limit
        served(live)


async def test_a_body_cut_short_by_a_disconnect_is_not_served() -> None:
    """Even when what came before the disconnect is a whole JSON-RPC request, it is not run, and nothing is sent."""
    deck = adder_deck("cut-short")
    calls: list[str] = []

    @deck.tool
    def mark() -> str:
        calls.append("marked")
        return "marked"

    app = HttpApp(deck, stateless=True)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mark", "arguments": {}}}
    messages = [{"type": "http.request", "body": orjson.dumps(call), "more_body": True}, {"type": "http.disconnect"}]
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"accept", b"application/json")]
    await app({"type": "http", "method": "POST", "path": "/mcp", "headers": headers}, receive, send)
    assert (messages, sent, calls) == ([], [], [])


# --- sessions --------------------------------------------------------------------------------------------------------


def test_deleting_a_session_is_not_held_up_by_its_stalled_body_which_then_times_out() -> None:
    with serving(header_timeout=30.0) as live, HttpClient(live.url) as client:
        session = client.initialize()
        with live.connect() as slow:
            head = HEAD + b"mcp-session-id: %s\r\nmcp-protocol-version: 2025-11-25\r\n" % session.encode()
            slow.sendall(head + b'transfer-encoding: chunked\r\n\r\n4\r\n{"js')
            live.wait_until(lambda: len(live.tasks) == 1)  # the stalled POST is in the app
            assert client.delete(session).status_code == 200
            slow.setblocking(False)
            with pytest.raises(BlockingIOError):  # the stalled POST is not answered yet: the DELETE did not wait for it
                slow.recv(1)
            slow.settimeout(SOON)
            assert live.app.sessions == {}
            assert parse(read_to_close(slow)) == (408, {"content-type": "application/json", "connection": "close",
                                                        "content-length": str(len(BODY_TIMED_OUT))}, BODY_TIMED_OUT)  # fmt: skip
        ping = client.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, session=session)
        assert ping.status_code == 404


# --- the connection cap ----------------------------------------------------------------------------------------------


@PARSERS
def test_connections_past_max_connections_are_refused_at_once_until_one_closes(parser: str) -> None:
    with serving(parser, max_connections=3, header_timeout=30.0) as live:
        kept = [http.client.HTTPConnection("127.0.0.1", live.port, timeout=SOON) for _ in range(3)]
        for connection in kept:
            connection.request("GET", "/elsewhere")  # served, so this connection is surely open on the server
            assert connection.getresponse().read() and connection.sock is not None
        with live.connect() as refused:
            opened = time.monotonic()
            data = read_to_close(refused)
            assert time.monotonic() - opened < 1.0  # at once, not after a time limit
        body = error_body("Service Unavailable: the server has 3 connections open", -32000)
        assert parse(data) == (503, {"content-type": "application/json", "content-length": str(len(body)),
                                     "connection": "close"}, body)  # fmt: skip
        assert len(live.connections) == 3  # the refused connection was never one of them
        kept.pop().close()
        live.wait_until(lambda: len(live.connections) == 2)
        served(live)  # a place is free again
        for connection in kept:
            connection.close()
        live.wait_until_idle()


# --- options ---------------------------------------------------------------------------------------------------------


def test_defaults() -> None:
    server = inspect.signature(http_server).parameters  # run_http passes its options on to http_server
    assert (server["header_timeout"].default, server["max_connections"].default) == (10.0, 1000)
    assert inspect.signature(HttpApp).parameters["body_timeout"].default == 30.0


@pytest.mark.parametrize(("options", "message"), [
    ({"header_timeout": 0, "max_connections": 1}, "header_timeout must be positive, got 0"),
    ({"header_timeout": 1, "max_connections": 0}, "max_connections must be at least 1, got 0"),
])  # fmt: skip
def test_bad_limits_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        limited_protocol(object, **options)  # type: ignore[arg-type]


def test_an_error_the_server_logs_fails_the_test() -> None:
    """The net under every test here: an exception in the app is only logged by uvicorn, so the log is checked."""
    with pytest.raises(AssertionError, match="planted"), serving():
        logging.getLogger("uvicorn.error").error("planted")


async def test_a_body_that_is_there_at_once_is_read_with_no_timer_and_one_on_its_way_under_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from tooldeck.transports.http import exchange

    timers: list[float] = []
    real = asyncio.timeout

    def timeout(delay: float) -> Any:
        timers.append(delay)
        return real(delay)

    monkeypatch.setattr(exchange.asyncio, "timeout", timeout)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})

    async def at_once() -> dict[str, Any]:
        return {"type": "http.request", "body": body}

    async def later() -> dict[str, Any]:
        await asyncio.sleep(0)  # the body is still on its way
        return {"type": "http.request", "body": body}

    def a_future() -> Any:  # an ASGI server may hand out any awaitable
        future = asyncio.get_running_loop().create_future()
        future.set_result({"type": "http.request", "body": body})
        return future

    assert exchange._read_body(at_once, 1000, 5.0) == body and timers == []  # bytes at once: nothing to await
    assert await exchange._read_body(later, 1000, 5.0) == body and timers == [5.0]
    assert await exchange._read_body(a_future, 1000, 5.0) == body and timers == [5.0, 5.0]

    async def never() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    with pytest.raises(exchange.HttpError) as late:
        await exchange._read_body(never, 1000, 0.01)
    assert late.value.status == 408
