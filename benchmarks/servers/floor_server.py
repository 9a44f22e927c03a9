"""The floor: the least a Python MCP server over stdio can do per message (orjson, one blocking loop, no asyncio).

It answers initialize, ping, tools/list and tools/call (echo, echo_sync, sleep) with the same shapes as the SDKs,
and nothing more. Requests are answered one at a time, so concurrent `sleep` calls run back to back.
"""

import os
import sys
import time

import orjson

PROTOCOL_VERSION = "2025-11-25"
TEXT_OUTPUT = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}


def tool(name: str, description: str, properties: dict) -> dict:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return {"name": name, "description": description, "inputSchema": schema, "outputSchema": TEXT_OUTPUT}


def build_tools(extra: int) -> list[dict]:
    tools = [
        tool("echo", "Return the text unchanged.", {"text": {"type": "string"}}),
        tool("echo_sync", "Return the text unchanged (a sync tool).", {"text": {"type": "string"}}),
        tool("sleep", "Sleep for ms milliseconds, then answer.", {"ms": {"type": "integer"}}),
    ]
    extra_params = {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}
    for i in range(extra):
        tools.append(tool(f"tool_{i:04d}", f"Extra tool number {i} for the tools/list benchmark.", extra_params))
    return tools


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}, "isError": False}


def call_tool(params: dict) -> dict:
    name, arguments = params["name"], params.get("arguments") or {}
    if name in ("echo", "echo_sync"):
        return text_result(arguments["text"])
    if name == "sleep":
        time.sleep(arguments["ms"] / 1000)
        return text_result(f"slept {arguments['ms']} ms")
    raise KeyError(name)


def reply_to(message: dict, tools: list[dict], server_info: dict) -> dict | None:
    """The answer to one message (None for a notification): what the floors do per message."""
    if "id" not in message:
        return None  # notifications need no answer
    method, params = message["method"], message.get("params") or {}
    reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": server_info,
        }
    elif method == "tools/list":
        reply["result"] = {"tools": tools}
    elif method == "tools/call":
        reply["result"] = call_tool(params)
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
    return reply


def main() -> None:
    tools = build_tools(int(os.environ.get("BENCH_TOOLS", "0")))
    info = {"name": "bench-floor", "version": "1.0.0"}
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        reply = reply_to(orjson.loads(line), tools, info)
        if reply is not None:
            out.write(orjson.dumps(reply) + b"\n")
            out.flush()


if __name__ == "__main__":
    main()
