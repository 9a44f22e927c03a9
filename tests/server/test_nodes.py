"""Calls between the processes of a fleet over the bus (server/nodes.py), over one MemoryBus and over Redis (a bus
per process): an answer comes back to the one who asked, a refusal is raised there with its code, a node that does
not answer is NodeUnreachableError, and a ``tell`` waits for nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.protocol.errors import InvalidParamsError, ProtocolError
from tooldeck.server.bus import Bus, MemoryBus
from tooldeck.server.nodes import Nodes, NodeUnreachableError


@pytest.fixture(params=["memory", "redis"])
def buses(request: pytest.FixtureRequest) -> Callable[[], Bus]:
    if request.param == "memory":
        bus = MemoryBus()
        return lambda: bus
    from tooldeck.server.bus_redis import RedisBus

    engines = request.getfixturevalue("engines")
    return lambda: RedisBus(engines())


async def pair(buses: Callable[[], Bus]) -> tuple[Nodes, Nodes]:
    first, second = Nodes(buses(), "n1"), Nodes(buses(), "n2")
    for nodes in (first, second):
        nodes._listen()
        ready = getattr(nodes.bus, "ready", None)
        if ready is not None:
            await ready()
    return first, second


async def test_an_answer_comes_back_and_a_refusal_is_raised_with_its_code(buses: Callable[[], Bus]) -> None:
    first, second = await pair(buses)

    async def double(args: Any) -> Any:
        await asyncio.sleep(0)
        return {"twice": args * 2}

    def refuse(args: Any) -> None:
        raise InvalidParamsError(f"Invalid params: no {args}")

    second.serve("double", double)
    second.serve("refuse", refuse)
    assert await first.ask("n2", "double", 21) == {"twice": 42}
    with pytest.raises(ProtocolError) as raised:
        await first.ask("n2", "refuse", "thing")
    assert (raised.value.code, raised.value.message) == (-32602, "Invalid params: no thing")
    first.close()
    second.close()


async def test_no_answer_is_node_unreachable_and_a_tell_waits_for_nothing(buses: Callable[[], Bus]) -> None:
    first, second = await pair(buses)
    with pytest.raises(NodeUnreachableError, match="process gone did not answer double within 0.05 s"):
        await first.ask("gone", "double", 1, timeout=0.05)
    with pytest.raises(NodeUnreachableError):  # an operation the node does not serve is not answered either
        await first.ask("n2", "unknown", 1, timeout=0.05)
    told = asyncio.Event()
    second.serve("note", lambda args: told.set() if args == "hi" else None)
    first.tell("n2", "note", "hi")
    await asyncio.wait_for(told.wait(), 5)
    first.close()
    second.close()
