"""subscriptions/listen over Streamable HTTP (transports/http/listen.py): the POST's answer is an SSE stream that opens
with the acknowledgement; one bus publication reaches it and a 2025 session's GET stream; closing it frees it; what
it carries is decided for the request's principal; shutdown ends it with its result. In-process (ASGI) and against a
real ``tooldeck serve --http``. Every body is checked against the schema of its request's revision."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from asgi_client import AsgiClient, Response
from eras import MODERN, era_deck, modern, token_policy
from http_client import HttpClient, serve_http
from tooldeck import Deck
from tooldeck.transports.http.app import HttpApp

SUB = "io.modelcontextprotocol/subscriptionId"
ACK = "notifications/subscriptions/acknowledged"
SSE_ACCEPT = "application/json, text/event-stream"


def listen_message(request_id: Any, notifications: dict[str, Any]) -> dict[str, Any]:
    return modern(request_id, "subscriptions/listen", {"notifications": notifications})


async def open_listen(client: AsgiClient, request_id: Any, notifications: dict[str, Any],
                      accept: str = SSE_ACCEPT, **headers: str) -> Response:  # fmt: skip
    message = listen_message(request_id, notifications)
    mirrored = {"mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen", **headers}
    return await client.post(message, version=None, accept=accept, headers=mirrored)


async def next_message(response: Response) -> Any:
    async for event in response.events(timeout=5):
        if event.data:
            return event.message
    raise AssertionError("the stream ended")


def counts(deck: Deck) -> tuple[int, int, int]:
    return len(deck.listeners), deck.bus.subscribers("list_changed"), deck.bus.subscribers("resource_updated")


async def test_the_answer_is_a_stream_that_opens_with_the_acknowledgement() -> None:
    deck = era_deck()
    client = AsgiClient(HttpApp(deck))
    response = await open_listen(client, "L", {"toolsListChanged": True, "promptsListChanged": True})
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-accel-buffering"] == "no"
    assert "mcp-session-id" not in response.headers
    first = await next_message(response)
    assert first == {"jsonrpc": "2.0", "method": ACK, "params": {
        "notifications": {"toolsListChanged": True, "promptsListChanged": True}, "_meta": {SUB: "L"}}}  # fmt: skip
    await response.close()


async def test_one_publication_reaches_a_listen_stream_and_a_2025_get_stream_and_closing_frees_it() -> None:
    deck = era_deck()
    client = AsgiClient(HttpApp(deck))
    before = counts(deck)
    session = await client.initialize()
    get = await client.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session,
                                               "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert get.status == 200
    listening = await open_listen(client, 1, {"toolsListChanged": True})
    assert (await next_message(listening))["method"] == ACK
    assert len(deck.listeners) == 1
    deck.add_tool(lambda: "hi", name="hello")
    assert await next_message(listening) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                             "params": {"_meta": {SUB: 1}}}  # fmt: skip
    assert await next_message(get) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    await listening.close()
    async with asyncio.timeout(5):
        while deck.listeners:
            await asyncio.sleep(0.01)
    await get.close()
    await client.request("DELETE", headers={"mcp-session-id": session})
    assert counts(deck) == before  # the listen stream's session and subscriptions are gone with the connection


async def test_the_filter_is_honoured_on_the_stream() -> None:
    deck = era_deck()
    client = AsgiClient(HttpApp(deck))
    listening = await open_listen(client, 2, {"promptsListChanged": True,
                                              "resourceSubscriptions": ["test://static-text"]})  # fmt: skip
    assert (await next_message(listening))["method"] == ACK
    deck.add_tool(lambda: "hi", name="hello")  # not asked for: never sent
    deck.notify_resource_updated("test://template/9/data")  # not subscribed
    deck.notify_resource_updated("test://static-text")
    assert await next_message(listening) == {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                             "params": {"uri": "test://static-text", "_meta": {SUB: 2}}}  # fmt: skip
    await listening.close()


async def test_a_stream_carries_only_what_its_principal_may_read(tmp_path: Path) -> None:
    deck = era_deck()
    deck.add_resource("test://secret", "classified", description="Level 5.", security_level=5, scopes=["weather:read"])
    deck.apply_policy(token_policy(tmp_path))
    client = AsgiClient(HttpApp(deck))
    wanted = {"toolsListChanged": True, "resourceSubscriptions": ["test://secret"]}
    reader = await open_listen(client, "r", wanted, authorization="Bearer reader-secret")
    nobody = await open_listen(client, "n", wanted, authorization="Bearer nobody-secret")
    assert (await next_message(reader))["params"]["notifications"]["resourceSubscriptions"] == ["test://secret"]
    assert (await next_message(nobody))["params"]["notifications"]["resourceSubscriptions"] == []
    deck.notify_resource_updated("test://secret")
    deck.add_tool(lambda: "hi", name="hello")
    assert (await next_message(reader))["params"] == {"uri": "test://secret", "_meta": {SUB: "r"}}
    assert (await next_message(reader))["method"] == "notifications/tools/list_changed"
    assert (await next_message(nobody))["method"] == "notifications/tools/list_changed"  # the update never came
    anonymous = await open_listen(client, "a", wanted)  # no credentials: list changes, no guarded resource
    assert (await next_message(anonymous))["params"]["notifications"]["resourceSubscriptions"] == []
    await anonymous.close()
    await reader.close()
    await nobody.close()


@pytest.mark.parametrize("json_response", [False, True])
async def test_listen_is_a_stream_even_when_answers_are_json_but_needs_sse_accepted(json_response: bool) -> None:
    client = AsgiClient(HttpApp(era_deck(), json_response=json_response))
    refused = await open_listen(client, 1, {"toolsListChanged": True}, accept="application/json")
    assert refused.status == 406
    await refused.body()
    streamed = await open_listen(client, 2, {"toolsListChanged": True})
    assert streamed.headers["content-type"] == "text/event-stream"
    assert (await next_message(streamed))["method"] == ACK
    await streamed.close()


async def test_a_malformed_filter_is_a_json_rpc_error() -> None:
    deck = era_deck()
    client = AsgiClient(HttpApp(deck))
    message = modern(1, "subscriptions/listen", {"notifications": {"toolsListChanged": 1}})
    response = await client.post(message, version=None, accept=SSE_ACCEPT,
                                 headers={"mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"})  # fmt: skip
    body = await response.json()
    assert body["id"] == 1 and body["error"]["code"] == -32602
    assert len(deck.listeners) == 0


async def test_shutdown_ends_a_listen_stream_with_its_result() -> None:
    deck = era_deck()
    app = HttpApp(deck)
    client = AsgiClient(app)
    listening = await open_listen(client, 9, {"toolsListChanged": True})
    assert (await next_message(listening))["method"] == ACK
    app.begin_shutdown()
    result = await next_message(listening)
    assert result["id"] == 9 and result["result"]["resultType"] == "complete"
    assert result["result"]["_meta"][SUB] == 9
    await listening.body()  # the stream ends after it
    assert listening.ended and len(deck.listeners) == 0


def test_over_real_http_a_tool_added_mid_stream_reaches_both_eras() -> None:
    with serve_http("tests/transports/decks/listen_deck.py") as url, HttpClient(url) as modern_client, \
            HttpClient(url) as legacy_client:  # fmt: skip
        session = legacy_client.initialize()
        headers = {"mcp-method": "subscriptions/listen"}
        listen = listen_message("L", {"toolsListChanged": True, "resourceSubscriptions": ["test://static-text"]})
        with legacy_client.stream(method="GET", session=session) as get, \
                modern_client.stream(listen, version=MODERN, headers=headers) as stream:  # fmt: skip
            assert stream.status_code == 200 and get.status_code == 200
            messages = stream.messages()
            assert next(messages)["method"] == ACK
            grow = modern(1, "tools/call", {"name": "grow", "arguments": {"name": "sprout"}})
            called = modern_client.post(grow, version=MODERN, headers={"mcp-method": "tools/call",
                                                                        "mcp-name": "grow"})  # fmt: skip
            assert called.json()["result"]["content"][0]["text"] == "added sprout"
            assert next(messages) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                                      "params": {"_meta": {SUB: "L"}}}  # fmt: skip
            assert next(get.messages()) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            touch = modern(2, "tools/call", {"name": "touch", "arguments": {"uri": "test://static-text"}})
            modern_client.post(touch, version=MODERN, headers={"mcp-method": "tools/call", "mcp-name": "touch"})
            assert next(messages)["params"] == {"uri": "test://static-text", "_meta": {SUB: "L"}}
