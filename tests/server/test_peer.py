"""The request peer of a 2026-07-28 request (server/peer.py), driven without a transport: its answers and what a
call sends go to ``send``, tied to the request; a refusal keeps its HTTP status; closing it cancels what still
runs and stops what is sent, but not a task the call became; nothing of a session is made. ``MockPeer``, its twin,
is checked as a peer too. Every message is checked against the 2026-07-28 schema."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from eras import MODERN, era_deck, modern
from mcp_schema import WireChecker
from tooldeck import Context, Deck
from tooldeck.protocol import envelope, jsonrpc
from tooldeck.protocol.jsonrpc import Request
from tooldeck.security.principal import Principal
from tooldeck.server.peer import MockPeer, RequestPeer

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class Wire:
    """What a peer sends, as (message, related) pairs, each message checked against the 2026-07-28 schema."""

    def __init__(self) -> None:
        self.checker = WireChecker(MODERN, name="test_peer.Wire")
        self.out: list[tuple[Any, Any]] = []
        self.arrived = asyncio.Event()

    def send(self, message: Any, related: Any) -> None:
        message = orjson.loads(orjson.dumps(message))  # as the wire carries it (cached parts are pre-encoded)
        self.checker.received(message)
        self.out.append((message, related))
        self.arrived.set()

    def serve(self, peer: RequestPeer, message: dict[str, Any], principal: Any = None, inline: bool = False) -> Any:
        self.checker.sent(message)
        request = jsonrpc.parse(message)
        assert type(request) is Request
        return peer.serve(request, envelope.read(request.params), principal, inline=inline)

    async def answered(self, request_id: Any) -> dict[str, Any]:
        async with asyncio.timeout(5):
            while not any(m.get("id") == request_id and "method" not in m for m, _ in self.out):
                self.arrived.clear()
                await self.arrived.wait()
        return next(m for m, _ in self.out if m.get("id") == request_id and "method" not in m)


def waiting_deck() -> tuple[Deck, asyncio.Event, list[str]]:
    """A deck whose ``waits`` tool logs, then waits for the event; ``seen`` records how it ended."""
    deck = era_deck()
    release = asyncio.Event()
    seen: list[str] = []

    @deck.tool(task="optional")
    async def waits(ctx: Context) -> str:
        """Logs, then waits until released."""
        await ctx.info("waiting")
        try:
            await release.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("released")
        return "released"

    return deck, release, seen


# --- without an event loop ------------------------------------------------------------------------------------------


def test_a_request_that_needs_no_work_is_answered_through_send_before_serve_returns() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send, address="10.0.0.7")
    assert wire.serve(peer, modern(1, "tools/list")) is None
    ((message, related),) = wire.out
    assert related == 1 and message["id"] == 1
    assert [tool["name"] for tool in message["result"]["tools"]][:2] == ["add", "steps"]
    assert peer.runner is None  # nothing ran: no runner, no event loop


def test_a_request_peer_is_nothing_of_a_session() -> None:
    deck = era_deck()
    listening = {topic: deck.bus.subscribers(topic) for topic in ("list_changed", "resource_updated")}
    wire = Wire()
    peer = RequestPeer(deck, wire.send)
    wire.serve(peer, modern(1, "server/discover"))
    assert peer.key is None  # no address on the bus, no session in its audit records
    assert {topic: deck.bus.subscribers(topic) for topic in listening} == listening  # nothing subscribed
    assert deck.bus.subscribers("session/None") == 0
    assert not hasattr(peer, "__dict__")  # its members are the ones it declares, and no more


def test_a_refused_retry_keeps_its_refusal_for_the_http_status() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    wire.serve(peer, modern(4, "tools/call", {"name": "ask_name", "requestState": "forged", "inputResponses": {}},
                            capabilities={"elicitation": {}}))  # fmt: skip
    ((message, _),) = wire.out
    assert message["error"]["code"] == -32602
    assert peer.refusals[4].http_status == 400


def test_an_unknown_method_is_answered_with_its_error() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    wire.checker.expect_no_messages()
    request = jsonrpc.parse(modern(2, "ping"))
    assert type(request) is Request
    peer.serve(request, envelope.read(request.params), None)
    assert wire.out[0][0]["error"] == {"code": -32601, "message": "Method not found: ping is not part of protocol "
                                                                   "revision 2026-07-28"}  # fmt: skip
    assert not peer.refusals  # a -32601 is no refusal: the transport answers it with its own status


# --- with the event loop --------------------------------------------------------------------------------------------


async def test_a_calls_messages_go_to_send_tied_to_its_request_and_the_answer_comes_last() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    wire.serve(peer, modern(7, "tools/call", {"name": "steps"}, progressToken="p", logLevel="info"))
    answer = await wire.answered(7)
    assert answer["result"]["content"] == [{"type": "text", "text": "done"}]
    assert [m.get("method") for m, _ in wire.out] == ["notifications/progress", "notifications/message",
                                                      "notifications/progress", None]  # fmt: skip
    assert {related for _, related in wire.out} == {7}
    assert peer.loop() is asyncio.get_running_loop()
    assert peer.close() == []  # nothing was running any more


async def test_inline_work_is_handed_back_to_be_awaited_in_the_callers_task() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    work = wire.serve(peer, modern(3, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}), inline=True)
    assert work is not None and wire.out == []  # nothing ran yet: the caller's task runs it
    await work
    assert wire.out[0][0]["result"]["structuredContent"] == {"result": 3}


async def test_a_refusal_inside_the_call_keeps_its_status_and_headers() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    wire.serve(peer, modern(5, "tools/call", {"name": "weather"}))
    answer = await wire.answered(5)
    assert answer["error"]["code"] == -32000
    refusal = peer.refusals[5]
    assert refusal.http_status == 401 and refusal.headers[0][0] == b"www-authenticate"
    allowed = RequestPeer(era_deck(), wire.send)
    wire.serve(allowed, modern(6, "tools/call", {"name": "weather"}), Principal("reader", scopes=["weather:read"]))
    assert (await wire.answered(6))["result"]["structuredContent"] == {"result": "sunny"}
    assert not allowed.refusals


async def test_closing_cancels_the_running_call_and_nothing_more_is_sent() -> None:
    deck, release, seen = waiting_deck()
    wire = Wire()
    peer = RequestPeer(deck, wire.send)
    wire.serve(peer, modern(8, "tools/call", {"name": "waits"}, logLevel="info"))
    async with asyncio.timeout(5):
        while not wire.out:  # the log line: the call is waiting
            await asyncio.sleep(0)
    tasks = peer.close()  # the client left before the answer
    assert len(tasks) == 1
    await asyncio.wait(tasks, timeout=5)
    release.set()
    await asyncio.sleep(0)
    assert seen == ["cancelled"]
    assert [m.get("method") for m, _ in wire.out] == ["notifications/message"]  # and no answer
    peer.send(jsonrpc.notification("notifications/message", {"level": "info", "data": "late"}), 8)
    assert len(wire.out) == 1  # a closed peer sends nowhere


async def test_a_call_that_became_a_task_runs_on_after_its_peer_closed() -> None:
    deck, release, seen = waiting_deck()
    wire = Wire()
    peer = RequestPeer(deck, wire.send)
    wire.serve(peer, modern(9, "tools/call", {"name": "waits"}, capabilities=TASKS))
    created = (await wire.answered(9))["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert peer.close() == []
    release.set()
    manager = deck.task_manager()
    async with asyncio.timeout(5):
        while (record := await manager.lookup(created["taskId"], "io.modelcontextprotocol/tasks")).status == "working":
            await asyncio.sleep(0)
    assert record.status == "completed" and seen == ["released"]
    assert [m.get("method") for m, _ in wire.out] == [None]  # a task of this extension sends no logs


async def test_a_question_ends_the_round_through_the_peer() -> None:
    wire = Wire()
    peer = RequestPeer(era_deck(), wire.send)
    wire.serve(peer, modern(10, "tools/call", {"name": "ask_name"}, capabilities={"elicitation": {}}))
    result = (await wire.answered(10))["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["input-1"]["method"] == "elicitation/create"


async def test_close_sse_stream_reaches_the_transports_hook() -> None:
    deck = era_deck()

    @deck.tool
    async def polls(ctx: Context) -> str:
        """Asks for its stream to be closed."""
        ctx.close_sse_stream()
        return "closed"

    closed: list[int] = []
    wire = Wire()
    peer = RequestPeer(deck, wire.send, close_stream=lambda: closed.append(1))
    wire.serve(peer, modern(11, "tools/call", {"name": "polls"}))
    assert (await wire.answered(11))["result"]["content"][0]["text"] == "closed"
    assert closed == [1]
    peer.close()
    peer.close_stream(11)  # after the end: nothing to close
    assert closed == [1]


# --- the twin -------------------------------------------------------------------------------------------------------


async def test_the_mock_peer_keeps_what_the_wire_would_carry() -> None:
    deck = era_deck()
    peer = MockPeer(deck, address="192.0.2.1")
    request = jsonrpc.parse(modern(1, "tools/call", {"name": "steps"}, progressToken=1, logLevel="info"))
    assert type(request) is Request
    peer.serve(request, envelope.read(request.params), None)
    async with asyncio.timeout(5):
        while not peer.sent or "method" in peer.sent[-1]:
            await asyncio.sleep(0)
    assert [m.get("method") for m in peer.sent] == ["notifications/progress", "notifications/message",
                                                    "notifications/progress", None]  # fmt: skip
    assert peer.key is None and peer.address == "192.0.2.1" and peer.streams_closed == 0
    peer.close_stream(1)
    assert peer.streams_closed == 1


def test_the_mock_peer_refuses_what_json_cannot_carry() -> None:
    peer = MockPeer(Deck("m"))
    with pytest.raises(TypeError):
        peer.send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": object()}}, None)
    assert peer.sent == []
