"""The benchmark tools on fastmcp 4.x, over stdio; with `--http PORT`, over Streamable HTTP
(JSON responses, stateful sessions) under the same uvicorn settings as tooldeck's (see `serve_http.py`).
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
        from serve_http import serve

        serve(server.http_app(json_response=True), int(sys.argv[2]))
    else:
        server.run(show_banner=False)
