"""A channel's backlog, without a server: what waits to be written is bounded, the oldest notification gives way,
and responses and requests to the client never do (``transports/http/channels.py``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tooldeck.transports.http.channels import MAX_BACKLOG, STANDALONE, Channel


def note(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}}


def ask(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": f"ask-{n}", "method": "elicitation/create", "params": {"message": str(n)}}


def answer(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}


def waiting(channel: Channel) -> list[Any]:
    return [m.get("params", {}).get("data", m.get("id")) for m in channel.queue]


def test_the_default_backlog_is_a_thousand_messages() -> None:
    assert MAX_BACKLOG == 1000
    assert Channel("1", (7,)).backlog == 1000


@pytest.mark.parametrize("stream_id", ["1", STANDALONE])
def test_up_to_the_backlog_nothing_is_dropped(stream_id: str, caplog: pytest.LogCaptureFixture) -> None:
    channel = Channel(stream_id, (7,) if stream_id != STANDALONE else (), backlog=3)
    for n in range(3):
        channel.put(note(n))
    assert waiting(channel) == [0, 1, 2]
    assert channel.dropped == 0
    assert caplog.records == []


@pytest.mark.parametrize("stream_id", ["1", STANDALONE])
def test_past_the_backlog_the_oldest_notification_gives_way(stream_id: str, caplog: pytest.LogCaptureFixture) -> None:
    channel = Channel(stream_id, (7,) if stream_id != STANDALONE else (), backlog=3)
    channel.attached = True  # a connection is writing this stream (its client is the one not reading)
    with caplog.at_level(logging.WARNING, "tooldeck.http"):
        for n in range(10):
            channel.put(note(n))
    assert waiting(channel) == [7, 8, 9]
    assert channel.dropped == 7
    assert [r.getMessage() for r in caplog.records] == [  # said once, not once per message
        f"SSE stream {stream_id}: the client is not keeping up; 3 messages wait to be written, so the oldest "
        "notifications are dropped"
    ]


def test_the_response_is_never_dropped_and_ends_the_channel() -> None:
    channel = Channel("1", (7,), backlog=2)
    for n in range(5):
        channel.put(note(n))
    channel.put(answer(7))
    assert waiting(channel) == [3, 4, 7]  # the response comes on top of a full backlog
    assert channel.finished


def test_requests_to_the_client_are_never_dropped() -> None:
    channel = Channel("1", (7,), backlog=2)
    channel.put(ask(0))
    for n in range(5):
        channel.put(note(n))
    assert waiting(channel) == ["ask-0", 4]  # the notifications gave way around the waiting request
    channel.put(ask(1))  # a request is queued too, the oldest notification giving way to it
    assert waiting(channel) == ["ask-0", "ask-1"]
    channel.put(ask(2))  # only requests left to drop: nothing is, and the request is kept
    assert waiting(channel) == ["ask-0", "ask-1", "ask-2"]
    channel.put(note(5))
    assert waiting(channel) == ["ask-0", "ask-1", "ask-2", 5]


def test_a_batch_reply_is_never_dropped() -> None:
    channel = Channel("1", (1, 2), backlog=1)
    channel.put(note(0))
    channel.put([answer(1), answer(2)])
    assert [type(m) for m in channel.queue] == [dict, list]  # the reply comes on top of a full backlog
    channel.put(note(1))  # (nothing follows a batch's reply; were it to, the reply would stay)
    assert [type(m) for m in channel.queue] == [list, dict]
    assert channel.finished


def test_a_channel_no_connection_writes_drops_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    # A JSON answer's channel (its notifications cannot be delivered), or a stream before its connection: the drops
    # are counted, and a connection that comes reports them (SseWriter.stream).
    channel = Channel("1", (7,), backlog=3)
    with caplog.at_level(logging.WARNING, "tooldeck.http"):
        for n in range(100):
            channel.put(note(n))
        channel.put(answer(7))
    assert waiting(channel) == [97, 98, 99, 7]
    assert channel.dropped == 97
    assert caplog.records == []


def test_a_backlog_below_one_is_refused() -> None:
    from helpers import adder_deck
    from tooldeck.transports.http import HttpApp

    with pytest.raises(ValueError, match="max_backlog must be at least 1, got 0"):
        HttpApp(adder_deck("backlog"), max_backlog=0)
