"""The benchmark deck (or the HTTP floor's raw ASGI app) served by granian, for `http_servers.py`: granian's embedded
server (`granian.server.embed.Server`: its Rust worker in this process, on this asyncio loop, uvloop as tooldeck
uses) over HTTP/1.1, no WebSockets, no access log. The deck's app is tooldeck's `HttpApp` with JSON responses, as
`tooldeck serve --http --json-response` builds it; its lifespan (the backends) runs as under uvicorn.

`rsgi` serves the same ASGI app through granian's own interface, RSGI, with the adapter below: the body is read
before the app is called, so the app's first `receive()` returns without waiting, as under uvicorn; a response
with its whole body leaves in one `response_bytes`, a streamed one through `response_stream`. It is the least
such an adapter does (no body limit or time-out of its own, no trailers); enough to measure what RSGI saves.

Usage: python granian_server.py PORT tooldeck|floor asgi|rsgi
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import uvloop

SERVERS = Path(__file__).resolve().parent
LOGGING = {  # granian's own log lines to stderr (its default is stdout), warnings and worse only
    "handlers": {
        "console": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
        "access": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
    }
}


class RsgiAdapter:
    """An ASGI app behind granian's RSGI interface (HTTP only)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __rsgi__(self, scope: Any, proto: Any) -> None:
        body = await proto()
        client, _, client_port = scope.client.rpartition(":")
        server, _, server_port = scope.server.rpartition(":")
        asgi = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": scope.http_version,
            "method": scope.method,
            "scheme": scope.scheme,
            "path": scope.path,
            "raw_path": scope.path.encode(),
            "query_string": scope.query_string.encode("latin-1"),
            "root_path": "",
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in scope.headers.items()],
            "client": (client, int(client_port)),
            "server": (server, int(server_port)),
        }
        read = False
        start: dict[str, Any] = {}
        stream: Any = None

        async def receive() -> dict[str, Any]:
            nonlocal read
            if not read:
                read = True
                return {"type": "http.request", "body": body, "more_body": False}
            await proto.client_disconnect()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal stream
            if message["type"] == "http.response.start":
                start.update(message)
                return
            data = message.get("body", b"")
            if stream is None:
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", ())]
                if not message.get("more_body"):
                    proto.response_bytes(start["status"], headers, data)
                    return
                stream = proto.response_stream(start["status"], headers)
            if data:
                await stream.send_bytes(data)

        await self.app(asgi, receive, send)


def target(which: str) -> Any:
    """The app to serve: the floor's raw ASGI function, or the benchmark deck's ``HttpApp`` (also bare_http_server's)."""
    if which == "floor":
        sys.path.insert(0, str(SERVERS))
        from floor_http_server import app

        return app
    from tooldeck.loader import load_deck
    from tooldeck.transports.http.app import HttpApp

    return HttpApp(load_deck(str(SERVERS / "tooldeck_server.py")), json_response=True)


async def serve(port: int, which: str, interface: str) -> None:
    from granian.constants import HTTPModes, Interfaces
    from granian.server.embed import Server

    app = target(which)
    if interface == "rsgi":
        if which != "floor":  # RSGI has no lifespan: what the ASGI lifespan's startup does, done here
            await app.deck.open_backends()
            app.deck.bind_loop()
        app = RsgiAdapter(app)
    server = Server(
        app,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.RSGI if interface == "rsgi" else Interfaces.ASGI,
        http=HTTPModes.http1,
        websockets=False,
        log_level="warning",
        log_dictconfig=LOGGING,
    )
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, server.stop)
    await server.serve()


if __name__ == "__main__":
    uvloop.run(serve(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
