"""Another process of a fleet, for tests that need a real second (or third) process on one Redis.

    python fleet_peer.py URL echo
        a ``RedisBus``: every payload published on "ping" is published back on "pong" as ``{"from": PID, "got":
        payload}``; it prints "ready" once it hears the others, and exits when something is published on "stop".
    python fleet_peer.py URL take PRINCIPAL COUNT LIMIT
        ``RateLimits`` over a ``RedisRateLimiter`` (``per_principal=LIMIT``, and a global limit that never refuses);
        it prints "ready", waits for a word on the list "tooldeck:test:go" (so that every process starts at once),
        makes COUNT concurrent calls as PRINCIPAL and prints how many were admitted.

``start`` runs one and waits for its "ready" line.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import tooldeck

GO = "tooldeck:test:go"


async def echo(url: str) -> None:
    from tooldeck.engine.connection import Engine
    from tooldeck.server.bus_redis import RedisBus

    engine = Engine.from_url(url)
    bus = RedisBus(engine)
    stopped = asyncio.Event()
    bus.subscribe("ping", lambda payload: bus.publish("pong", {"from": os.getpid(), "got": payload}))
    bus.subscribe("stop", lambda payload: stopped.set())
    await bus.ready()
    print("ready", flush=True)
    await stopped.wait()
    await engine.aclose()


async def take(url: str, principal: str, count: int, limit: str) -> None:
    from tooldeck.engine.connection import Engine
    from tooldeck.security.limits import Limit, RateLimitedError, RateLimits
    from tooldeck.security.limits_redis import RedisRateLimiter
    from tooldeck.security.principal import Principal

    class Request:
        def __init__(self) -> None:
            self.principal = Principal(principal)

    class Call:
        kind, name = "tool", "work"

    engine = Engine.from_url(url)
    limits = RateLimits(RedisRateLimiter(engine), per_principal=limit, global_=Limit("1000000/hour"))
    await engine.check()
    print("ready", flush=True)
    await engine.client.blpop([GO], timeout=30)

    async def call() -> bool:
        try:
            await limits.step(Request(), Call())  # type: ignore[misc]
        except RateLimitedError:
            return False
        return True

    admitted = await asyncio.gather(*(call() for _ in range(count)))
    print(sum(admitted), flush=True)
    await engine.aclose()


async def start(url: str, *args: str) -> asyncio.subprocess.Process:
    """Run a peer (this file, with the tooldeck the tests import) and wait for its "ready"."""
    src = str(Path(tooldeck.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, url, *args, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    assert line == b"ready\n", line
    return process


if __name__ == "__main__":
    url, role, *rest = sys.argv[1:]
    if role == "echo":
        asyncio.run(echo(url))
    else:
        asyncio.run(take(url, rest[0], int(rest[1]), rest[2]))
