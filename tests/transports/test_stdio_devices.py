"""stdio over every kind of file a shell attaches: pipes, regular files, /dev/null and a terminal, under uvloop and
asyncio (``tooldeck serve < requests.jsonl > /dev/null`` used to abort with status 134 under uvloop)."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import termios
import threading
import tty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK, checked_replies, handshake
from tooldeck.transports.stdio_lines import pollable

BLOCKING = "tests/transports/decks/blocking.py"
CALLS = 20


def call(request_id: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": f"n{request_id}"}}}  # fmt: skip


class Terminal:
    """A pseudo-terminal: the server gets the slave end, the test drives the master end."""

    def __init__(self, *, raw: bool) -> None:
        self.master, self.slave = pty.openpty()
        attributes = termios.tcgetattr(self.slave)
        attributes[3] &= ~termios.ECHO  # typed input is not echoed back onto the master's output
        termios.tcsetattr(self.slave, termios.TCSANOW, attributes)
        if raw:
            tty.setraw(self.slave)  # no "\n" -> "\r\n" on output: the server's bytes arrive as written

    def type_lines(self, data: bytes) -> threading.Thread:
        """Types ``data`` (complete lines) and then the terminal's end-of-file key, from a thread (the line
        discipline's buffer is small: writes block until the server reads)."""

        def type_all() -> None:
            os.write(self.master, data)
            os.write(self.master, termios.tcgetattr(self.slave)[6][termios.VEOF])  # ^D, on a line of its own

        thread = threading.Thread(target=type_all, daemon=True)
        thread.start()
        return thread

    def collect(self) -> tuple[threading.Thread, bytearray]:
        """Reads the master's output from a thread until the last slave descriptor is closed."""
        received = bytearray()

        def read_all() -> None:
            while True:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: every slave descriptor is closed
                    return
                if not chunk:
                    return
                received.extend(chunk)

        thread = threading.Thread(target=read_all, daemon=True)
        thread.start()
        return thread, received

    def close(self) -> None:
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class Socket:
    """A socket pair, as inetd would hand one end to a server for both stdin and stdout; the test has the other."""

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()

    def send_all(self, data: bytes) -> threading.Thread:
        """Sends ``data`` and then EOF (a shutdown of our sending side), from a thread."""

        def send() -> None:
            self.ours.sendall(data)
            self.ours.shutdown(socket.SHUT_WR)

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        return thread

    def collect(self) -> tuple[threading.Thread, bytearray]:
        """Reads what the server writes until it has closed its end (it exited)."""
        received = bytearray()

        def read_all() -> None:
            while chunk := self.ours.recv(65536):
                received.extend(chunk)

        thread = threading.Thread(target=read_all, daemon=True)
        thread.start()
        return thread, received

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


@pytest.fixture
def cleanup() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for thing in opened:
        thing.close()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
