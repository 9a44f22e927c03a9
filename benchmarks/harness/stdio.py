"""One MCP server process driven over stdio with blocking pipes and newline-delimited JSON (orjson, no SDK)."""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from . import process
from .process import ServerFailed

PROTOCOL_VERSION = "2025-11-25"
INITIALIZE_PARAMS = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "tooldeck-bench", "version": "1.0.0"},
}


class StdioServer:
    """A spawned server: write requests, read replies; notifications and server requests are handled aside."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str, cpus: set[int] | None = None, timeout: float = 60.0
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.notifications = 0
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process; closed in close()
        self.process = process.spawn_pinned(
            self.argv, env, cwd, cpus, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self.pid = self.process.pid
        self._write_fd = self.process.stdin.fileno()  # type: ignore[union-attr]
        self._read_fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        self._buffer = bytearray()
        self._scanned = 0  # bytes of _buffer already known to hold no newline
        self.next_id = 0

    # -- wire ---------------------------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._write_fd, view) :]
        except BrokenPipeError:
            raise ServerFailed(f"server closed stdin{self._stderr_tail()}") from None

    def send(self, message: dict[str, Any]) -> None:
        self.write(orjson.dumps(message) + b"\n")

    def read_line(self) -> bytes:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if not select.select([self._read_fd], [], [], self.timeout)[0]:
                raise ServerFailed(f"no reply within {self.timeout:g} s{self._stderr_tail()}")
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                raise ServerFailed(f"server closed stdout (exit code {self.process.poll()}){self._stderr_tail()}")
            self._buffer += chunk

    def read_reply(self) -> tuple[dict[str, Any], int]:
        """The next response (skipping notifications and answering server requests) and its size in bytes."""
        while True:
            line = self.read_line()
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise ServerFailed(f"not JSON on stdout: {line[:200]!r}") from None
            if "method" not in message:
                return message, len(line) + 1
            if "id" not in message:
                self.notifications += 1
            elif message["method"] == "ping":
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            else:
                error = {"code": -32601, "message": "the benchmark client offers no capabilities"}
                self.send({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its result; anything but a matching result stops the measurement."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        reply, _ = self.read_reply()
        if reply.get("id") != self.next_id or "result" not in reply:
            raise ServerFailed(f"bad reply to {method}: {orjson.dumps(reply)[:300].decode()}")
        return reply["result"]

    def initialize(self) -> dict[str, Any]:
        """The lifecycle: initialize, wait for the reply, then notifications/initialized."""
        result = self.request("initialize", INITIALIZE_PARAMS)
        if result.get("protocolVersion") != PROTOCOL_VERSION:
            raise ServerFailed(f"server negotiated protocol {result.get('protocolVersion')!r}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    # -- process accounting -------------------------------------------------------------------------------------

    def cpu_ns(self) -> tuple[int, int | None, frozenset[str]]:
        return process.cpu_ns(self.pid)

    def memory_kb(self) -> dict[str, int]:
        return process.memory_kb(self.pid)

    # -- shutdown -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close stdin (the stdio way to say goodbye), then escalate if the server lingers."""
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        process.stop(self.process)
        self._stderr.close()

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _stderr_tail(self) -> str:
        return process.stderr_tail(self.process, self._stderr)
