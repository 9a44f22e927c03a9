"""A raw Streamable HTTP client: HTTP/1.1 written by hand over keep-alive sockets, parsed without a library.

`ResponseParser` is sans-IO (bytes in, complete responses out: Content-Length or chunked bodies, SSE decoded after
the body ends); `Connection` drives one blocking socket with it (a 2025-11-25 session), `ModernConnection` sends
2026-07-28 requests instead (no session: the envelope in every body, the mirrored headers on every POST);
`HttpServer` is a spawned server on a free port.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from . import eras, process
from .process import ServerFailed
from .stdio import INITIALIZE_PARAMS, PROTOCOL_VERSION

HOST = "127.0.0.1"
PATH = "/mcp"
INITIALIZE = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS})
INITIALIZED = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})


class Response(NamedTuple):
    status: int
    headers: dict[bytes, bytes]  # lower-cased names; a repeated header keeps its last value
    body: bytes

    def messages(self) -> list[Any]:
        """The JSON-RPC messages in the body: one JSON value, or the `data` of each SSE event that has one."""
        kind = self.headers.get(b"content-type", b"").partition(b";")[0].strip().lower()
        if kind == b"application/json":
            return [orjson.loads(self.body)]
        if kind == b"text/event-stream":
            return sse_messages(self.body)
        if not self.body:
            return []
        raise ServerFailed(
            f"HTTP {self.status} with content-type {kind.decode(errors='replace')!r}: {self.body[:200]!r}"
        )

    def reply(self) -> dict[str, Any]:
        """The JSON-RPC response this HTTP response carries (notifications before it skipped). Anything else (not
        200, no response, several) comes back as {"http_status", "body"}, which no reply check accepts."""
        if self.status == 200:
            found = [m for m in self.messages() if isinstance(m, dict) and "method" not in m]
            if len(found) == 1:
                return found[0]
        return {"http_status": self.status, "body": self.body[:300].decode(errors="replace")}


def sse_messages(body: bytes) -> list[Any]:
    """The JSON of each event's `data` lines (joined by newlines); events without data (priming, comments) skipped."""
    messages = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if data and any(data):
            messages.append(orjson.loads(b"\n".join(data)))
    return messages


class ResponseParser:
    """Bytes from one connection in, complete HTTP/1.1 responses out (any number per feed, in order)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._head: tuple[int, dict[bytes, bytes]] | None = None

    def feed(self, data: bytes) -> list[Response]:
        self._buffer += data
        responses = []
        while (response := self._next()) is not None:
            responses.append(response)
        return responses

    def _next(self) -> Response | None:
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return None
            self._head = parse_head(bytes(self._buffer[:end]))
            del self._buffer[: end + 4]
        status, headers = self._head
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = self._chunked()
            if body is None:
                return None
        else:
            length = 0 if status in (204, 304) or status < 200 else int(headers.get(b"content-length", b"0"))
            if len(self._buffer) < length:
                return None
            body = bytes(self._buffer[:length])
            del self._buffer[:length]
        self._head = None
        return Response(status, headers, body)

    def _chunked(self) -> bytes | None:
        """The whole de-chunked body if its last chunk (and trailers) arrived, consuming it; else None."""
        buffer, pos, chunks = self._buffer, 0, []
        while True:
            eol = buffer.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(bytes(buffer[pos:eol]).partition(b";")[0], 16)
            pos = eol + 2
            if size == 0:
                break
            if len(buffer) < pos + size + 2:
                return None
            chunks.append(bytes(buffer[pos : pos + size]))
            pos += size + 2  # the chunk's trailing CRLF
        while True:  # trailer fields, up to an empty line
            eol = buffer.find(b"\r\n", pos)
            if eol < 0:
                return None
            empty = eol == pos
            pos = eol + 2
            if empty:
                del buffer[:pos]
                return b"".join(chunks)


def parse_head(head: bytes) -> tuple[int, dict[bytes, bytes]]:
    lines = head.split(b"\r\n")
    status_line = lines[0]
    if not status_line.startswith(b"HTTP/1.1 "):
        raise ServerFailed(f"not an HTTP/1.1 status line: {status_line[:100]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line[9:12]), headers


def post_bytes(port: int, body: bytes, session_id: bytes | None) -> bytes:
    """One POST to the MCP endpoint, as a client that accepts both answer shapes sends it."""
    head = [
        b"POST %s HTTP/1.1" % PATH.encode(),
        b"Host: %s:%d" % (HOST.encode(), port),
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
    ]
    if session_id is not None:
        head += [b"mcp-session-id: " + session_id, b"mcp-protocol-version: " + PROTOCOL_VERSION.encode()]
    head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def modern_post_bytes(port: int, body: bytes, method: str, name: str | None) -> bytes:
    """One 2026-07-28 POST: no session header; `MCP-Protocol-Version`, `Mcp-Method` and (tools/call, prompts/get,
    resources/read) `Mcp-Name` mirror the body, as the revision requires of every request."""
    head = [
        b"POST %s HTTP/1.1" % PATH.encode(),
        b"Host: %s:%d" % (HOST.encode(), port),
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
        b"MCP-Protocol-Version: " + eras.MODERN_VERSION.encode(),
        b"Mcp-Method: " + method.encode(),
    ]
    if name is not None:
        head.append(b"Mcp-Name: " + name.encode())
    head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class Connection:
    """One keep-alive connection, holding (after `initialize`) one MCP session."""

    modern = False  # the era of its requests

    def __init__(self, port: int, timeout: float = 60.0, sock: socket.socket | None = None) -> None:
        self.port = port
        self.timeout = timeout
        self.sock = sock if sock is not None else socket.create_connection((HOST, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = ResponseParser()
        self.session_id: bytes | None = None
        self.next_id = 1  # initialize is id 1
        self._ready: list[Response] = []

    def reconnect(self) -> None:
        """A fresh TCP connection for the same MCP session (the session is the header, not the socket): servers
        close keep-alive connections left idle for a few seconds, as they are between interleaved rounds."""
        self.sock.close()
        self.sock = socket.create_connection((HOST, self.port), timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = ResponseParser()
        self._ready = []

    def request(self, body: bytes) -> bytes:
        """The bytes of one POST of ``body`` on this connection's session (subclasses add headers)."""
        return post_bytes(self.port, body, self.session_id)

    def call(self, request_id: int, text: str, tool: str = "echo") -> bytes:
        """The bytes of one POST of `tools/call` of ``tool`` with ``{"text": text}``."""
        params = {"name": tool, "arguments": {"text": text}}
        return self.request(eras.message(request_id, "tools/call", params, self.modern))

    def post(self, body: bytes) -> None:
        self.sock.sendall(self.request(body))

    def read_response(self) -> Response:
        while not self._ready:
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                raise ServerFailed("no HTTP response within the timeout") from None
            if not data:
                raise ServerFailed("the server closed the connection")
            self._ready = self.parser.feed(data)
        return self._ready.pop(0)

    def receive(self, data: bytes) -> list[Response]:
        """For callers that read the socket themselves (many connections under one selector)."""
        if not data:
            raise ServerFailed("the server closed the connection")
        return self.parser.feed(data)

    def initialize(self) -> dict[str, Any]:
        """initialize (no session header yet), keep the session id, then notifications/initialized (202)."""
        self.post(INITIALIZE)
        response = self.read_response()
        reply = response.reply()
        result = reply.get("result")
        if reply.get("id") != 1 or not isinstance(result, dict):
            raise ServerFailed(f"bad initialize reply: HTTP {response.status} {response.body[:300]!r}")
        if result.get("protocolVersion") != PROTOCOL_VERSION:
            raise ServerFailed(f"server negotiated protocol {result.get('protocolVersion')!r}")
        self.session_id = response.headers.get(b"mcp-session-id")
        if not self.session_id:
            raise ServerFailed("initialize answered without an mcp-session-id header")
        self.post(INITIALIZED)
        acknowledged = self.read_response()
        if acknowledged.status != 202:
            raise ServerFailed(f"notifications/initialized: HTTP {acknowledged.status}, expected 202")
        return result

    def close(self) -> None:
        self.sock.close()


