"""Serves an ASGI app for the HTTP benchmark the way `tooldeck serve --http` does: uvicorn on 127.0.0.1 with
httptools and uvloop, lifespan on, no access log, log level warning, no Server header.

Imported by the peer decks and the HTTP floor (it sits next to them, so `import serve_http` works from any venv).
"""

import uvicorn


def serve(app, port: int, lifespan: str = "on") -> None:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan=lifespan,
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    uvicorn.Server(config).run()
