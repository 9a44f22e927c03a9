"""When the stdio transport writes its answers: an answer made while a chunk of input is handed on leaves when the
chunk is done, and the answer to the last request running leaves as it is sent — neither waits for a further turn
of the event loop — while answers of requests running together, and notifications, still leave together.

In-process over real pipes, with a real deck and the real ``Connection``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from mcp_schema import WireChecker
from stdio_client import handshake
from tooldeck import Deck
from tooldeck.transports.stdio import Connection

deck = Deck("output")
released = asyncio.Event()


@deck.tool
async def echo(text: str) -> str:
    """Answer the text, after one turn of the loop."""
    await asyncio.sleep(0)
    return text


@deck.tool
async def held(text: str) -> str:
    """Answer the text once the test releases it."""
    await released.wait()
    return text


class Served:
    def __init__(self, connection: Connection, stdin: int, stdout: int) -> None:
        self.connection = connection
        self.stdin = stdin
        self.stdout = stdout
        self.checker = WireChecker(name="test_stdio_output")
        self.writes: list[bytes] = []

    def line(self, message: Any) -> bytes:
        self.checker.sent(message)
        return orjson.dumps(message) + b"\n"

    def written(self) -> list[Any]:
        """What the server has written so far (without waiting), each message schema-checked."""
        data = b""
        while True:
            try:
                chunk = os.read(self.stdout, 65536)
            except BlockingIOError:
                break
            data += chunk
        messages = [orjson.loads(line) for line in data.splitlines()]
        for message in messages:
            self.checker.received(message)
        return messages

    async def reply(self) -> Any:
        while not (found := self.written()):
            await asyncio.sleep(0.001)  # a poll of the pipe: the server writes from this same loop
        return found


@asynccontextmanager
async def served() -> AsyncIterator[Served]:
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    os.set_blocking(stdout_r, False)
    connection = Connection(deck, stdin_r, stdout_w, None)
    server = asyncio.create_task(connection.serve())
    test = Served(connection, stdin_w, stdout_r)
    try:
        os.write(stdin_w, b"".join(test.line(message) for message in handshake()))
        assert [reply["id"] for reply in await test.reply()] == ["init"]
        transport = connection.output.transport
        write = transport.write
        transport.write = lambda data: (test.writes.append(bytes(data)), write(data))[1]
        yield test
    finally:
        os.close(stdin_w)
        await server
        for fd in (stdin_r, stdout_r, stdout_w):
            try:
                os.close(fd)
            except OSError:
                pass


async def test_an_answer_made_while_a_chunk_is_handed_on_leaves_when_the_chunk_is_done() -> None:
    async with served() as test:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        test.connection.reader.data_received(test.line(ping) + test.line(listing))  # as the loop hands it on
        assert [reply["id"] for reply in test.written()] == [1, 2]  # out already, no turn of the loop needed
        assert len(test.writes) == 1


async def test_the_answer_to_the_last_request_running_leaves_as_it_is_sent() -> None:
    async with served() as test:
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo",
                                                                              "arguments": {"text": "hi"}}}  # fmt: skip
        test.connection.reader.data_received(test.line(call))
        assert test.written() == []  # the tool runs in a task of its own
        await asyncio.sleep(0)  # its task's first turn: it waits one turn itself
        await asyncio.sleep(0)  # its second: it answers, and the answer is written at once
        assert [reply["result"]["content"][0]["text"] for reply in test.written()] == ["hi"]


async def test_answers_of_requests_running_together_leave_together() -> None:
    async with served() as test:
        released.clear()
        calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool,
                                                                                "arguments": {"text": str(n)}}}
                 for n, tool in ((4, "echo"), (5, "held"))]  # fmt: skip
        test.connection.reader.data_received(b"".join(test.line(call) for call in calls))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # echo answers while held runs: with the turn's other messages, not at once ...
        assert test.written() == []
        await asyncio.sleep(0)  # ... which leave at the end of the turn
        assert [reply["id"] for reply in test.written()] == [4]
        released.set()
        assert [reply["id"] for reply in await test.reply()] == [5]
        assert len(test.writes) == 2


async def test_the_deck_is_busy_while_more_than_one_request_runs() -> None:
    async with served() as test:
        assert deck.busy is not None and not deck.busy()
        released.clear()
        calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "held",
                                                                                "arguments": {"text": str(n)}}}
                 for n in (6, 7)]  # fmt: skip
        test.connection.reader.data_received(test.line(calls[0]))
        assert not deck.busy()  # one request: the audit trail writes its record at once
        test.connection.reader.data_received(test.line(calls[1]))
        assert deck.busy()  # two: their records would go out with the others of their turn
        released.set()
        answered: list[Any] = []
        while len(answered) < 2:
            answered += [reply["id"] for reply in await test.reply()]
        assert sorted(answered) == [6, 7] and not deck.busy()
