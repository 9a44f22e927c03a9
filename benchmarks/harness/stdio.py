"""One MCP server process driven over stdio with blocking pipes and newline-delimited JSON (orjson, no SDK)."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

PROTOCOL_VERSION = "2025-11-25"
INITIALIZE_PARAMS = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "tooldeck-bench", "version": "1.0.0"},
}
CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class ServerFailed(Exception):
    """The server exited, stopped answering, or broke the protocol badly enough that measuring must stop."""


class StdioServer:
    """A spawned server: write requests, read replies; notifications and server requests are handled aside."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], cwd: str, cpus: set[int] | None = None, timeout: float = 60.0
    ) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.notifications = 0
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process; closed in close()
        client_cpus = os.sched_getaffinity(0)
        if cpus is not None:
            os.sched_setaffinity(0, cpus)  # the child, and every thread it starts, inherits this
        try:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=dict(env), cwd=cwd
            )
        finally:
            os.sched_setaffinity(0, client_cpus)
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
        """CPU time so far: (utime+stime from /proc/pid/stat, in ns but 10 ms ticks; the ns sum of the live
        threads' schedstat or None; the live thread ids, so a caller can tell whether a thread came or went)."""
        with open(f"/proc/{self.pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        ticks = (int(fields[11]) + int(fields[12])) * CLOCK_TICK_NS  # utime, stime: fields 14, 15 of stat(5)
        tids = frozenset(os.listdir(f"/proc/{self.pid}/task"))
        precise: int | None = 0
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat", "rb") as f:
                    precise += int(f.read().split()[0])  # type: ignore[operator]
            except (FileNotFoundError, ProcessLookupError):
                precise = None
                break
        return ticks, precise, tids

    def memory_kb(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) of the server process, in kB."""
        values = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0])
        return {"rss_kb": values["VmRSS"], "hwm_kb": values["VmHWM"]}

    # -- shutdown -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close stdin (the stdio way to say goodbye), then escalate if the server lingers."""
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._stderr.close()

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _stderr_tail(self, limit: int = 1500) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=0.2)  # let a dying server finish writing its traceback
        fd = self._stderr.fileno()  # shared with the child: pread, so its write offset stays put
        size = os.fstat(fd).st_size
        text = os.pread(fd, 4 * limit, max(0, size - 4 * limit)).decode(errors="replace").strip()
        return f"; stderr: ...{text[-limit:]}" if text else ""
