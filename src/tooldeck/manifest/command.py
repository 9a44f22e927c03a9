"""The ``command`` handler of a tool definition: a capability served by an external program, run once per call with
the arguments as one JSON object on stdin and its stdout as the result.

Everything that can be checked before a call is checked at load (the program exists and is executable, the working
directory exists), so a definition that loads never yields a tool that cannot start. A call runs the program without
a shell, in its own session, with an allow-listed environment; on a time-out, an oversized output or a cancelled
call the whole process group is killed, so a grandchild the program started does not outlive the call.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from typing import Any

import orjson

from ..protocol.errors import RegistrationError, ToolError

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
# Passed through when set: what a program needs to find other programs and to read and write text as the server does.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
STDERR_KEPT_BYTES = 64 * 1024  # only the tail is ever shown, so more is memory spent on nothing
STDERR_LINES = 10
STDERR_LINE_CHARS = 200
READ_CHUNK = 64 * 1024
# After the group is killed its pipes close at once; the grace only matters when a process that left the group
# (setsid) still holds one, and then the call must still end.
REAP_GRACE = 5.0


class CommandHandler:
    """Runs one command per call."""

    def __init__(self, spec: dict[str, Any], *, base_dir: str, tool: str, capability: str, where: str) -> None:
        command = spec["command"]
        if not command or not all(isinstance(part, str) and part for part in command):
            raise RegistrationError(f"{where}: command must be a non-empty list of non-empty strings")
        self.display: str = command[0]
        self.args: list[str] = list(command[1:])
        self.tool = tool
        self.capability = capability
        base_dir = os.path.abspath(base_dir)
        self.program = resolve_program(self.display, base_dir, where)
        self.cwd = resolve_cwd(spec.get("cwd"), base_dir, self.display, where)
        self.timeout = float(spec.get("timeout", DEFAULT_TIMEOUT))
        if not self.timeout > 0 or self.timeout == float("inf"):
            raise RegistrationError(f"{where}: command {self.display!r}: timeout must be a positive number of seconds")
        self.max_output_bytes = int(spec.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES))
        if self.max_output_bytes <= 0:
            raise RegistrationError(f"{where}: command {self.display!r}: max_output_bytes must be positive")
        self.env_names: tuple[str, ...] = tuple(spec.get("env", ()))

    def __repr__(self) -> str:
        return f"CommandHandler({self.display!r})"

    def environment(self) -> dict[str, str]:
        """What the program sees: the allow-list, read from the server's environment at call time, and its names."""
        env = {name: os.environ[name] for name in (*BASE_ENV, *self.env_names) if name in os.environ}
        env["TOOLDECK_TOOL"] = self.tool
        env["TOOLDECK_CAPABILITY"] = self.capability
        return env

    async def __call__(self, **arguments: Any) -> Any:
        payload = orjson.dumps(arguments)
        try:
            process = await asyncio.create_subprocess_exec(
                self.program,
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=self.environment(),
                start_new_session=True,
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            place = f" ({exc.filename})" if exc.filename else ""
            raise ToolError(f"command {self.display!r} could not be started: {reason}{place}") from None
        stdout = _Output(self.max_output_bytes, keep_tail=False)
        stderr = _Output(STDERR_KEPT_BYTES, keep_tail=True)
        # A task of its own, so that a time-out or a cancellation stops the waiting but not the reading: once the
        # group is killed the readers reach end of file and the process is reaped before the call returns.
        work = asyncio.ensure_future(_communicate(process, payload, stdout, stderr))
        try:
            done, _ = await asyncio.wait([work], timeout=self.timeout)
            status = work.result() if done else None
        except BaseException:  # cancelled, or the pipes failed: the call ends here, so must the command
            kill_group(process.pid)
            await _reap(work)
            raise
        if status is None:
            kill_group(process.pid)
            await _reap(work)
            raise ToolError(f"command {self.display!r} timed out after {self.timeout:g} s{stderr.tail()}")
        if stdout.overflowed:
            raise ToolError(
                f"command {self.display!r} was killed: its output exceeded {self.max_output_bytes} bytes "
                "(max_output_bytes)"
            )
        if status < 0:
            raise ToolError(f"command {self.display!r} was killed by signal {describe_signal(-status)}{stderr.tail()}")
        if status != 0:
            raise ToolError(f"command {self.display!r} exited with status {status}{stderr.tail()}")
        return parse_output(bytes(stdout.data))


def resolve_program(prog: str, base_dir: str, where: str) -> str:
    """The absolute path of the program ``prog`` names: a path (relative to ``base_dir``) or a name on the PATH."""
    if "/" not in prog:
        found = shutil.which(prog)
        if found is None:
            raise RegistrationError(
                f"{where}: command {prog!r}: not found on the server's PATH (write ./{prog} for a file next to the "
                "definition)"
            )
        return os.path.abspath(found)
    path = os.path.normpath(os.path.join(base_dir, prog))
    if not os.path.exists(path):
        raise RegistrationError(f"{where}: command {prog!r}: no such file (looked in {path})")
    if not os.path.isfile(path):
        raise RegistrationError(f"{where}: command {prog!r}: is not a regular file ({path})")
    if not os.access(path, os.X_OK):
        raise RegistrationError(f"{where}: command {prog!r}: is not executable (chmod +x it)")
    return path


def resolve_cwd(cwd: str | None, base_dir: str, prog: str, where: str) -> str:
    """The absolute working directory: ``cwd`` relative to ``base_dir``, which is also the default."""
    if cwd is None:
        return base_dir
    path = os.path.normpath(os.path.join(base_dir, cwd))
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "no such directory"
        raise RegistrationError(f"{where}: command {prog!r}: cwd {cwd!r}: {what} (looked in {path})")
    return path


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group; a group already gone is what was wanted."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # PermissionError: some systems' answer for a group of zombies
        pass


def describe_signal(number: int) -> str:
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:
        return str(number)


def parse_output(data: bytes) -> Any:
    """The result of a successful run: the output as JSON when it is JSON, else as text."""
    try:
        return orjson.loads(data.strip())
    except orjson.JSONDecodeError:
        return data.decode("utf-8", errors="replace").removesuffix("\n")


class _Output:
    """What was read from one pipe, bounded: the first ``limit`` bytes (stdout) or the last ones (stderr)."""

    def __init__(self, limit: int, *, keep_tail: bool) -> None:
        self.limit = limit
        self.keep_tail = keep_tail
        self.data = bytearray()
        self.overflowed = False

    async def read(self, stream: asyncio.StreamReader | None, pgid: int) -> None:
        """Read to end of file; stdout past the limit kills the group, the rest is drained and dropped."""
        if stream is None:
            return
        while chunk := await stream.read(READ_CHUNK):
            if self.keep_tail:
                self.data += chunk
                del self.data[: -self.limit]
            elif not self.overflowed:
                self.data += chunk
                if len(self.data) > self.limit:
                    self.overflowed = True
                    del self.data[self.limit :]
                    kill_group(pgid)

    def tail(self) -> str:
        """``": "`` and the last lines, one line, each cut short; empty when nothing (but blanks) was written."""
        text = self.data.decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()][-STDERR_LINES:]
        if not lines:
            return ""
        cut = [line if len(line) <= STDERR_LINE_CHARS else line[: STDERR_LINE_CHARS - 1] + "…" for line in lines]
        return ": " + " | ".join(cut)


async def _feed(stdin: asyncio.StreamWriter | None, payload: bytes) -> None:
    """Write the arguments and close stdin; a program that exits without reading them is no failure of the call."""
    if stdin is None:
        return
    try:
        stdin.write(payload)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        stdin.close()


async def _communicate(process: asyncio.subprocess.Process, payload: bytes, stdout: _Output, stderr: _Output) -> int:
    """Feed stdin and read both pipes at once (either side may block on a full pipe), then reap: the exit status."""
    await asyncio.gather(
        _feed(process.stdin, payload),
        stdout.read(process.stdout, process.pid),
        stderr.read(process.stderr, process.pid),
    )
    return await process.wait()


async def _reap(work: asyncio.Future[int]) -> None:
    """Wait (bounded) for the killed process to be read out and reaped; give up on pipes an escaped process holds."""
    if not work.done():
        await asyncio.wait([work], timeout=REAP_GRACE)
    if not work.done():
        work.cancel()
    try:
        await work
    except asyncio.CancelledError:
        if not work.cancelled():  # our own task was cancelled again: the process is killed already
            raise
    except Exception:  # the call already fails, for the reason the caller is given
        pass
