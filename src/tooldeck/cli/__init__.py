"""The ``tooldeck`` command: serve a deck or tool definitions, list a deck's tools or call one, check and compare
tool definition files. Each command lives in its own module, imported only when it runs.

Exit status: 0 success, 1 the tool reported an error (or a definition has problems), 2 bad usage or a target that
cannot be loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

USAGE_ERROR = 2
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_LEVEL_HELP = "server log level on stderr (default: warning)"
LOG_FORMATS = ("text", "json")
LOG_FORMAT_HELP = "the log's lines: text, or one JSON object each, naming the request a line belongs to (default: text)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _plain_serve(argv) or _parser().parse_args(argv)
    from ..server import logs

    logs.configure(args.log_level, getattr(args, "log_format", "text"))
    try:
        return int(args.command(args))
    except TargetError as exc:
        print(f"tooldeck: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _plain_serve(argv: list[str]) -> Any:
    """``serve [TARGET] [--max-message-bytes N] [--quiet]`` without argparse, which costs ~5 ms of start-up
    (gettext, locale, shutil); anything else (help, other options, mistakes) goes through the full parser."""
    if not argv or argv[0] != "serve" or len(argv) > 5:
        return None
    target, limit, quiet, rest = None, None, False, argv[1:]
    if rest and not rest[0].startswith("-"):
        target, rest = rest[0], rest[1:]
    if "--quiet" in rest:
        quiet = True
        rest.remove("--quiet")
    if rest:
        if len(rest) != 2 or rest[0] != "--max-message-bytes" or not rest[1].isdigit() or int(rest[1]) < 1:
            return None
        limit = int(rest[1])
    return SimpleNamespace(
        command=_command("serve", "serve"), target=target, max_message_bytes=limit, quiet=quiet, log_level="warning"
    )


def _command(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A command's function, imported when it runs (``serve`` never pays for the client or the definitions)."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(f"{__name__}.{module}"), function)(args))

    return run


def _parser() -> argparse.ArgumentParser:
    import argparse

    from .options import node_id, port, positive_float, positive_int, probe_path, proxy_address, text

    class CommandParser(argparse.ArgumentParser):
        """A command's parser: it takes ``--log-level`` and ``--log-format`` too, so they may follow the command's
        name. Their default is SUPPRESS, so that one given before the command is not overwritten by the command's
        default."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.add_argument("--log-level", default=argparse.SUPPRESS, choices=LOG_LEVELS, help=LOG_LEVEL_HELP)
            self.add_argument("--log-format", default=argparse.SUPPRESS, choices=LOG_FORMATS, help=LOG_FORMAT_HELP)

    parser = argparse.ArgumentParser(prog="tooldeck", description="Serve Python functions as MCP tools.")
    parser.add_argument("--version", action="version", version=f"tooldeck {_version()}")
    parser.add_argument("--log-level", default="warning", choices=LOG_LEVELS, help=LOG_LEVEL_HELP)
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS, help=LOG_FORMAT_HELP)
    commands = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=CommandParser)
    target_help = "path/file.py[:attr], package.module[:attr], a tool definition (.json/.yaml) or a directory of them"

    serve = commands.add_parser("serve", help="serve a deck over stdio or HTTP (the demo deck without TARGET)")
    serve.add_argument("target", nargs="?", metavar="TARGET", help=target_help)
    serve.add_argument(
        "--watch",
        action="store_true",
        help="TARGET is a directory of tool definitions: apply new, changed and deleted files while serving",
    )
    serve.add_argument(
        "--policy",
        default=None,
        metavar="FILE",
        help="a security policy (TOML): authentication, security levels, rate limits, sanitiser, audit trail",
    )
    serve.add_argument(
        "--name",
        type=text,
        metavar="NAME",
        help="the deck's name (serverInfo.name) when TARGET is tool definitions (default: the directory's name, or "
        "a file's definition id)",
    )
    serve.add_argument(
        "--deck-version",
        type=text,
        metavar="VERSION",
        help="the deck's version (serverInfo.version) when TARGET is tool definitions (default: 0.1.0 for a "
        "directory, a file's definition version)",
    )
    serve.add_argument(
        "--quiet", action="store_true", help="no start-up banner on stderr (name, transport, counts, how to connect)"
    )
    serve.add_argument(
        "--max-message-bytes",
        type=positive_int,
        default=None,
        metavar="N",
        help="largest accepted message (default 4 MiB)",
    )
    serve.add_argument(
        "--drain-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="stdio: after EOF, how long requests already received may take to finish (default 10)",
    )
    serve.add_argument(
        "--backend",
        default=None,
        metavar="SPEC",
        help="where the state lives that must hold across processes: memory, or sqlite:PATH (tasks in that SQLite "
        "file; default: memory, with tasks in memory on stdio and in SQLite in $XDG_STATE_HOME/tooldeck/ for --http)",
    )
    serve.add_argument(
        "--task-store",
        default=None,
        metavar="STORE",
        help="where tasks are kept, whatever the backend: memory, or sqlite:PATH",
    )
    http = serve.add_argument_group("Streamable HTTP")
    http.add_argument("--http", action="store_true", help="serve Streamable HTTP at http://HOST:PORT/mcp")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=port, default=8000, help="port (default 8000)")
    http.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="accept this Host header besides the loopback names ('*': any); repeatable",
    )
    http.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="accept this Origin besides loopback ones ('*': any); repeatable",
    )
    http.add_argument(
        "--trusted-proxy",
        action="append",
        type=proxy_address,
        default=[],
        metavar="ADDRESS",
        help="believe X-Forwarded-For from this proxy (an address or a network, 10.0.0.0/8) when it names an "
        "anonymous caller's address; repeatable",
    )
    http.add_argument(
        "--metrics", action="store_true",
        help="serve Prometheus metrics at --metrics-path to principals with --operator-scope (needs tooldeck[metrics])",
    )  # fmt: skip
    http.add_argument(
        "--tracing", action="store_true",
        help="OpenTelemetry spans per request, to the global tracer provider (set up by the SDK or "
        "opentelemetry-instrument; needs tooldeck[tracing])",
    )  # fmt: skip
    http.add_argument("--metrics-path", type=probe_path, default="/metrics", metavar="PATH",
                      help="where --metrics are served (default /metrics)")  # fmt: skip
    http.add_argument("--operator-scope", default="operator", metavar="SCOPE",
                      help="the scope a principal needs to read the metrics and use the console (default operator)")  # fmt: skip
    http.add_argument(
        "--console", action="store_true",
        help="serve the operator console at /console to principals with --operator-scope (with no authentication: "
        "to this machine only)",
    )  # fmt: skip
    http.add_argument(
        "--access-log", action="store_true",
        help="log a line per HTTP request (method, path, status, duration, principal, client address)",
    )  # fmt: skip
    http.add_argument(
        "--healthz-path", type=probe_path, default="/healthz", metavar="PATH",
        help="the liveness probe, unauthenticated and unaudited ('' turns it off; default /healthz)",
    )  # fmt: skip
    http.add_argument(
        "--readyz-path", type=probe_path, default="/readyz", metavar="PATH",
        help="the readiness probe: 503 while draining or a shared backend is out of reach ('' turns it off; "
        "default /readyz)",
    )  # fmt: skip
    http.add_argument(
        "--header-timeout", type=positive_float, default=10.0, metavar="SECONDS",
        help="a request's headers must arrive within this time (408 or close; default 10)",
    )  # fmt: skip
    http.add_argument(
        "--body-timeout", type=positive_float, default=30.0, metavar="SECONDS",
        help="a request's body must arrive within this time (408; default 30)",
    )  # fmt: skip
    http.add_argument(
        "--max-connections", type=positive_int, default=1000, metavar="N",
        help="open connections at most; more are answered 503 and closed (default 1000)",
    )  # fmt: skip
    http.add_argument(
        "--max-backlog", type=positive_int, default=1000, metavar="N",
        help="messages each SSE stream keeps waiting for a slow client; past it the oldest notification is dropped "
             "(default 1000)",
    )  # fmt: skip
    http.add_argument(
        "--workers", type=positive_int, default=1, metavar="N",
        help="serve with N processes on the one port (needs shared backends: --backend redis://...)",
    )  # fmt: skip
    http.add_argument(
        "--node-id", type=node_id, default=None, metavar="NAME",
        help="this process's name among the processes sharing --backend (in ids that cross processes and in the "
             "audit trail's file name, audit.NAME.jsonl; default: the deck's, else random)",
    )  # fmt: skip
    http.add_argument("--stateless", action="store_true", help="no sessions: each POST stands alone")
    http.add_argument("--json-response", action="store_true", help="answer requests with JSON, never SSE")
    serve.set_defaults(command=_command("serve", "serve"))

    validate = commands.add_parser(
        "validate", help="check tool definition files as serve loads them: schema, rules, handlers, commands"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="a .json/.yaml definition, or a directory of them")
    validate.add_argument("--json", action="store_true", help="print the problems as JSON (for CI)")
    validate.add_argument(
        "--deck", metavar="TARGET",
        help="check against this deck's @deck.implements bindings (a Python file or module), as its load_manifest would",
    )  # fmt: skip
    validate.set_defaults(command=_command("definitions", "validate"))

    diff = commands.add_parser(
        "diff", help="classify the change between two versions of a tool definition, and the semver bump it needs"
    )
    diff.add_argument("old", metavar="OLD", help="the served definition")
    diff.add_argument("new", metavar="NEW", help="the definition that would replace it")
    diff.add_argument("--json", action="store_true", help="print the changes and the verdict as JSON")
    diff.set_defaults(command=_command("definitions", "diff"))

    audit = commands.add_parser("audit", help="check a tamper-evident audit trail")
    audit_verify = audit.add_subparsers(required=True, metavar="ACTION").add_parser(
        "verify", help="check the hash chain of an audit trail (its rotated files in any order)"
    )
    audit_verify.add_argument("files", nargs="+", metavar="FILE", help="audit.jsonl and its rotated .1, .2, ...")
    audit_verify.add_argument("--json", action="store_true", help="print the report as JSON")
    audit_verify.add_argument(
        "--expect-head", metavar="HASH", help="a record hash copied earlier: it must be in the chain"
    )
    audit_verify.add_argument(
        "--allow-breaks", action="store_true", help="chain breaks after interrupted writes are not errors"
    )
    audit_verify.set_defaults(command=_command("audit", "verify"))

    # Commands whose modules register their own subcommands: register(commands, target_help) adds them and sets
    # each one's command function. These modules import nothing heavy at the top.
    import importlib

    for module in _REGISTERED:
        importlib.import_module(f"{__name__}.{module}").register(commands, target_help)
    return parser


_REGISTERED = ("client", "dev", "install", "inspect")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tooldeck")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
