"""The benchmark tools on fastmcp 4.x, over stdio; with `--http PORT`, over Streamable HTTP on 127.0.0.1 (JSON
responses, stateful sessions) through fastmcp's own `run(transport="http")`, with whatever `pip install fastmcp`
brought (uvicorn on h11 and asyncio). `show_banner=False` on both: the banner may check for updates over the network.
"""

import asyncio
import os
import sys

from fastmcp import FastMCP

server = FastMCP("bench", version="1.0.0")


@server.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def echo_sync(text: str) -> str:
    """Return the text unchanged (a sync tool)."""
    return text


@server.tool
async def sleep(ms: int) -> str:
    """Sleep for ms milliseconds, then answer."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


def make_extra_tool(index: int):
    def extra(city: str, days: int, metric: bool) -> str:
        return f"{index}:{city}:{days}:{metric}"

    extra.__doc__ = f"Extra tool number {index} for the tools/list benchmark."
    return extra


for i in range(int(os.environ.get("BENCH_TOOLS", "0"))):
    server.tool(make_extra_tool(i), name=f"tool_{i:04d}")

if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), json_response=True, show_banner=False)
    else:
        server.run(show_banner=False)
