"""The ``tooldeck`` command: serve a deck, list its tools, or call one without an MCP client.

Exit status: 0 success, 1 the tool reported an error, 2 bad usage or a target that cannot be loaded.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from .protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _plain_serve(argv) or _parser().parse_args(argv)
    import logging

    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.command(args))
    except TargetError as exc:
        print(f"tooldeck: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _plain_serve(argv: list[str]) -> Any:
    """``serve [TARGET] [--max-message-bytes N]`` without argparse, which costs ~5 ms of start-up (gettext,
    locale, shutil); anything else (help, other options, mistakes) goes through the full parser."""
    if not argv or argv[0] != "serve" or len(argv) > 4:
        return None
    target, limit, rest = None, None, argv[1:]
    if rest and not rest[0].startswith("-"):
        target, rest = rest[0], rest[1:]
    if rest:
        if len(rest) != 2 or rest[0] != "--max-message-bytes" or not rest[1].isdigit() or int(rest[1]) < 1:
            return None
        limit = int(rest[1])
    return SimpleNamespace(command=_serve, target=target, max_message_bytes=limit, log_level="warning")


def _parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="tooldeck", description="Serve Python functions as MCP tools.")
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="server log level on stderr (default: warning)",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    target_help = "path/file.py[:attr] or package.module[:attr]"

    serve = commands.add_parser("serve", help="serve a deck over stdio or HTTP (the demo deck without TARGET)")
    serve.add_argument("target", nargs="?", metavar="TARGET", help=target_help)
    serve.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="largest accepted message (default 4 MiB)",
    )
    serve.add_argument(
        "--drain-timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="stdio: after EOF, how long requests already received may take to finish (default 10)",
    )
    serve.add_argument(
        "--task-store",
        default=None,
        metavar="STORE",
        help="where tasks are kept: memory, or sqlite:PATH (default: memory on stdio, SQLite in "
        "$XDG_STATE_HOME/tooldeck/ for --http)",
    )
    http = serve.add_argument_group("Streamable HTTP")
    http.add_argument("--http", action="store_true", help="serve Streamable HTTP at http://HOST:PORT/mcp")
    http.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
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
    http.add_argument("--stateless", action="store_true", help="no sessions: each POST stands alone")
    http.add_argument("--json-response", action="store_true", help="answer requests with JSON, never SSE")
    serve.set_defaults(command=_serve)

    tools = commands.add_parser("tools", help="list a deck's tools")
    tools.add_argument("target", metavar="TARGET", help=target_help)
    tools.add_argument("--json", action="store_true", help="print the tools/list result as JSON")
    tools.set_defaults(command=_tools)

    call = commands.add_parser("call", help="call one tool and print its result")
    call.add_argument("target", metavar="TARGET", help=target_help)
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("arguments", nargs="?", default="{}", metavar="JSON", help="arguments as a JSON object")
    call.add_argument("--json", action="store_true", help="print the whole CallToolResult as JSON")
    call.set_defaults(command=_call)
    return parser


def _port(text: str) -> int:
    import argparse

    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a port number from 0 to 65535")
    return value


def _positive_float(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _positive_int(text: str) -> int:
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _serve(args: argparse.Namespace) -> int:
    from .loader import load_deck

    store = getattr(args, "task_store", None)
    if store is not None:
        from .server.task_manager import check_store_spec

        try:
            check_store_spec(store)
        except ValueError as exc:
            raise TargetError(str(exc)) from None
    if getattr(args, "http", False):
        from .server.task_manager import default_store_path
        from .transports.http.server import run_http

        deck = load_deck(args.target)
        if deck.options.task_store is None:
            deck.options.task_store = store or f"sqlite:{default_store_path(deck.name)}"
        run_http(
            deck,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            allowed_hosts=args.allow_host,
            allowed_origins=args.allow_origin,
            stateless=args.stateless,
            json_response=args.json_response,
            max_body_bytes=args.max_message_bytes,
        )
        return 0
    from .transports.stdio import claim_stdout, run_stdio

    out_fd = claim_stdout()  # before the target is imported: its import-time prints must not reach the client
    deck = load_deck(args.target)
    if store is not None and deck.options.task_store is None:
        deck.options.task_store = store
    drain = getattr(args, "drain_timeout", None)
    run_stdio(deck, max_message_bytes=args.max_message_bytes, stdout_fd=out_fd,
              **({"drain_timeout": drain} if drain is not None else {}))  # fmt: skip
    return 0


def _tools(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    import orjson

    from .loader import load_deck
    from .transports.memory import connect

    async def fetch() -> list[dict[str, Any]]:
        async with connect(deck) as client:
            return await client.list_tools()

    with contextlib.redirect_stdout(sys.stderr):  # the target's own prints must not mix with our output
        deck = load_deck(args.target)
        tools = asyncio.run(fetch())
    if args.json:
        sys.stdout.write(orjson.dumps({"tools": tools}, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    for tool in tools:
        print(_signature(tool))
        summary = (tool.get("description") or "").strip().splitlines()
        if summary:
            print(f"    {summary[0]}")
    return 0


def _signature(tool: dict[str, Any]) -> str:
    schema = tool["inputSchema"]
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        text = f"{name}: {_type_name(prop)}"
        params.append(text if name in required else f"{text} = {_default(prop)}")
    out = tool.get("outputSchema")
    returns = ""
    if out is not None:
        inner = out.get("properties", {}).get("result") if list(out.get("properties", {})) == ["result"] else None
        returns = f" -> {_type_name(inner if inner is not None else out)}"
    return f"{tool['name']}({', '.join(params)}){returns}"


def _type_name(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"array[{_type_name(schema.get('items', {}))}]"
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type_name(s) for s in schema["anyOf"])
    return kind or "any"


def _default(schema: dict[str, Any]) -> str:
    import orjson

    return orjson.dumps(schema["default"]).decode() if "default" in schema else "…"


def _call(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    import orjson

    from .loader import load_deck
    from .transports.memory import ClientError, connect

    try:
        arguments = orjson.loads(args.arguments)
    except orjson.JSONDecodeError as exc:
        raise TargetError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise TargetError("arguments must be a JSON object, like '{\"a\": 1}'")

    async def invoke() -> dict[str, Any]:
        async with connect(deck) as client:
            return await client.call_tool(args.tool, arguments)

    try:
        with contextlib.redirect_stdout(sys.stderr):
            deck = load_deck(args.target)
            result = asyncio.run(invoke())
    except ClientError as exc:
        known = ", ".join(t.name for t in deck.tools) or "none"
        hint = f" (tools: {known})" if exc.code == -32602 and args.tool not in deck.tools else ""
        print(f"tooldeck: {exc.message}{hint}", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif "structuredContent" in result and not result.get("isError"):
        sys.stdout.write(orjson.dumps(result["structuredContent"], option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        stream = sys.stderr if result.get("isError") else sys.stdout
        for block in result["content"]:
            print(_describe(block), file=stream)
    return 1 if result.get("isError") else 0


def _describe(block: dict[str, Any]) -> str:
    kind = block["type"]
    if kind == "text":
        return str(block["text"])
    if kind in ("image", "audio"):
        size = len(block["data"]) * 3 // 4
        return f"[{kind} {block['mimeType']}, about {size} bytes]"
    if kind == "resource_link":
        return f"[resource link {block['uri']}]"
    resource = block["resource"]
    return str(resource["text"]) if "text" in resource else f"[resource {resource['uri']}, binary]"
