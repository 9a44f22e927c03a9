"""``tooldeck dev TARGET``: serve a deck over Streamable HTTP and restart it whenever its files change.

The server is ``tooldeck serve TARGET --http`` in a child process, restarted by watchfiles' ``run_process`` when a
``.py``, ``.json``, ``.yaml``, ``.yml`` or ``.toml`` file changes under the deck's directory (a file target's
directory, a package's directory, a directory of definitions) or the policy file changes. Each start prints the
banner with the command that opens the MCP Inspector; an edit that breaks the deck prints the child's one-line error
and the next change starts it again. Ctrl-C or SIGTERM stop both with status 0.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

WATCHED = (".py", ".json", ".yaml", ".yml", ".toml")


def register(commands: Any, target_help: str) -> None:
    """Adds ``dev`` to the command line."""
    from .options import port

    dev = commands.add_parser(
        "dev", help="serve TARGET over HTTP, restarting when its files change (and how to open the MCP Inspector)"
    )
    dev.add_argument("target", metavar="TARGET", help=target_help)
    dev.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    dev.add_argument("--port", type=port, default=8000, help="port (default 8000; 0: a free one, kept across restarts)")
    dev.add_argument("--policy", default=None, metavar="FILE", help="a security policy (TOML), as for serve")
    dev.set_defaults(command=dev_command)


def dev_command(args: argparse.Namespace) -> int:
    import logging
    import shlex
    import signal

    from watchfiles import PythonFilter, run_process

    paths = watched_paths(args.target, args.policy)
    port = args.port or _free_port(args.host)  # one port for every restart: the Inspector's URL stays valid
    command = [sys.executable, "-m", "tooldeck", "--log-level", args.log_level, "serve", args.target, "--http",
               "--host", args.host, "--port", str(port)]  # fmt: skip
    if args.policy:
        command += ["--policy", args.policy]
    # A restart stops the server with SIGINT, which a child inherits ignored from a parent started in the background
    # by a non-interactive shell; with Python's own handler here, the child starts with the default one.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # watchfiles warns at each Ctrl-C and about a child that had already exited (a broken edit); both are expected.
    logging.getLogger("watchfiles").setLevel(logging.ERROR)
    sys.stderr.write(f"tooldeck dev: watching {', '.join(paths)} ({' '.join(WATCHED)}); a change restarts the "
                     "server, Ctrl-C stops\n")  # fmt: skip
    sys.stderr.flush()
    try:
        run_process(
            *paths,
            target=shlex.join(command),
            target_type="command",
            callback=_changed,
            watch_filter=PythonFilter(extra_extensions=WATCHED[1:]),
            sigint_timeout=10,  # the server's own graceful shutdown takes up to 10 s
        )
    except KeyboardInterrupt:  # run_process turns SIGTERM into this too; outside its watch loop it escapes
        pass
    return 0


def watched_paths(target: str, policy: str | None) -> list[str]:
    """The directories (and policy file) whose changes restart the server; TargetError if the target is nowhere."""
    source, sep, attr = target.rpartition(":")
    if not (sep and attr.isidentifier() and source and len(source) > 1):
        source = target
    if os.path.isdir(source):
        paths = [os.path.abspath(source)]
    elif os.path.isfile(source):
        paths = [os.path.dirname(os.path.abspath(source))]
    elif source.endswith((".py", ".json", ".yaml", ".yml")) or "/" in source or os.sep in source:
        raise TargetError(f"{source}: no such file")
    else:
        paths = [_package_directory(source)]
    if policy:
        if not os.path.isfile(policy):
            raise TargetError(f"{policy}: no such policy file")
        policy = os.path.abspath(policy)
        if not any(policy.startswith(path + os.sep) for path in paths):
            paths.append(policy)
    return paths


def _package_directory(module: str) -> str:
    """The directory of a module's top-level package (or of the module itself), found without importing it."""
    import importlib.util

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as the server will, to import it
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not (spec.submodule_search_locations or spec.origin):
        raise TargetError(f"{module}: no such module (give a path/file.py or an importable module)")
    if spec.submodule_search_locations:
        return os.path.abspath(next(iter(spec.submodule_search_locations)))
    return os.path.dirname(os.path.abspath(str(spec.origin)))


def _changed(changes: set[tuple[Any, str]]) -> None:
    names = sorted({os.path.basename(path) for _, path in changes})
    sys.stderr.write(f"tooldeck dev: {', '.join(names)} changed; restarting\n")
    sys.stderr.flush()


def _free_port(host: str) -> int:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
