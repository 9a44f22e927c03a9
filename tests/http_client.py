"""A schema-checked httpx client for a real Streamable HTTP server (``tooldeck serve --http`` under uvicorn).

Every JSON-RPC message the server sends is checked by a ``WireChecker``: a JSON body of any status (error bodies of
4xx answers included) and each SSE event as it arrives. Violations fail the test at teardown (``conftest.py``).

    with serve_http("tests/transports/decks/noisy.py") as url, HttpClient(url) as http:
        session = http.initialize()
        reply = http.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=session)
        with http.stream({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": ...}, session=session) as s:
            messages = list(s.messages())
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson

from mcp_schema import LATEST, WireChecker
from stdio_client import ROOT, TOOLDECK

ACCEPT_BOTH = "application/json, text/event-stream"
CLIENT_INFO = {"name": "httpx-test", "version": "1"}


def initialize_message(version: str = LATEST) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Return once ``proc`` accepts connections on ``port``; if it exits or ``timeout`` passes first, kill it and raise
    with the end of its stderr (``proc`` must have been started with ``stderr=PIPE``)."""
    deadline = time.monotonic() + timeout
    while True:  # polling a port that is not yet open: there is no event to wait on across processes
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                stderr = proc.communicate()[1].decode(errors="replace")[-2000:]
                raise RuntimeError(f"server did not start: {stderr}") from None
            time.sleep(0.05)  # a poll interval, not a wait for something to happen


@contextmanager
def serve_http(deck: str, *extra: str, start_timeout: float = 20.0) -> Iterator[str]:
    """``tooldeck serve <deck> --http`` on a free loopback port; yields the endpoint URL, kills the server after."""
    port = free_port()
    proc = subprocess.Popen(
        [*TOOLDECK, "serve", deck, "--http", "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        wait_for_port(port, proc, start_timeout)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@contextmanager
def serving_in_thread(deck: Any, timeout: float = 10.0) -> Iterator[int]:
    """uvicorn serving ``deck`` (``http_server``) on a loopback port, in a thread of this process; yields the port."""
    import threading

    from tooldeck.transports.http.server import http_server

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # connections wait in the backlog until the server accepts: no need to wait for it to start
    port = listener.getsockname()[1]
    server = http_server(deck, port=port, graceful_timeout=1)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="uvicorn")
    thread.start()
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout)
        listener.close()
    assert not thread.is_alive(), "the server did not stop"


class Stream:
    """A streamed response; ``messages()`` yields the JSON-RPC messages of its SSE events (or its JSON body)."""

    def __init__(self, response: httpx.Response, checker: WireChecker) -> None:
        self.response = response
        self.checker = checker

    @property
    def status_code(self) -> int:
        return self.response.status_code

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers

    def messages(self) -> Iterator[Any]:
        if not self.response.headers.get("content-type", "").startswith("text/event-stream"):
            body = self.response.read()
            if body:
                yield _checked(self.checker, self.response.status_code, body)
            return
        data: list[str] = []
        for line in self.response.iter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line == "":
                if data and data != [""]:
                    yield _checked(self.checker, self.response.status_code, "\n".join(data).encode())
                data = []


class HttpClient:
    """An ``httpx.Client`` for one MCP endpoint; what it sends and receives goes through its ``checker``."""

    def __init__(self, url: str, *, timeout: float = 10.0, client: httpx.Client | None = None) -> None:
        self.url = url
        self.client = client or httpx.Client(timeout=timeout)
        self.checker = WireChecker(name="HttpClient")

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def headers(self, session: str | None, version: str | None, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": ACCEPT_BOTH}
        if session is not None:
            headers["mcp-session-id"] = session
        if version is not None:
            headers["mcp-protocol-version"] = version
        return headers | (extra or {})

    def post(
        self,
        message: Any,
        *,
        session: str | None = None,
        version: str | None = LATEST,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST one message (or batch); the whole body is read and each JSON-RPC message in it checked."""
        self.checker.sent(message)
        response = self.client.post(
            self.url, content=orjson.dumps(message), headers=self.headers(session, version, headers)
        )
        return self.check(response)

    @contextmanager
    def stream(
        self,
        message: Any = None,
        *,
        method: str = "POST",
        session: str | None = None,
        version: str | None = LATEST,
        headers: dict[str, str] | None = None,
    ) -> Iterator[Stream]:
        """A POST of ``message`` (or a GET when ``method="GET"``) read as it arrives; each event is checked."""
        if message is not None:
            self.checker.sent(message)
        content = orjson.dumps(message) if message is not None else None
        all_headers = self.headers(session, version, headers)
        if method == "GET":
            all_headers = {k: v for k, v in all_headers.items() if k != "content-type"} | {
                "accept": "text/event-stream"
            }
        with self.client.stream(method, self.url, content=content, headers=all_headers) as response:
            yield Stream(response, self.checker)

    def delete(self, session: str) -> httpx.Response:
        return self.check(self.client.delete(self.url, headers={"mcp-session-id": session}))

    def initialize(self, version: str = LATEST) -> str:
        """Initialize a session; returns its id."""
        init = self.post(initialize_message(version), version=None)
        assert init.status_code == 200, init.text
        session = init.headers["mcp-session-id"]
        done = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
        assert done.status_code == 202, done.text
        return session

    def check(self, response: httpx.Response) -> httpx.Response:
        """Check the JSON-RPC in a (read) response got some other way; returns it."""
        body = response.read()
        content_type = response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
                data = [line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
                if data and data != [b""]:
                    _checked(self.checker, response.status_code, b"\n".join(data))
        elif body:
            _checked(self.checker, response.status_code, body)
        return response


def _checked(checker: WireChecker, status: int, data: bytes) -> Any:
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        checker.record(f"HTTP {status} body is not JSON ({exc})", data[:300])
        return None
    checker.received(message)
    return message
