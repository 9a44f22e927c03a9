"""Cork: a response's head and body leave in one write; a lone write leaves at the end of the loop turn."""

from __future__ import annotations

import asyncio
from typing import Any

from tooldeck.transports.http.cork import Cork, corked_protocol


class Recorder:
    """The transport under the cork: what was written, in which calls."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000)}.get(name, default)


async def test_head_and_body_leave_in_one_write() -> None:
    transport = Recorder()
    cork = Cork(transport, asyncio.get_running_loop())
    cork.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert transport.writes == []  # held back: the body is likely to follow in this turn
    cork.write(b'{"ok":true}')
    assert transport.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"ok":true}']
    await asyncio.sleep(0)  # the flush scheduled for the head finds nothing left
    assert len(transport.writes) == 1


async def test_a_lone_write_leaves_at_the_end_of_the_turn() -> None:
    transport = Recorder()
    cork = Cork(transport, asyncio.get_running_loop())
    cork.write(b"id: 1\ndata: {}\n\n")
    assert cork.get_write_buffer_size() == len(b"id: 1\ndata: {}\n\n")
    await asyncio.sleep(0)
    assert transport.writes == [b"id: 1\ndata: {}\n\n"]
    assert cork.get_write_buffer_size() == 0


async def test_empty_writes_are_ignored() -> None:
    transport = Recorder()
    cork = Cork(transport, asyncio.get_running_loop())
    cork.write(b"")
    await asyncio.sleep(0)
    assert transport.writes == []


async def test_close_sends_what_is_held_first_and_abort_drops_it() -> None:
    transport = Recorder()
    cork = Cork(transport, asyncio.get_running_loop())
    cork.write(b"last words")
    cork.close()
    assert transport.writes == [b"last words"] and transport.closed

    dropped = Recorder()
    cork = Cork(dropped, asyncio.get_running_loop())
    cork.write(b"never sent")
    cork.abort()
    await asyncio.sleep(0)
    assert dropped.writes == [] and dropped.aborted


async def test_nothing_is_written_to_a_closing_transport() -> None:
    transport = Recorder()
    cork = Cork(transport, asyncio.get_running_loop())
    cork.write(b"too late")
    transport.closed = True  # the peer went away during the turn
    await asyncio.sleep(0)
    assert transport.writes == []


def test_other_transport_methods_pass_through() -> None:
    transport = Recorder()
    cork = Cork(transport, None)
    assert cork.get_extra_info("peername") == ("127.0.0.1", 5000)
    assert cork.is_closing() is False


def test_the_corked_protocol_is_uvicorns_httptools_protocol() -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    protocol = corked_protocol()
    assert protocol is not None and issubclass(protocol, HttpToolsProtocol)
