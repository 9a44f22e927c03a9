"""Both eras on one Streamable HTTP endpoint: every rung of the 2026-07-28 ladder with its status and a JSON-RPC body
that echoes the request id, modern requests served with no session, and 2025 sessions beside them, unchanged.
Every body is checked against the schema of its request's revision (tests/asgi_client.py)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from asgi_client import AsgiClient, Response
from eras import MODERN, SERVER_INFO_KEY, era_deck, modern, token_policy
from tooldeck.server.peer import RequestPeer
from tooldeck.transports.http import modern as modern_exchange
from tooldeck.transports.http.app import HttpApp
from tooldeck.transports.http.channels import Channel

NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def headers_for(message: dict[str, Any], **override: str | None) -> dict[str, str]:
    """The mirrored headers a modern client sends for ``message``; ``override`` replaces (None: drops) one."""
    params = message.get("params", {})
    found: dict[str, str | None] = {
        "mcp-protocol-version": params.get("_meta", {}).get("io.modelcontextprotocol/protocolVersion"),
        "mcp-method": message["method"],
    }
    if message["method"] in NAMED:
        found["mcp-name"] = params.get(NAMED[message["method"]])
    found.update({k.replace("_", "-"): v for k, v in override.items()})
    return {k: v for k, v in found.items() if v is not None}


async def post(client: AsgiClient, message: dict[str, Any], accept: str = "application/json",
               **override: str | None) -> Response:  # fmt: skip
    return await client.post(message, version=None, accept=accept, headers=headers_for(message, **override))


async def answer(client: AsgiClient, message: dict[str, Any], **override: str | None) -> tuple[int, Any, Response]:
    response = await post(client, message, **override)
    return response.status, await response.json(), response


@pytest.fixture
def client() -> AsgiClient:
    return AsgiClient(HttpApp(era_deck()))


async def test_discover_over_http_has_no_session_id(client: AsgiClient) -> None:
    status, body, response = await answer(client, modern(7, "server/discover"))
    assert status == 200
    assert "mcp-session-id" not in response.headers
    assert body["id"] == 7
    assert body["result"]["supportedVersions"] == [MODERN]
    assert body["result"]["_meta"][SERVER_INFO_KEY] == {"name": "eras", "version": "2.0.0"}
    assert (body["result"]["ttlMs"], body["result"]["cacheScope"]) == (60_000, "public")


@pytest.mark.parametrize(
    ("message", "override", "status", "code"),
    [
        # the envelope first: -32602
        (
            {
                "jsonrpc": "2.0",
                "id": "a",
                "method": "tools/list",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
            },
            {},
            400,
            -32602,
        ),
        (modern("b", "tools/list", logLevel="loud"), {}, 400, -32602),
        # then the mirrored headers: -32020
        (modern("c", "tools/list"), {"mcp_protocol_version": None}, 400, -32020),
        (modern("d", "tools/list"), {"mcp_protocol_version": "2025-11-25"}, 400, -32020),
        (modern("e", "tools/list", version="v999.0.0"), {"mcp_protocol_version": MODERN}, 400, -32020),
        (modern("f", "tools/list"), {"mcp_method": None}, 400, -32020),
        (modern("g", "tools/list"), {"mcp_method": "TOOLS/LIST"}, 400, -32020),
        (modern("h", "tools/call", {"name": "add"}), {"mcp_name": None}, 400, -32020),
        (modern("i", "tools/call", {"name": "add"}), {"mcp_name": "fail"}, 400, -32020),
        (modern("j", "resources/read", {"uri": "test://static-text"}), {"mcp_name": "test://other"}, 400, -32020),
        (modern("k", "prompts/get", {"name": "review"}), {"mcp_name": "=?base64?not base64?="}, 400, -32020),
        # then the version: -32022
        (modern("l", "tools/list", version="v999.0.0"), {}, 400, -32022),
        (modern("m", "tools/list", version="2025-11-25"), {}, 400, -32022),
        # then the method: 404 + -32601 (removed methods sent with the envelope and the headers included)
        (modern("n", "initialize", {"protocolVersion": MODERN, "capabilities": {}}), {}, 404, -32601),
        (modern("o", "ping"), {}, 404, -32601),
        (modern("p", "logging/setLevel", {"level": "info"}), {}, 404, -32601),
        (modern("q", "resources/subscribe", {"uri": "test://static-text"}), {}, 404, -32601),
        (modern("r", "resources/unsubscribe", {"uri": "test://static-text"}), {}, 404, -32601),
        (modern("s", "tasks/result", {"taskId": "x"}), {}, 404, -32601),
        (modern(19, "no/such/method"), {}, 404, -32601),
        # capabilities, found while the tool runs: -32021
        (modern("t", "tools/call", {"name": "think"}), {}, 400, -32021),
        (modern("u", "tools/call", {"name": "ask_name"}, capabilities={"elicitation": {"url": {}}}), {}, 400, -32021),
    ],
)
async def test_each_rung_of_the_ladder_has_its_status_and_an_error_echoing_the_id(
    client: AsgiClient, message: dict[str, Any], override: dict[str, str | None], status: int, code: int
) -> None:
    got_status, body, response = await answer(client, message, **override)
    assert (got_status, body["error"]["code"]) == (status, code), body
    assert body["id"] == message["id"]
    assert "mcp-session-id" not in response.headers


async def test_unsupported_version_names_supported_and_requested(client: AsgiClient) -> None:
    _, body, _ = await answer(client, modern(1, "tools/list", version="v999.0.0"))
    assert body["error"]["data"] == {"supported": [MODERN], "requested": "v999.0.0"}
    _, body, _ = await answer(client, modern(2, "tools/call", {"name": "think"}))
    assert body["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}


async def test_headers_are_matched_as_the_transport_says(client: AsgiClient) -> None:
    message = modern(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    status, body, _ = await answer(client, message, mcp_name="  add\t", mcp_protocol_version=f" {MODERN} ")
    assert status == 200 and body["result"]["structuredContent"] == {"result": 3}
    encoded = "=?base64?" + base64.b64encode(b"add").decode() + "?="
    status, body, _ = await answer(client, {**message, "id": 2}, mcp_name=encoded)
    assert status == 200 and body["result"]["structuredContent"] == {"result": 3}
    status, body, _ = await answer(client, modern(3, "tools/call", {"name": "add"}), mcp_name="=?base64?YWR=?=")
    assert (status, body["error"]["code"]) == (400, -32020)


async def test_every_method_over_http(client: AsgiClient) -> None:
    for request_id, method, params in [
        (1, "tools/list", None), (2, "resources/list", None), (3, "resources/templates/list", None),
        (4, "prompts/list", None), (5, "resources/read", {"uri": "test://static-text"}),
        (6, "prompts/get", {"name": "review", "arguments": {"language": "perl"}}),
        (7, "completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                    "argument": {"name": "language", "value": "r"}}),
        (8, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}),
    ]:  # fmt: skip
        status, body, response = await answer(client, modern(request_id, method, params))
        assert status == 200 and body["result"]["resultType"] == "complete", (method, body)
        assert "mcp-session-id" not in response.headers
    status, body, _ = await answer(client, modern(9, "resources/read", {"uri": "test://nonexistent"}))
    assert (status, body["error"]["code"], body["error"]["data"]) == (200, -32602, {"uri": "test://nonexistent"})


async def test_progress_and_logs_stream_on_the_request_only_when_asked(client: AsgiClient) -> None:
    message = modern(1, "tools/call", {"name": "steps", "_meta": {}}, logLevel="info", progressToken="t")
    response = await post(client, message, accept="application/json, text/event-stream")
    assert response.headers["content-type"] == "text/event-stream"
    methods = [m.get("method") for m in await response.messages_until(1)]
    assert methods == ["notifications/progress", "notifications/message", "notifications/progress", None]
    quiet = await post(client, modern(2, "tools/call", {"name": "steps"}), accept="application/json, text/event-stream")
    assert quiet.headers["content-type"] == "application/json"  # nothing came before the response


async def test_a_modern_answer_needs_a_channel_only_when_the_request_streams(
    client: AsgiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Channel] = []

    def recorded(*args: Any) -> Channel:
        made.append(Channel(*args))
        return made[-1]

    monkeypatch.setattr(modern_exchange, "Channel", recorded)
    status, body, _ = await answer(client, modern(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}))
    assert (status, body["result"]["structuredContent"], made) == (200, {"result": 2}, [])  # answered at once
    status, body, _ = await answer(client, modern(2, "tools/list"))
    assert (status, made) == (200, [])
    message = modern(3, "tools/call", {"name": "steps"}, logLevel="info", progressToken="t")
    response = await post(client, message, accept="application/json, text/event-stream")
    assert [m.get("method") for m in await response.messages_until(3)][-2:] == ["notifications/progress", None]
    assert len(made) == 1 and made[0].finished  # its messages waited in a channel for the stream


async def test_both_eras_on_one_endpoint_at_the_same_time(client: AsgiClient) -> None:
    session = await client.initialize()
    listed = await client.call(session, 1, "tools/list", accept="application/json")
    legacy = await listed.json()
    assert "resultType" not in legacy["result"] and "ttlMs" not in legacy["result"]
    status, body, _ = await answer(client, modern(1, "tools/list"))  # the same id, another era: no clash
    assert status == 200 and body["result"]["resultType"] == "complete"
    read = await client.call(session, 2, "resources/read", {"uri": "test://nonexistent"}, accept="application/json")
    assert (await read.json())["error"]["code"] == -32002  # the 2025 code stays in 2025 sessions
    ping = await client.call(session, 3, "ping", accept="application/json")
    assert (await ping.json())["result"] == {}
    # a modern request that also names the session is still modern, and leaves the session alone
    _, body, response = await answer(client, modern(4, "tools/list"), mcp_session_id=session)
    assert "resultType" in body["result"] and "mcp-session-id" not in response.headers
    ping = await client.call(session, 5, "ping", accept="application/json")
    assert (await ping.json())["result"] == {}


async def test_legacy_requests_under_a_modern_header(client: AsgiClient) -> None:
    init = {"jsonrpc": "2.0", "id": "i", "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}  # fmt: skip
    refused = await client.post(init, version=MODERN, accept="application/json")
    assert refused.status == 400
    assert (await refused.json())["error"]["code"] == -32020 and "mcp-session-id" not in refused.headers
    plain = await client.post({"jsonrpc": "2.0", "id": "p", "method": "tools/list"}, version=MODERN,
                              accept="application/json")  # fmt: skip
    body = await plain.json()
    assert (plain.status, body["id"], body["error"]["code"]) == (400, "p", -32602)


async def test_a_batch_with_a_modern_request_is_refused(client: AsgiClient) -> None:
    response = await client.post([modern(1, "tools/list")], version=None, accept="application/json")
    assert response.status == 400
    assert (await response.json())["error"]["code"] == -32600


async def test_a_modern_notification_is_accepted_with_no_body(client: AsgiClient) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1,
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}  # fmt: skip
    response = await client.post(note, version=MODERN)
    assert response.status == 202 and await response.body() == b""


async def test_a_level_5_tool_over_http_takes_the_principal_from_each_request(tmp_path: Path) -> None:
    deck = era_deck()
    deck.apply_policy(token_policy(tmp_path))
    client = AsgiClient(HttpApp(deck))
    call = modern(1, "tools/call", {"name": "weather"})

    anonymous = await post(client, call)
    assert anonymous.status == 401 and (await anonymous.json())["id"] == 1
    without_scope = await post(client, call, authorization="Bearer nobody-secret")
    assert without_scope.status == 403
    assert "insufficient_scope" in without_scope.headers["www-authenticate"]
    assert (await without_scope.json())["error"]["code"] == -32000
    allowed = await post(client, call, authorization="Bearer reader-secret")
    assert allowed.status == 200
    assert (await allowed.json())["result"]["structuredContent"] == {"result": "sunny"}
    listed = await post(client, modern(2, "tools/list"), authorization="Bearer reader-secret")
    assert (await listed.json())["result"]["cacheScope"] == "private"
    bad = await post(client, call, authorization="Bearer wrong")
    assert bad.status == 401


async def test_a_modern_request_has_a_peer_of_its_own_that_outlives_the_exchange_only_as_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deck = era_deck()
    release = asyncio.Event()

    @deck.tool(task="optional")
    async def job() -> str:
        """A task tool: its call runs on after the request is answered with the task."""
        await release.wait()
        return "done"

    peers: list[RequestPeer] = []

    class Recorded(RequestPeer):
        __slots__ = ()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            peers.append(self)

    monkeypatch.setattr(modern_exchange, "RequestPeer", Recorded)
    app = HttpApp(deck)
    client = AsgiClient(app)
    status, body, _ = await answer(client, modern(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))
    assert (status, body["result"]["structuredContent"]) == (200, {"result": 3})
    status, body, _ = await answer(client, modern(1, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}}))
    assert (status, body["result"]["structuredContent"]) == (200, {"result": 4})
    first, second = peers  # one peer per request, none of them a session
    assert first is not second and first.key is None and first.address == "127.0.0.1"
    assert not app.registry.live and deck.bus.subscribers(f"session/{first.key}") == 0
    assert first.runner is None and second.runner is None  # a plain call ran in the exchange's task: no runner
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    status, body, _ = await answer(client, modern(2, "tools/call", {"name": "job"}, capabilities=tasks))
    assert (status, body["result"]["resultType"]) == (200, "task")
    task_peer = peers[-1]
    assert task_peer.runner is not None and not task_peer.runner.in_flight  # the exchange is over; its task is not
    task_id = body["result"]["taskId"]
    get = modern(3, "tasks/get", {"taskId": task_id}, capabilities=tasks)
    assert (await answer(client, get, mcp_name=task_id))[1]["result"]["status"] == "working"
    release.set()
    async with asyncio.timeout(5):
        while (found := (await answer(client, get, mcp_name=task_id))[1]["result"])["status"] == "working":
            await asyncio.sleep(0)
    assert found["status"] == "completed" and found["result"]["structuredContent"] == {"result": "done"}
