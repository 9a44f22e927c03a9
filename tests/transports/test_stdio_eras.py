"""Both eras over stdio, each on a connection of its own (real subprocesses): the first request fixes the era;
afterwards initialize on a modern connection is -32022 and the 2026-07-28 envelope on a legacy one is -32600.
Every line is checked against the schema of its connection's era (tests/stdio_client.py)."""

from __future__ import annotations

from eras import MODERN, SERVER_INFO_KEY, meta, modern
from stdio_client import CLIENT_INFO, StdioServer

DECK = "tests/transports/decks/eras_deck.py"


def test_a_connection_opened_by_a_modern_request_is_served_statelessly() -> None:
    with StdioServer("serve", DECK) as server:
        server.send(modern("d", "server/discover"))
        discovered = server.read()
        assert discovered["result"]["supportedVersions"] == [MODERN]
        assert discovered["result"]["_meta"][SERVER_INFO_KEY]["name"] == "eras"
        assert (discovered["result"]["ttlMs"], discovered["result"]["cacheScope"]) == (60_000, "private")
        server.send(modern(1, "tools/call", {"name": "add", "arguments": {"a": 20, "b": 22}}))
        called = server.read()
        assert called["result"]["structuredContent"] == {"result": 42}
        assert called["result"]["resultType"] == "complete"
        server.send(modern(2, "tools/call", {"name": "steps"}, logLevel="debug", progressToken=9))
        streamed = [server.read() for _ in range(4)]
        assert [m.get("method") for m in streamed] == ["notifications/progress", "notifications/message",
                                                       "notifications/progress", None]  # fmt: skip
        server.send(modern(3, "resources/read", {"uri": "test://nowhere"}))
        assert server.read()["error"]["code"] == -32602
        server.send(modern(4, "ping"))
        assert server.read()["error"]["code"] == -32601
        server.send(modern(5, "tools/call", {"name": "think"}))
        assert server.read()["error"] == {
            "code": -32021,
            "message": "A sampling request cannot be requested in this 2026-07-28 request: its clientCapabilities do "
            "not declare what it needs, so a tool that needs it cannot run",
            "data": {"requiredCapabilities": {"sampling": {}}},
        }
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
        refused = server.request("initialize", init, id="init")
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
        server.send({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}})
        assert server.read()["error"]["code"] == -32602  # no envelope: each request must carry its own
        server.send(modern(7, "tools/list", version="2099-01-01"))
        assert server.read()["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


def test_a_level_5_tool_over_stdio_runs_through_the_pipeline_with_the_local_principal() -> None:
    with StdioServer("serve", DECK) as server:
        server.send(modern(1, "tools/call", {"name": "weather"}))
        reply = server.read()
        assert reply["error"]["code"] == -32000  # the local user holds no weather:read without a policy
        assert "weather:read" in reply["error"]["message"]


def test_a_connection_opened_by_initialize_stays_in_the_2025_era() -> None:
    with StdioServer("serve", DECK) as server:
        assert server.initialize()["result"]["protocolVersion"] == "2025-11-25"
        listed = server.request("tools/list", {}, id=1)
        assert "resultType" not in listed["result"]
        server.send(modern(2, "tools/list"))
        refused = server.read()
        assert refused["error"]["code"] == -32600 and refused["id"] == 2
        assert server.request("ping", {}, id=3)["result"] == {}
        progress = server.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2},
                                                 "_meta": {"progressToken": 1}}, id=4)  # fmt: skip
        assert progress["result"]["structuredContent"] == {"result": 3}
        assert server.request("resources/read", {"uri": "test://nowhere"}, id=5)["error"]["code"] == -32002


def test_an_initialize_carrying_the_envelope_opens_a_legacy_connection_and_is_refused() -> None:
    # initialize never claims the modern era (the SDKs' rule), and the envelope has no place in the 2025 era: -32600
    # (over HTTP the same message is a modern request for a removed method: 404); a plain initialize then works
    with StdioServer("serve", DECK) as server:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT_INFO}
        assert server.request("initialize", {**params, "_meta": meta()}, id="i1")["error"]["code"] == -32600
        assert server.request("initialize", params, id="i2")["result"]["protocolVersion"] == "2025-11-25"
