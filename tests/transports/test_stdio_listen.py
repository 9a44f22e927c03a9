"""subscriptions/listen over stdio (a real ``tooldeck serve`` subprocess): the acknowledgement, then the asked-for
notifications on the connection, each with its subscriptionId, beside the connection's other requests;
notifications/cancelled ends it. Every line is checked against the 2026-07-28 schema (tests/stdio_client.py)."""

from __future__ import annotations

from typing import Any

from eras import modern
from stdio_client import StdioServer

DECK = "tests/transports/decks/listen_deck.py"
SUB = "io.modelcontextprotocol/subscriptionId"
ACK = "notifications/subscriptions/acknowledged"


def read_until(server: StdioServer, *wanted: Any) -> list[Any]:
    """Messages until each of ``wanted`` has arrived: a request id (its response) or a subscription id (a
    list_changed on that stream)."""
    out: list[Any] = []
    missing = set(wanted)
    while missing:
        message = server.read()
        out.append(message)
        if "method" not in message:
            missing.discard(message.get("id"))
        elif message["method"] == "notifications/tools/list_changed":
            missing.discard(message["params"]["_meta"][SUB])
    return out


def test_a_listen_stream_on_stdio_hears_what_it_asked_for_until_cancelled() -> None:
    with StdioServer("serve", DECK) as server:
        server.send(modern(10, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, logLevel="debug"))
        assert server.read() == {"jsonrpc": "2.0", "method": ACK,
                                 "params": {"notifications": {"toolsListChanged": True}, "_meta": {SUB: 10}}}  # fmt: skip
        server.send(modern("p", "subscriptions/listen", {"notifications": {"promptsListChanged": True}}))
        assert server.read()["params"]["_meta"] == {SUB: "p"}
        server.send(modern(1, "tools/call", {"name": "grow", "arguments": {"name": "sprout"}}))
        got = read_until(server, 1, 10)
        # exactly one notification, on the stream that asked for tool changes (not the prompts-only one, and no log
        # of the call although the listen request set a logLevel)
        assert [m for m in got if "id" not in m] == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                                      "params": {"_meta": {SUB: 10}}}]  # fmt: skip
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}})
        server.send(modern(11, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        assert server.read()["params"]["_meta"] == {SUB: 11}
        server.send(modern(2, "tools/call", {"name": "grow", "arguments": {"name": "shoot"}}))
        # the witness (11) hears the change; the cancelled stream (10, subscribed before it) says nothing
        got = read_until(server, 2, 11)
        assert [m["params"]["_meta"][SUB] for m in got if "id" not in m] == [11]
