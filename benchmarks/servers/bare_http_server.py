"""The least a Python HTTP/1.1 server on this event loop can do per request, for `http_servers.py`: an
`asyncio.Protocol` on httptools (uvloop) with no server framework around it, serving the HTTP floor's raw ASGI app
(`floor_http_server.py`) or the benchmark deck's `HttpApp` (JSON responses, as `tooldeck serve --http
--json-response` builds it). Each response leaves in one write (a streamed one: its head with the first chunk).

The floor's app is stepped inside the `data_received` that completes its request (it never waits: its `receive`
has the body, its `send` keeps the messages): no Task. tooldeck's app runs in a Task per request, as any server
must run it: its runner awaits a call's work inside the request's task (and cancels that task to cancel the call).
No timer, no flow control, no pipelining, no header or body limits, no graceful shutdown: not a server to deploy,
the bound on what any server built from these parts could save.

Usage: python bare_http_server.py PORT floor|tooldeck
"""

from __future__ import annotations

import asyncio
import http
import sys
from typing import Any

import httptools
import uvloop

REASONS = {status.value: status.phrase.encode() for status in http.HTTPStatus}


APP: Any = None  # the ASGI app served
TASKS = False  # each request in a Task of its own (tooldeck's app), or stepped at once (the floor's)


class BareProtocol(asyncio.Protocol):
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)
        self.loop = asyncio.get_running_loop()
        self.server = transport.get_extra_info("sockname")[:2]
        self.client = transport.get_extra_info("peername")[:2]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
                 "method": self.parser.get_method().decode(), "scheme": "http", "path": self.url.decode(),
                 "raw_path": self.url, "query_string": b"", "root_path": "", "headers": self.headers,
                 "client": self.client, "server": self.server}  # fmt: skip
        if TASKS:
            self.loop.create_task(self.respond(scope, self.body))
            return
        try:
            self.respond(scope, self.body).send(None)
        except StopIteration:
            pass

    async def respond(self, scope: dict[str, Any], body: bytes) -> None:
        write = self.transport.write
        head = b""

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal head
            if message["type"] == "http.response.start":
                status = message["status"]
                head = b"HTTP/1.1 %d %s\r\n" % (status, REASONS[status])
                head += b"".join(name + b": " + value + b"\r\n" for name, value in message["headers"])
                return
            data, more = message.get("body", b""), message.get("more_body", False)
            if head:
                if not more:  # the whole response at once
                    length = b"" if b"content-length:" in head.lower() else b"content-length: %d\r\n" % len(data)
                    write(head + length + b"\r\n" + data)
                    head = b""
                    return
                head += b"transfer-encoding: chunked\r\n\r\n"
            chunk = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
            write(head + chunk + (b"" if more else b"0\r\n\r\n"))
            head = b""

        await APP(scope, receive, send)


async def serve(port: int, which: str) -> None:
    global APP, TASKS
    from granian_server import target

    APP = target(which)
    if which != "floor":
        TASKS = True
        await APP.deck.open_backends()  # what the ASGI lifespan's startup does
        APP.deck.bind_loop()
    server = await asyncio.get_running_loop().create_server(BareProtocol, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), sys.argv[2]))
