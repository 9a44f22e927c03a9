"""The session's lifecycle, negotiation and JSON-RPC error handling, driven synchronously (sans-IO)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import CLIENT_INFO, Harness, init_params
from tooldeck import Deck
from tooldeck.server.methods import Method, method_table


def make_deck(**options: Any) -> Deck:
    deck = Deck("test", version="1.2.3", instructions="Use the tools.", **options)

    @deck.tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    return deck


@pytest.fixture
def harness() -> Harness:
    return Harness(make_deck())


# --- initialize and negotiation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_initialize_echoes_a_supported_version(harness: Harness, version: str) -> None:
    reply = harness.request("initialize", init_params(version))
    assert reply["id"] == 1
    assert reply["result"] == {
        "protocolVersion": version,
        "capabilities": {"logging": {}, "tools": {"listChanged": True}},
        "serverInfo": {"name": "test", "version": "1.2.3"},
        "instructions": "Use the tools.",
    }


@pytest.mark.parametrize("version", ["2024-11-05", "2030-01-01", "banana"])
def test_initialize_answers_the_latest_for_an_unsupported_version(harness: Harness, version: str) -> None:
    reply = harness.request("initialize", init_params(version))
    assert reply["result"]["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"capabilities": {}, "clientInfo": CLIENT_INFO}, '"protocolVersion"'),
        ({"protocolVersion": 20251125, "capabilities": {}, "clientInfo": CLIENT_INFO}, '"protocolVersion"'),
        ({"protocolVersion": "2025-11-25", "clientInfo": CLIENT_INFO}, '"capabilities"'),
        ({"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": CLIENT_INFO}, '"capabilities"'),
        ({"protocolVersion": "2025-11-25", "capabilities": {}}, '"clientInfo"'),
        ({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}}, "clientInfo.version"),
    ],
)
def test_initialize_with_bad_params_is_refused_and_the_session_stays_usable(
    harness: Harness, params: dict[str, Any], text: str
) -> None:
    reply = harness.request("initialize", params)
    assert reply["error"]["code"] == -32602
    assert text in reply["error"]["message"]
    assert "result" in harness.request("initialize", init_params(), id=2)


def test_second_initialize_is_refused(harness: Harness) -> None:
    harness.initialize()
    reply = harness.request("initialize", init_params(), id=2)
    assert reply["error"]["code"] == -32600
    assert "already initialized" in reply["error"]["message"]


def test_the_session_remembers_the_client(harness: Harness) -> None:
    harness.initialize(capabilities={"sampling": {}})
    assert harness.session.client_info == CLIENT_INFO
    assert harness.session.client_capabilities == {"sampling": {}}
    assert harness.session.ready


def test_server_info_carries_the_optional_fields() -> None:
    deck = Deck(
        "full",
        version="2.0",
        title="Full",
        description="Everything",
        website_url="https://example.com",
        icons=[{"src": "https://example.com/i.png", "mime_type": "image/png", "sizes": ["48x48"]}],
    )
    result = Harness(deck).initialize()
    assert result["serverInfo"] == {
        "name": "full",
        "version": "2.0",
        "title": "Full",
        "description": "Everything",
        "websiteUrl": "https://example.com",
        "icons": [{"src": "https://example.com/i.png", "mimeType": "image/png", "sizes": ["48x48"]}],
    }
    assert "instructions" not in result


# --- before initialization ------------------------------------------------------------------------------------


def test_ping_is_answered_before_initialize(harness: Harness) -> None:
    assert harness.request("ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize("method", ["tools/list", "tools/call", "logging/setLevel", "no/such"])
def test_other_requests_before_initialize_are_refused_at_once(harness: Harness, method: str) -> None:
    reply = harness.request(method, {})
    assert reply["error"]["code"] == -32600
    assert "before initialize" in reply["error"]["message"]


def test_notifications_before_initialize_are_ignored(harness: Harness) -> None:
    assert harness.send({"jsonrpc": "2.0", "method": "notifications/initialized"}) == []
    assert not harness.session.ready
    assert harness.send({"jsonrpc": "2.0", "method": "notifications/whatever"}) == []


# --- JSON-RPC errors ---------------------------------------------------------------------------------------------


def test_ping_after_initialize(harness: Harness) -> None:
    harness.initialize()
    assert harness.request("ping", {"_meta": {"x": 1}}, id="p")["result"] == {}


def test_unknown_method_is_32601(harness: Harness) -> None:
    harness.initialize()
    reply = harness.request("tools/frobnicate", {}, id=5)
    assert reply == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32601, "message": "Method not found: tools/frobnicate"},
    }


def test_notifications_get_no_reply_not_even_unknown_ones(harness: Harness) -> None:
    harness.initialize()
    assert harness.send({"jsonrpc": "2.0", "method": "notifications/unknown", "params": {"a": 1}}) == []
    assert harness.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}) == []
    assert harness.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "junk"}) == []


def test_parse_error_omits_the_id(harness: Harness) -> None:
    replies = harness.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert len(replies) == 1
    assert "id" not in replies[0]
    assert replies[0]["error"]["code"] == -32700


@pytest.mark.parametrize("value", [1, "x", None, True])
def test_non_object_messages_are_32600_without_id(harness: Harness, value: Any) -> None:
    harness.initialize()
    (reply,) = harness.send(value)
    assert reply == {
        "jsonrpc": "2.0",
        "error": {
            "code": -32600,
            "message": f"Invalid request: expected a JSON-RPC object, got {type(value).__name__}",
        },
    }


def test_wrong_jsonrpc_version_keeps_the_id(harness: Harness) -> None:
    (reply,) = harness.send({"jsonrpc": "1.0", "id": 3, "method": "ping"})
    assert reply["id"] == 3
    assert reply["error"]["code"] == -32600


def test_null_id_is_refused(harness: Harness) -> None:
    (reply,) = harness.send({"jsonrpc": "2.0", "id": None, "method": "ping"})
    assert "id" not in reply
    assert reply["error"]["code"] == -32600


def test_array_params_are_32602(harness: Harness) -> None:
    harness.initialize()
    (reply,) = harness.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": [1]})
    assert reply["id"] == 8
    assert reply["error"]["code"] == -32602


def test_stray_responses_are_ignored(harness: Harness) -> None:
    harness.initialize()
    assert harness.send({"jsonrpc": "2.0", "id": 42, "result": {}}) == []


def test_a_failing_handler_is_an_internal_error_and_the_session_survives() -> None:
    deck = make_deck()

    def broken(request: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    deck.methods["broken/method"] = Method("broken/method", broken)
    harness = Harness(deck)
    harness.initialize()
    reply = harness.request("broken/method", {}, id=1)
    assert reply["error"] == {"code": -32603, "message": "Internal error while handling broken/method"}
    assert harness.request("ping", id=2)["result"] == {}


# --- batches ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_batches_are_refused_after_2025_03_26(version: str) -> None:
    harness = Harness(make_deck())
    harness.initialize(version)
    (reply,) = harness.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
    assert "id" not in reply
    assert reply["error"]["code"] == -32600
    assert f"not supported in {version}" in reply["error"]["message"]


def test_batch_before_initialize_is_refused(harness: Harness) -> None:
    (reply,) = harness.send([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-03-26")}])
    assert reply["error"]["code"] == -32600


def test_2025_03_26_batches_get_one_array_of_replies() -> None:
    harness = Harness(make_deck())
    harness.initialize("2025-03-26")
    replies = harness.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/whatever"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
            {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": init_params("2025-03-26")},
            7,
        ]
    )
    assert len(replies) == 1
    batch = replies[0]
    assert [(m.get("id"), "error" in m) for m in batch] == [(1, False), (2, False), (3, True), (4, True), (None, True)]


def test_2025_03_26_batch_of_notifications_gets_nothing() -> None:
    harness = Harness(make_deck())
    harness.initialize("2025-03-26")
    assert harness.send([{"jsonrpc": "2.0", "method": "notifications/a"}]) == []


def test_empty_batch_is_invalid() -> None:
    harness = Harness(make_deck())
    harness.initialize("2025-03-26")
    (reply,) = harness.send([])
    assert reply["error"]["code"] == -32600


# --- logging/setLevel -------------------------------------------------------------------------------------------


def test_set_level(harness: Harness) -> None:
    harness.initialize()
    assert harness.request("logging/setLevel", {"level": "error"})["result"] == {}
    assert harness.session.state.log_rank == 4


@pytest.mark.parametrize("level", ["verbose", None, 3, "INFO"])
def test_set_level_refuses_unknown_levels(harness: Harness, level: Any) -> None:
    harness.initialize()
    reply = harness.request("logging/setLevel", {"level": level})
    assert reply["error"]["code"] == -32602
    assert "unknown log level" in reply["error"]["message"]


# --- tools/list and list_changed ---------------------------------------------------------------------------------


def test_tools_list(harness: Harness) -> None:
    harness.initialize()
    result = harness.request("tools/list")["result"]
    assert result == {
        "tools": [
            {
                "name": "add",
                "description": "Add two numbers.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
                "outputSchema": {
                    "type": "object",
                    "properties": {"result": {"type": "number"}},
                    "required": ["result"],
                },
            }
        ]
    }


def test_pagination_walks_every_page_and_refuses_bad_cursors() -> None:
    deck = Deck("paged", page_size=3)
    for i in range(8):
        deck.add_tool(lambda: None, name=f"tool_{i}")
    harness = Harness(deck)
    harness.initialize()
    names, cursor, pages = [], None, 0
    while True:
        result = harness.request("tools/list", {"cursor": cursor} if cursor else {}, id=f"page{pages}")["result"]
        names += [tool["name"] for tool in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages == 3
    assert names == [f"tool_{i}" for i in range(8)]
    for bad in ["nonsense", 12, "", "eyJ"]:
        reply = harness.request("tools/list", {"cursor": bad}, id="bad")
        assert reply["error"]["code"] == -32602
        assert reply["error"]["message"].startswith("Invalid cursor")


def test_list_changed_reaches_initialized_sessions_only() -> None:
    deck = make_deck()
    ready, fresh = Harness(deck), Harness(deck)
    ready.initialize()
    ready.out.clear()
    deck.add_tool(lambda: "hi", name="hello")
    assert ready.out == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
    assert fresh.out == []
    deck.remove_tool("hello")
    assert ready.out[-1] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    ready.session.close()
    ready.out.clear()
    deck.add_tool(lambda: "hi", name="again")
    assert ready.out == []


def test_every_method_of_the_table_resolves_to_its_handler() -> None:
    # The table names handlers by module and function, imported on first use: each must exist and be callable, and
    # the methods that run user code or wait on a store must be the ones answered later (never in the handshake).
    table = method_table()
    for name, method in table.items():
        assert callable(method.resolve()), name
    later = {name for name, method in table.items() if method.later}
    assert later == {"tools/call", "resources/read", "resources/subscribe", "prompts/get", "completion/complete", "tasks/get",
                     "tasks/result", "tasks/list", "tasks/cancel"}  # fmt: skip


def test_a_method_that_is_not_a_string_is_refused_even_in_the_handshake_gate() -> None:
    harness = Harness(make_deck())
    assert harness.session.answers_now({"jsonrpc": "2.0", "id": 1, "method": ["tools/call"]})
    (reply,) = harness.send({"jsonrpc": "2.0", "id": 1, "method": ["tools/call"]})
    assert reply["error"] == {"code": -32600, "message": 'Invalid request: "method" must be a string'}
