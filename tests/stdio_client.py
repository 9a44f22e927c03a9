"""A raw stdio MCP client over a real subprocess: every line the server writes is parsed and schema-checked.

For a server fed all its input at once (a file or ``input=``), ``handshake()`` opens the messages and
``checked_replies()`` parses and checks what came back.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from typing import Any

import orjson

from mcp_schema import LATEST, WireChecker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLDECK = [sys.executable, "-m", "tooldeck"]
CLIENT_INFO = {"name": "stdio-test", "version": "1"}


def initialize_message(version: str = LATEST) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}}  # fmt: skip


def handshake(version: str = LATEST) -> list[dict[str, Any]]:
    """The two messages that open a session: initialize (id "init") and notifications/initialized."""
    return [initialize_message(version), {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def checked_replies(lines: list[bytes], sent: list[Any]) -> list[Any]:
    """The messages in a server's output lines, each schema-checked (a line that is not JSON fails here)."""
    checker = WireChecker(name="stdio_client.checked_replies")
    for message in sent:
        checker.sent(message)
    replies = [orjson.loads(line) for line in lines if line.strip()]
    for reply in replies:
        checker.received(reply)
    return replies


class StdioServer:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.checker = WireChecker(name=f"StdioServer({' '.join(args)})")
        self.proc = subprocess.Popen(
            [*TOOLDECK, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        self._buffer = b""
        self._stderr = ""
        self.lines: list[bytes] = []
        self.notifications: list[Any] = []

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.checker.sent(message)
        self.write(orjson.dumps(message) + b"\n")

    def read(self, timeout: float = 10.0) -> Any:
        """The next message from stdout (checked against the schema)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(remaining, 0))
            if not ready:
                raise TimeoutError(f"no message within {timeout}s; stderr: {self.stderr_so_far()}")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise EOFError(f"server closed stdout; stderr: {self.stderr_so_far()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.lines.append(line)
        message = orjson.loads(line)  # anything that is not JSON fails the test here
        self.checker.received(message)
        return message

    def request(self, method: str, params: dict[str, Any] | None = None, id: Any = None) -> Any:
        """Send a request; return its response (notifications that arrive first are kept in ``notifications``)."""
        request_id = id if id is not None else method
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            reply = self.read()
            if "method" in reply and "id" not in reply:
                self.notifications.append(reply)
                continue
            if reply.get("id") == request_id or "id" not in reply:
                return reply

    def initialize(self, version: str = LATEST) -> Any:
        init, initialized = handshake(version)
        reply = self.request("initialize", init["params"], id=init["id"])
        self.send(initialized)
        return reply

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)

    def rest_of_stdout(self) -> bytes:
        """Everything the server writes until it closes stdout; each complete line is checked like ``read()``'s."""
        assert self.proc.stdout is not None
        rest = self._buffer + self.proc.stdout.read()
        self._buffer = b""
        for line in rest.split(b"\n")[:-1]:
            self.lines.append(line)
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.checker.record("a line on stdout that is not JSON", line[:300])
            else:
                self.checker.received(message)
        return rest

    def stderr_so_far(self) -> str:
        """What the server wrote to stderr: all of it once it has exited, else what ``wait_for_stderr`` read."""
        assert self.proc.stderr is not None
        if self.proc.poll() is None:
            return (self._stderr or "(still running)")[-2000:]
        self._stderr += self.proc.stderr.read().decode(errors="replace")
        return self._stderr[-2000:]

    def wait_for_stderr(self, text: str, timeout: float = 10.0) -> str:
        """Read stderr as it arrives until ``text`` is in it; returns all of it read so far."""
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        while text not in self._stderr:
            ready, _, _ = select.select([self.proc.stderr], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise TimeoutError(f"{text!r} not on stderr within {timeout}s; stderr: {self._stderr[-2000:]}")
            chunk = os.read(self.proc.stderr.fileno(), 65536)
            if not chunk:
                raise EOFError(f"server closed stderr before writing {text!r}; stderr: {self._stderr[-2000:]}")
            self._stderr += chunk.decode(errors="replace")
        return self._stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
