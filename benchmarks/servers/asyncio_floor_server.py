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
from floor_server import build_tools, reply_to

TOOLS = build_tools(int(os.environ.get("BENCH_TOOLS", "0")))
SERVER_INFO = {"name": "bench-asyncio-floor", "version": "1.0.0"}


def answer(message: dict) -> bytes | None:
    reply = reply_to(message, TOOLS, SERVER_INFO)
    return None if reply is None else orjson.dumps(reply) + b"\n"


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
