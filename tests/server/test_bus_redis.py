"""``RedisBus`` across real processes: a publication reaches another process, in order, and its answer comes back."""

from __future__ import annotations

import asyncio
from typing import Any

import fleet_peer
from tooldeck.engine.connection import Engine
from tooldeck.server.bus_redis import RedisBus


async def test_a_publication_reaches_other_processes_and_their_answers_come_back(engine: Engine) -> None:
    peers = [await fleet_peer.start(engine.name, "echo") for _ in range(2)]
    try:
        await talk(engine, peers)
    finally:
        for peer in peers:
            if peer.returncode is None:
                peer.kill()
                await peer.wait()


async def talk(engine: Engine, peers: list[asyncio.subprocess.Process]) -> None:
    bus = RedisBus(engine)
    answers: list[Any] = []
    all_in = asyncio.Event()

    def heard(payload: Any) -> None:
        answers.append(payload)
        if len(answers) == 2 * 50:
            all_in.set()

    bus.subscribe("pong", heard)
    await bus.ready()
    for n in range(50):
        bus.publish("ping", {"n": n, "text": "é ✓"})
    async with asyncio.timeout(30):
        await all_in.wait()
        pids = {peer.pid for peer in peers}
        for pid in pids:  # each process answered every publication once, in the order they were published
            assert [a["got"] for a in answers if a["from"] == pid] == [{"n": n, "text": "é ✓"} for n in range(50)]
        assert {a["from"] for a in answers} == pids
        bus.publish("stop", None)
        assert [await peer.wait() for peer in peers] == [0, 0]
