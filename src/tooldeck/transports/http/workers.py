"""Several processes on one port: ``tooldeck serve --http --workers N``.

The parent reserves the port and forks N workers that each listen on it (``SO_REUSEPORT``: the kernel spreads the
connections across them); each worker is a node of its own (``<node>-<n>``) and keeps its state in the deck's
shared backends, which are required: N processes with state in memory would tell one client N different stories.
The parent serves nothing. It starts a worker again when one dies (a crash, an out-of-memory kill), and on SIGTERM or
SIGINT it passes the signal on and waits for every worker to drain; SIGHUP it passes on too (each worker reloads its
policy).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...server.core import Server as Deck

log = logging.getLogger("tooldeck.http")

RESPAWN_PAUSE = 1.0  # seconds between two starts of one worker slot, so a worker that dies at once does not spin


def bind(host: str, port: int, *, listen: bool) -> socket.socket:
    """A socket on ``host:port`` that shares its port (``SO_REUSEPORT``): the parent's reserves the port and learns
    it (port 0) without listening; each worker's listens, and the kernel spreads connections across them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind((host, port))
    if listen:
        sock.listen(2048)
    return sock


def _own_audit_trail(deck: Deck) -> None:
    """Give a worker an audit trail of its own, named after its node (``audit.<node>-<n>.jsonl``): the trail the
    policy opened in the parent, before the fork, would be written by every worker, each with a chain of its own, so
    the file would not verify. Applying the policy again replaces what it installed (the parent keeps its lock)."""
    from ...security.apply import apply_policy

    policy = getattr(deck, "policy", None)
    if policy is not None and policy.audit.get("file"):
        apply_policy(deck, policy)


def run_workers(deck: Deck, workers: int, serve: Callable[[Deck, socket.socket], None], *, host: str, port: int,
                endpoint_url: Callable[[str, int], tuple[str, str | None]],
                on_listening: Callable[[str, str | None], None] | None = None) -> None:  # fmt: skip
    """Fork ``workers`` processes that each run ``serve(deck, sock)`` on their socket of the one port; supervise
    until a SIGTERM or SIGINT, then pass it on and wait for every worker to end. ``endpoint_url(host, port)``: the
    URL (and wildcard address) ``on_listening`` is told."""
    if not getattr(deck.backends, "shared", False):
        raise ValueError(
            f"{workers} workers are {workers} processes, which must share their state: give the deck shared "
            "backends (tooldeck serve --backend redis://HOST:PORT/DB); its backends are this process's memory"
        )
    reserved = bind(host, port, listen=False)
    port = reserved.getsockname()[1]
    url, bound = endpoint_url(host, port)
    base = deck.node_id
    children: dict[int, int] = {}  # pid -> worker slot
    stopping: list[int] = []  # the signal that ends the run, once one came

    def start(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: a node of its own, serving until its signal
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until its loop reloads the policy on it
                _end_with_parent()
                deck.node_id = f"{base}-{slot}"
                _own_audit_trail(deck)
                reserved.close()
                serve(deck, bind(host, port, listen=True))
            except BaseException as exc:  # one line in the log; the supervisor starts the slot again
                if not isinstance(exc, KeyboardInterrupt | SystemExit):
                    log.error("worker %s stopped: %s", deck.node_id, exc)
                    code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = slot

    def stop(signum: int, frame: Any) -> None:
        if not stopping:
            stopping.append(signum)
            for pid in list(children):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def hangup(signum: int, frame: Any) -> None:  # every worker reloads its policy
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGHUP)
            except ProcessLookupError:
                pass

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, hangup)
    try:
        for slot in range(workers):
            start(slot)
        if on_listening is not None:
            on_listening(url, bound)
        started: dict[int, float] = {}
        while children:
            try:
                pid, status = os.wait()
            except InterruptedError:
                continue
            except ChildProcessError:
                break
            if pid not in children:
                continue
            slot = children.pop(pid)
            if stopping:
                continue
            log.warning("worker %s-%s ended (%s); starting it again", base, slot, _how(status))
            pause = RESPAWN_PAUSE - (time.monotonic() - started.get(slot, 0.0))
            if pause > 0:
                time.sleep(pause)  # a worker that dies at once is not started again in a tight loop
            started[slot] = time.monotonic()
            start(slot)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        reserved.close()


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _end_with_parent() -> None:
    """Linux: this worker gets SIGTERM (and drains) when the supervisor dies, however it dies, rather than serving on
    unsupervised. Elsewhere nothing (a worker then outlives a supervisor that was killed)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the supervisor died before the line above: end now
        os.kill(os.getpid(), signal.SIGTERM)