class ModernConnection(Connection):
    """One keep-alive connection sending 2026-07-28 requests: nothing to initialize, no session id."""

    modern = True

    def request(self, body: bytes) -> bytes:
        """The POST of ``body`` (a request carrying the envelope), its headers mirroring its method and name."""
        sent = orjson.loads(body)
        params = sent.get("params") or {}
        name = params.get("name") if sent["method"] in ("tools/call", "prompts/get") else params.get("uri")
        return modern_post_bytes(self.port, body, sent["method"], name)

    def call(self, request_id: int, text: str, tool: str = "echo") -> bytes:
        params = {"name": tool, "arguments": {"text": text}}
        return modern_post_bytes(self.port, eras.message(request_id, "tools/call", params, True), "tools/call", tool)

    def initialize(self) -> dict[str, Any]:
        raise TypeError("a 2026-07-28 connection has no initialize")


def free_port() -> int:
    """A port nothing listens on now (bound and released; the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class HttpServer:
    """A spawned HTTP server on a free loopback port; `argv` holds "{port}" where the port goes."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, cpus: set[int] | None = None) -> None:
        self.port = free_port()
        self.argv = [arg.replace("{port}", str(self.port)) for arg in argv]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process; closed in close()
        self.process = process.spawn_pinned(
            self.argv, env, cwd, cpus, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr
        )
        self.pid = self.process.pid
        self.connections: list[Connection] = []

    def connect(self, deadline_s: float = 60.0, poll_s: float = 0.001, modern: bool = False) -> Connection:
        """A connection as soon as the server listens: connect, and on refusal retry every `poll_s`.

        There is no event to wait on for "the port is bound", so this polls; the sleep yields the CPU to a server
        pinned to the same one, and a refused connect costs a few µs.
        """
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                sock = socket.create_connection((HOST, self.port), timeout=deadline_s)
                break
            except ConnectionRefusedError:
                if self.process.poll() is not None:
                    raise ServerFailed(f"server exited with code {self.process.returncode}") from None
                if time.monotonic() > deadline:
                    raise ServerFailed(f"nothing listening on port {self.port} after {deadline_s:g} s") from None
                time.sleep(poll_s)
        connection = (ModernConnection if modern else Connection)(self.port, sock=sock)
        self.connections.append(connection)
        return connection

    def cpu_ns(self) -> tuple[int, int | None, frozenset[str]]:
        return process.cpu_ns(self.pid)

    def memory_kb(self) -> dict[str, int]:
        return process.memory_kb(self.pid)

    def stderr_tail(self) -> str:
        return process.stderr_tail(self.process, self._stderr)

    def close(self) -> None:
        """Close the client's connections, then SIGTERM (uvicorn's graceful shutdown), escalating if it lingers."""
        for connection in self.connections:
            connection.close()
        process.stop(self.process, terminate_first=True)
        self._stderr.close()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        tail = self.stderr_tail() if isinstance(exc, ServerFailed | OSError) else ""
        self.close()
        if tail:
            raise ServerFailed(f"{exc}{tail}") from exc  # what the server said about it