@pytest.mark.parametrize(
    ("stdin_kind", "stdout_kind"),
    [
        ("file", "devnull"),  # the reported case: `tooldeck serve < requests.jsonl > /dev/null`
        ("pipe", "devnull"),
        ("file", "pty"),
        ("pty", "pipe"),
        ("pty", "pty"),
        ("devnull", "pipe"),
        ("pipe", "file"),
        ("socket", "socket"),  # one socket for both, as inetd or a supervisor passes it
    ],
)
def test_every_kind_of_stdin_and_stdout_answers_every_call_and_exits_0(
    tmp_path: Path, cleanup: list[Any], loop: str, stdin_kind: str, stdout_kind: str
) -> None:
    sent = [*handshake(), *(call(i) for i in range(CALLS))]
    data = b"".join(orjson.dumps(m) + b"\n" for m in sent)
    waits: list[threading.Thread] = []

    stdin: Any
    wire = Socket() if stdin_kind == "socket" else None
    if wire is not None:
        cleanup.append(wire)
        stdin = wire.theirs.fileno()
    elif stdin_kind == "file":
        (tmp_path / "requests.jsonl").write_bytes(data)
        stdin = open(tmp_path / "requests.jsonl", "rb")  # noqa: SIM115 (closed by the fixture)
        cleanup.append(stdin)
    elif stdin_kind == "devnull":
        stdin = subprocess.DEVNULL
    elif stdin_kind == "pty":
        typing = Terminal(raw=False)  # canonical mode: the end-of-file key ends the input
        cleanup.append(typing)
        stdin = typing.slave
    else:
        stdin = subprocess.PIPE

    stdout: Any
    output: bytearray | None = None
    if wire is not None:
        stdout = wire.theirs.fileno()
    elif stdout_kind == "file":
        stdout = open(tmp_path / "replies.jsonl", "wb")  # noqa: SIM115
        cleanup.append(stdout)
    elif stdout_kind == "devnull":
        stdout = subprocess.DEVNULL
    elif stdout_kind == "pty":
        screen = Terminal(raw=True)
        cleanup.append(screen)
        stdout = screen.slave
    else:
        stdout = subprocess.PIPE

    env = {**os.environ, "TOOLDECK_LOOP": loop}
    proc = subprocess.Popen([*TOOLDECK, "serve", BLOCKING], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                            cwd=ROOT, env=env)  # fmt: skip
    if stdout_kind == "pty":
        os.close(screen.slave)  # the server holds the only slave descriptor now: EIO on the master marks its exit
        screen.slave = -1
        reader, output = screen.collect()
        waits.append(reader)
    if stdin_kind == "pty":
        waits.append(typing.type_lines(data))
    if wire is not None:
        wire.theirs.close()  # the server holds its end now: our reads end when it exits
        reader, output = wire.collect()
        waits += [reader, wire.send_all(data)]
    out, err = proc.communicate(data if stdin_kind == "pipe" else None, timeout=60)
    for thread in waits:
        thread.join(timeout=10)
    assert proc.returncode == 0, err.decode(errors="replace")  # an abort is -6 here (134 in a shell)
    assert b"Traceback" not in err, err.decode(errors="replace")

    if stdout_kind == "devnull":
        return  # nothing to read back; that it exits 0 after all of it is the point
    if stdin_kind == "devnull":
        assert out == b""  # EOF before any request: nothing to answer
        return
    if stdout_kind == "file":
        lines = (tmp_path / "replies.jsonl").read_bytes().splitlines()
    elif stdout_kind in ("pty", "socket"):
        assert output is not None
        lines = bytes(output).splitlines()
    else:
        lines = out.splitlines()
    replies = checked_replies(lines, sent)
    answered = {r["id"]: r for r in replies}
    assert len(replies) == CALLS + 1  # the initialize reply and every call, nothing else
    for i in range(CALLS):
        assert answered[i]["result"]["structuredContent"] == {"result": f"n{i}"}


def test_only_descriptors_the_event_loop_can_watch_are_pollable(tmp_path: Path, cleanup: list[Any]) -> None:
    # uvloop (libuv) aborts the process when the kernel refuses to watch a descriptor, so the answer must be exact
    # for the kinds that reach it: /dev/null is a character device the kernel cannot watch; a terminal is one it can.
    terminal = Terminal(raw=True)
    cleanup.append(terminal)
    devnull = open(os.devnull, "wb")  # noqa: SIM115
    regular = open(tmp_path / "file", "wb")  # noqa: SIM115
    left, right = socket.socketpair()
    cleanup.extend([devnull, regular, left, right])
    read_end, write_end = os.pipe()
    try:
        assert pollable(terminal.slave)
        assert pollable(write_end) and pollable(read_end)
        assert pollable(left.fileno())
        assert not pollable(devnull.fileno())
        assert not pollable(regular.fileno())
        directory = os.open(tmp_path, os.O_RDONLY)
        try:
            assert not pollable(directory)
        finally:
            os.close(directory)
    finally:
        os.close(read_end)
        os.close(write_end)
