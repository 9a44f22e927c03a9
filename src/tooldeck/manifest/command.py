"""The ``command`` handler of a tool definition: a capability served by an external program, run once per call with
the arguments as one JSON object on stdin and its stdout as the result.

How arguments reach the program: only on stdin. Its command line is the definition's ``command`` list exactly, the
same at every call, and its environment is the allow-list below: no value a client sends is ever a command-line
word, so none can become an option (``--output=source``) or a second file name. A ``command`` word that looks like
it expects a parameter to be put there (``{path}``, ``$path``, ``${path}``) is refused at load, saying so.

Everything that can be checked before a call is checked at load (the program exists and is executable, the working
directory exists), so a definition that loads never yields a tool that cannot start. A call runs the program without
a shell, in its own session, with an allow-listed environment; on a time-out, an oversized output or a cancelled
call the whole process group is killed, so a grandchild the program started does not outlive the call.

What the program writes is its own business: a failure (non-zero exit, signal, time-out) or output that breaks the
tool's outputSchema reaches the client as one short line with a reference; the program's stderr and the mismatch go
to the server log under that reference (a script's stderr may hold anything, a ``PASSWORD=`` line included). The
files a command names (its program given as a path, and arguments naming files in its working directory) are part of
the definition's digest; a file changed since its definition was loaded is refused at the call, until the change is
served under a new version.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import shutil
import signal
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol.errors import RegistrationError, ToolError
from .scripts import file_digest, named_files, stat_key

if TYPE_CHECKING:
    from ..schema.validate import Validator

log = logging.getLogger("tooldeck.manifest.command")

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
    """Runs one command per call. ``parameters``: the capability's parameter names (none may be written into the
    command); ``files``: the digests of the files the command names, as the definition's digest took them
    (``command_files``); ``output``: the tool's output validator and whether results are wrapped as ``{"result":
    ...}``, so that output breaking it is reported here, without echoing it to the client."""

    def __init__(
        self,
        spec: dict[str, Any],
        *,
        base_dir: str,
        tool: str,
        capability: str,
        where: str,
        parameters: Collection[str] = (),
        files: dict[str, str] | None = None,
        output: tuple[Validator, bool] | None = None,
        label: str = "",
    ) -> None:
        command = spec["command"]
        if not command or not all(isinstance(part, str) and part for part in command):
            raise RegistrationError(f"{where}: command must be a non-empty list of non-empty strings")
        self.display: str = command[0]
        self.args: list[str] = list(command[1:])
        self.tool = tool
        self.capability = capability
        self.label = label or tool
        base_dir = os.path.abspath(base_dir)
        _refuse_placeholders(command, parameters, set(spec.get("env", ())), where)
        self.program = resolve_program(self.display, base_dir, where)
        self.cwd = resolve_cwd(spec.get("cwd"), base_dir, self.display, where)
        # The files the digest pinned, each with the stat it had when its digest was taken: a call re-reads a file
        # only when its stat changed.
        self.pinned: list[tuple[str, str, tuple[int, ...] | None]] = [
            (path, sha, None) for path, sha in named_files(command, self.cwd, base_dir, files or {})
        ]
        self.output = output
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
        self._check_files()
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
            raise self._failure(f"timed out after {self.timeout:g} s", stderr)
        if stdout.overflowed:
            raise ToolError(
                f"command {self.display!r} was killed: its output exceeded {self.max_output_bytes} bytes "
                "(max_output_bytes)"
            )
        if status < 0:
            raise self._failure(f"was killed by signal {describe_signal(-status)}", stderr)
        if status != 0:
            raise self._failure(f"exited with status {status}", stderr)
        result = parse_output(bytes(stdout.data))
        if self.output is not None:
            self._check_output(result, *self.output)
        return result

    def _failure(self, what: str, stderr: _Output) -> ToolError:
        """The client's short line, with a reference to the log line that holds the stderr tail."""
        ref = new_reference()
        tail = stderr.tail()
        log.error("tool %s.%s: command %r %s [ref %s]%s", self.tool, self.capability, self.display, what, ref,
                  f"; stderr: {tail}" if tail else "; stderr: (empty)")  # fmt: skip
        return ToolError(f"command {self.display!r} {what} (details in the server log, ref {ref})")

    def _check_output(self, result: Any, validator: Validator, wraps: bool) -> None:
        structured = {"result": result} if wraps else result
        if validator.is_valid(structured):
            return
        ref = new_reference()
        problems = "; ".join(validator.errors(structured))
        log.error("tool %s.%s: command %r wrote output that does not match the outputSchema [ref %s]: %s",
                  self.tool, self.capability, self.display, ref, escape(problems))  # fmt: skip
        raise ToolError(
            f"command {self.display!r} wrote output that does not match the tool's outputSchema (details in the "
            f"server log, ref {ref})"
        )

    def _check_files(self) -> None:
        """Refuse to run a file that changed since its digest was taken: the digest is what was approved."""
        for index, (path, pinned, known) in enumerate(self.pinned):
            now = stat_key(path)
            if now is not None and now == known:
                continue
            current = file_digest(path)
            if current != pinned:
                shown = os.path.basename(path)
                log.error("tool %s.%s: %s changed since tool definition %s was loaded (sha256 %s… now %s…)",
                          self.tool, self.capability, path, self.label, pinned[:12], current[:12])  # fmt: skip
                raise ToolError(
                    f"command {self.display!r}: {shown} changed since tool definition {self.label} was loaded; the "
                    "change is served once it has a new version"
                )
            self.pinned[index] = (path, pinned, now)


def new_reference() -> str:
    """A short random id that ties a client's error line to the log line with the details."""
    return secrets.token_hex(4)


def escape(text: str) -> str:
    """``text`` with control characters written as escapes, so a program's output cannot forge log lines."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


# A whole word that is a template of a parameter (or an option set to one): `{path}`, `${path}`, `$path`, `--in={path}`
_PLACEHOLDER = r"(?:-[^=\s]*=)?(?:\{{{0}\}}|\$\{{{0}\}}|\${0})"


def _refuse_placeholders(command: list[str], parameters: Collection[str], env: set[str], where: str) -> None:
    for position, word in enumerate(command):
        for name in parameters:
            if name in env:  # $NAME is an environment variable the definition passes through
                continue
            if re.fullmatch(_PLACEHOLDER.format(re.escape(name)), word):
                raise RegistrationError(
                    f"{where}: command[{position}] names parameter {name!r}, but arguments never reach the command "
                    "line (a value starting with '-' would become an option there): the program reads them as one "
                    "JSON object on stdin"
                )


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
        """The last lines, on one line, each cut short and escaped; empty when nothing (but blanks) was written."""
        text = self.data.decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()][-STDERR_LINES:]
        cut = [line if len(line) <= STDERR_LINE_CHARS else line[: STDERR_LINE_CHARS - 1] + "…" for line in lines]
        return " | ".join(escape(line) for line in cut)


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
