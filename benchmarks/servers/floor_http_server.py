"""The HTTP floor: the least a Python MCP server over Streamable HTTP can do per request. A raw ASGI function (no
framework) under uvicorn with the settings of tooldeck's `serve --http` (httptools with tooldeck's corked transport,
one write per response; uvloop; no access log), orjson in and out: the floor for a uvicorn-based server.

Every POST is answered on its own: initialize gets a fresh `mcp-session-id` header, a notification or response gets
202, a request gets its JSON-RPC response as `application/json` with a Content-Length. Nothing is checked: not the
session id, the protocol-version header, Accept, Content-Type, Host or Origin. Tools are the stdio floor's, so
`sleep` blocks the event loop.

With ``BENCH_REDIS=HOST:PORT`` each tools/call first awaits one PING to that Redis over one raw asyncio connection
(hiredis parses; at once on an idle line, else the PINGs of one turn of the loop in one write): the least one awaited round trip to shared
state adds to a call, which ``backends_micro.py`` sets against its budgets.

Usage: python floor_http_server.py PORT
"""

import asyncio
import collections
import os
import secrets
import sys

import orjson
import uvicorn
from floor_server import PROTOCOL_VERSION, build_tools, call_tool

from tooldeck.transports.http.cork import corked_protocol

JSON = (b"content-type", b"application/json")
TOOLS = build_tools(int(os.environ.get("BENCH_TOOLS", "0")))
SERVER_INFO = {"name": "bench-floor-http", "version": "1.0.0"}
REDIS = os.environ.get("BENCH_REDIS")
PING = b"*1\r\n$4\r\nPING\r\n"


class RedisLine(asyncio.Protocol):
    """One connection to Redis: a PING written at once when none waits, else with the others of its turn of the
    loop; answers matched in order."""

    def __init__(self) -> None:
        import hiredis

        self.reader = hiredis.Reader()
        self.waiting: collections.deque[asyncio.Future] = collections.deque()
        self.pending = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            self.waiting.popleft().set_result(reply)

    def ping(self) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if not self.waiting:  # an idle line: written at once
            self.transport.write(PING)
        else:
            if self.pending == 0:
                loop.call_soon(self.flush)
            self.pending += 1
        self.waiting.append(future)
        return future

    def flush(self) -> None:
        self.transport.write(PING * self.pending)
        self.pending = 0


line: RedisLine | None = None


async def round_trip() -> None:
    global line
    if line is None:
        host, _, port = REDIS.rpartition(":")
        _, line = await asyncio.get_running_loop().create_connection(RedisLine, host, int(port))
    await line.ping()


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = orjson.loads(body)
    if "id" not in message or "method" not in message:
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    method, params = message["method"], message.get("params") or {}
    reply: dict = {"jsonrpc": "2.0", "id": message["id"]}
    headers = [JSON]
    if method == "tools/call":
        if REDIS:
            await round_trip()
        reply["result"] = call_tool(params)
    elif method == "initialize":
        reply["result"] = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
        headers.append((b"mcp-session-id", secrets.token_hex(16).encode()))
    elif method == "tools/list":
        reply["result"] = {"tools": TOOLS}
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
    data = orjson.dumps(reply)
    headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def serve(port: int) -> None:
    """uvicorn as `tooldeck serve --http` configures it (it picks uvloop and httptools, which tooldeck depends on);
    lifespan off, as this app has none."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http=corked_protocol(),
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
