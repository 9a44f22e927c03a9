"""The engine's multiplexed line (engine/wire.py), against a real server: answers in order, one connection for many
commands, a stuck server noticed within the timeout, a command never sent twice, AUTH and SELECT from the URL."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from redis_server import RedisServer
from tooldeck.engine.connection import Engine
from tooldeck.engine.errors import BackendUnavailableError
from tooldeck.engine.wire import pack


def test_pack_writes_resp_and_refuses_what_redis_has_no_word_for() -> None:
    assert pack(("SET", b"k", 3, 1.5)) == b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n3\r\n$3\r\n1.5\r\n"
    assert pack(("GET", "é")) == b"*2\r\n$3\r\nGET\r\n$2\r\n\xc3\xa9\r\n"

    class Name(str):
        pass

    class Raw(bytes):
        pass

    assert pack((Name("GET"), Raw(b"k"))) == pack(("GET", b"k"))  # subclasses as their base
    for wrong in (None, True, ["a"]):
        with pytest.raises(TypeError, match="a Redis argument must be bytes, str, int or float"):
            pack(("SET", "k", wrong))


async def test_commands_in_flight_are_answered_in_the_order_they_were_sent(engine: Engine) -> None:
    answers = await asyncio.gather(*(engine.command("INCR", engine.key("counter")) for _ in range(300)))
    assert answers == list(range(1, 301))


async def test_many_commands_at_once_ride_one_connection(engine: Engine, redis_url: str) -> None:
    observer = aioredis.Redis.from_url(redis_url)
    try:
        await engine.command("PING")
        before = (await observer.info("clients"))["connected_clients"]
        await asyncio.gather(*(engine.command("SET", engine.key(f"k{n}"), n) for n in range(500)))
        assert (await observer.info("clients"))["connected_clients"] == before
    finally:
        await observer.aclose()


@asynccontextmanager
async def writes_of(engine: Engine) -> AsyncIterator[list[bytes]]:
    """The engine's line, connected, with each write to its connection recorded (as it goes out) in the list."""
    await engine.command("PING")  # connected
    assert engine.wire is not None
    line = engine.wire._line
    assert line is not None and line.transport is not None
    writes: list[bytes] = []
    write = line.transport.write
    line.transport.write = lambda data: (writes.append(bytes(data)), write(data))[1]  # type: ignore[method-assign]
    try:
        yield writes
    finally:
        line.transport.write = write  # type: ignore[method-assign]


async def test_a_command_on_an_idle_line_is_written_at_once_and_the_others_of_a_turn_together(engine: Engine) -> None:
    async with writes_of(engine) as writes:
        first = asyncio.ensure_future(engine.command("SET", engine.key("w"), 1))
        await asyncio.sleep(0)  # the coroutine runs up to its wait: the line was idle, so the command is out
        assert writes == [pack(("SET", engine.key("w"), 1))]
        rest = [asyncio.ensure_future(engine.command("INCR", engine.key("w"))) for _ in range(3)]
        await asyncio.sleep(0)  # all three sent in this turn while the first waits: not written yet ...
        assert len(writes) == 1
        assert await first == b"OK"
        assert await asyncio.gather(*rest) == [2, 3, 4]
        assert writes[1:] == [pack(("INCR", engine.key("w"))) * 3]  # ... and then in one write


async def test_a_command_on_an_idle_line_takes_the_held_ones_with_it_in_one_write(engine: Engine) -> None:
    async with writes_of(engine) as writes:
        held = engine.send_soon("SET", engine.key("h"), 1)  # its answer wanted later: held for the turn's write
        assert held is not None and writes == []
        assert engine.wire is not None
        answer = engine.wire.send_packed(pack(("INCR", engine.key("h"))))  # nothing written waits: out at once
        assert answer is not None
        assert writes == [pack(("SET", engine.key("h"), 1)) + pack(("INCR", engine.key("h")))]
        assert (await held, await answer) == (b"OK", 2)
        await asyncio.sleep(0)  # the turn's flush has nothing left to write
        assert len(writes) == 1


async def test_an_error_answer_fails_its_command_only(engine: Engine) -> None:
    await engine.command("SET", engine.key("text"), "a")
    wrong, right = await asyncio.gather(engine.command("INCR", engine.key("text")), engine.command("GET",
                                        engine.key("text")), return_exceptions=True)  # fmt: skip
    assert isinstance(wrong, ResponseError) and "not an integer" in str(wrong)
    assert right == b"a"


async def test_a_stuck_server_is_unavailable_within_the_timeout_and_used_again_once_it_answers(
    private_redis: RedisServer,
) -> None:
    engine = Engine.from_url(private_redis.url, timeout=0.5)
    assert private_redis.process is not None
    try:
        await engine.command("SET", "k", "1")
        os.kill(private_redis.process.pid, signal.SIGSTOP)  # the server is there, but answers nothing
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(BackendUnavailableError, match="no answer within 0.5 s"):
                await engine.command("GET", "k")
            assert loop.time() - started < 2.0
        finally:
            os.kill(private_redis.process.pid, signal.SIGCONT)
        assert await engine.command("GET", "k") == b"1"  # a new connection, made by the next command
    finally:
        await engine.aclose()


async def test_a_command_on_a_connection_that_is_lost_fails_and_is_never_sent_again(
    engine: Engine, redis_url: str
) -> None:
    # BLPOP waits on the server; killing its connection loses the command after it was written. It may have run (a
    # spend, a take), so it fails instead of being sent again; the next command opens a new connection.
    observer = aioredis.Redis.from_url(redis_url)
    try:
        await engine.command("CLIENT", "SETNAME", "wire-under-test")
        waiting = asyncio.ensure_future(engine.command("BLPOP", engine.key("never"), 1.5))
        for _ in range(200):  # until the server has the BLPOP
            clients = await observer.client_list()
            if any(c.get("name") == "wire-under-test" and c.get("cmd") == "blpop" for c in clients):
                break
            await asyncio.sleep(0.01)
        await observer.client_kill_filter(_type="normal", skipme=True)
        with pytest.raises(BackendUnavailableError, match="the connection was lost"):
            await waiting
        assert await observer.llen(engine.key("never")) == 0
        assert await engine.command("PING") == b"PONG"
    finally:
        await observer.aclose()


async def test_the_url_s_database_and_credentials_are_used(private_redis: RedisServer) -> None:
    admin = aioredis.Redis.from_url(private_redis.url)
    try:
        await admin.execute_command("ACL", "SETUSER", "deck", "on", ">s3cret", "~*", "+@all")
        engine = Engine.from_url(f"redis://deck:s3cret@127.0.0.1:{private_redis.port}/3")
        try:
            await engine.command("SET", "where", "three")
            assert await admin.execute_command("SELECT", 3) and await admin.get("where") == b"three"
        finally:
            await engine.aclose()
        refused = Engine.from_url(f"redis://deck:wrong@127.0.0.1:{private_redis.port}/0")
        try:
            with pytest.raises(ResponseError, match="WRONGPASS"):
                await refused.command("PING")
        finally:
            await refused.aclose()
    finally:
        await admin.aclose()


async def test_many_waiters_share_one_connect(engines: Callable[..., Engine]) -> None:
    engine = engines()
    assert await asyncio.gather(*(engine.command("PING") for _ in range(50))) == [b"PONG"] * 50
