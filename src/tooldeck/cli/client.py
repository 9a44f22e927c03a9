"""``tooldeck tools`` and ``tooldeck call``: list a deck's tools or call one, in process, without an MCP client."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

USAGE_ERROR = 2


def register(commands: Any, target_help: str) -> None:
    """Adds ``tools`` and ``call`` to the command line."""
    listing = commands.add_parser("tools", help="list a deck's tools")
    listing.add_argument("target", metavar="TARGET", help=target_help)
    listing.add_argument("--json", action="store_true", help="print the tools/list result as JSON")
    listing.set_defaults(command=tools)

    calling = commands.add_parser("call", help="call one tool and print its result")
    calling.add_argument("target", metavar="TARGET", help=target_help)
    calling.add_argument("tool", metavar="TOOL")
    calling.add_argument("arguments", nargs="?", default="{}", metavar="JSON", help="arguments as a JSON object")
    calling.add_argument("--json", action="store_true", help="print the whole CallToolResult as JSON")
    calling.set_defaults(command=call)


def tools(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    import orjson

    from ..loader import load_deck
    from ..transports.memory import connect

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


def call(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib

    import orjson

    from ..loader import load_deck
    from ..transports.memory import ClientError, connect

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
