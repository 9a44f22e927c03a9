"""The asyncio floor: the least an asyncio MCP server over stdio can do per message — the floor server's answers
(floor_server.py: orjson, the same shapes) served from uvloop's pipe transports, as a server that runs tools
concurrently must be. Nothing is checked and no task is made: every request is answered inside the callback that
read it, and the answers to one read leave in one write. ``sleep`` blocks the loop, as in the floor.

What it measures (``benchmarks/floors.py``): what an event loop costs by itself — its import, its memory, its
wake-ups — beside the blocking floor, so the budgets that name the floor can be read against it.

Usage: python asyncio_floor_server.py
"""

import asyncio
import os
import sys

import orjson
import uvloop
from floor_server import PROTOCOL_VERSION, build_tools, call_tool

TOOLS = build_tools(int(os.environ.get("BENCH_TOOLS", "0")))
SERVER_INFO = {"name": "bench-asyncio-floor", "version": "1.0.0"}


def answer(message: dict) -> bytes | None:
    if "id" not in message:
        return None  # notifications need no answer
    method, params = message["method"], message.get("params") or {}
    reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    elif method == "tools/list":
        reply["result"] = {"tools": TOOLS}
    elif method == "tools/call":
        reply["result"] = call_tool(params)
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
    return orjson.dumps(reply) + b"\n"


class Lines(asyncio.Protocol):
    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future) -> None:
        self.out = out
        self.done = done
        self.partial = b""

    def data_received(self, data: bytes) -> None:
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        answers = [reply for line in lines if line.strip() and (reply := answer(orjson.loads(line))) is not None]
        if answers:
            self.out.write(b"".join(answers))

    def eof_received(self) -> bool:
        self.done.set_result(None)
        return False


async def main() -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb", buffering=0))
    await loop.connect_read_pipe(lambda: Lines(out, done), os.fdopen(sys.stdin.fileno(), "rb", buffering=0))
    await done


if __name__ == "__main__":
    uvloop.run(main())
