"""A server process seen from outside: spawning it pinned, its CPU time and memory from /proc, its stderr tail."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Any

CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class ServerFailed(Exception):
    """The server exited, stopped answering, or broke the protocol badly enough that measuring must stop."""


def spawn_pinned(
    argv: Sequence[str], env: Mapping[str, str], cwd: str, cpus: set[int] | None, **popen: Any
) -> subprocess.Popen[bytes]:
    """Popen with the child (and every thread it starts) on `cpus`; the client's own pinning is restored."""
    client_cpus = os.sched_getaffinity(0)
    if cpus is not None:
        os.sched_setaffinity(0, cpus)  # the child inherits this
    try:
        return subprocess.Popen(list(argv), env=dict(env), cwd=cwd, **popen)
    finally:
        os.sched_setaffinity(0, client_cpus)


def cpu_ns(pid: int) -> tuple[int, int | None, frozenset[str]]:
    """CPU time so far: (utime+stime from /proc/pid/stat, in ns but 10 ms ticks; the ns sum of the live threads'
    schedstat or None; the live thread ids, so a caller can tell whether a thread came or went)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) * CLOCK_TICK_NS  # utime, stime: fields 14, 15 of stat(5)
    tids = frozenset(os.listdir(f"/proc/{pid}/task"))
    precise: int | None = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                precise += int(f.read().split()[0])  # type: ignore[operator]
        except (FileNotFoundError, ProcessLookupError):
            precise = None
            break
    return ticks, precise, tids


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of the process, in kB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return {"rss_kb": values["VmRSS"], "hwm_kb": values["VmHWM"]}


def stderr_tail(process: subprocess.Popen[bytes], stderr: IO[bytes], limit: int = 1500) -> str:
    """The end of what the server wrote to `stderr` (a file shared with the child), for error messages."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)  # let a dying server finish writing its traceback
    fd = stderr.fileno()  # shared with the child: pread, so its write offset stays put
    size = os.fstat(fd).st_size
    text = os.pread(fd, 4 * limit, max(0, size - 4 * limit)).decode(errors="replace").strip()
    return f"; stderr: ...{text[-limit:]}" if text else ""


def stop(process: subprocess.Popen[bytes], terminate_first: bool = False, grace: float = 3.0) -> None:
    """Wait for the process to exit (after SIGTERM if `terminate_first`), escalating to SIGTERM, then SIGKILL."""
    if terminate_first and process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def switches(pid: int) -> tuple[int, int]:
    """Context switches so far over the process's live threads: (voluntary: it waited; involuntary: preempted)."""
    voluntary = involuntary = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"voluntary_ctxt_switches:"):
                        voluntary += int(line.split()[1])
                    elif line.startswith(b"nonvoluntary_ctxt_switches:"):
                        involuntary += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return voluntary, involuntary
