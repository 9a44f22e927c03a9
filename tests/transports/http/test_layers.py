"""The HTTP app's layers one by one: the Host/Origin guard, authentication and principals, the route table, refusals
from the call pipeline as HTTP statuses, sessions shared through a SessionStore, and numbers out of range."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from asgi_client import INIT, AsgiClient
from helpers import adder_deck, sleep_until_cancelled
from tooldeck import Context, Deck
from tooldeck.protocol.errors import HttpError, RefusedError
from tooldeck.server.backends import Backends
from tooldeck.server.state import MemorySessionStore
from tooldeck.transports.http import HttpApp
from tooldeck.transports.http.guard import HostOriginGuard
from tooldeck.transports.http.responses import Receive, Scope, Send, respond


def make_deck(**options: Any) -> Deck:
    deck = adder_deck("layers", **options)

    @deck.tool
    def secret() -> str:
        return "leaked"

    return deck


class TokenBackend:
    """Bearer tokens name their principal: "Bearer alice" is alice; none is anonymous; "Bearer bad" is refused."""

    async def authenticate(self, scope: Scope) -> Any:
        for name, value in scope["headers"]:
            if name == b"authorization":
                token = value.decode().removeprefix("Bearer ")
                if token == "bad":
                    raise HttpError(401, -32000, "Unauthorized: the token is not valid",
                                    [(b"www-authenticate", b'Bearer error="invalid_token"')])  # fmt: skip
                return token
        return None


async def ok_app(scope: Scope, receive: Receive, send: Send) -> None:
    await respond(send, 200, b"ok", [])


async def test_the_guard_wraps_any_app() -> None:
    guard = HostOriginGuard(ok_app, allowed_hosts=["mcp.example.com"])
    allowed = await AsgiClient(guard, host="mcp.example.com").request("GET", path="/anything", jsonrpc=False)
    assert (allowed.status, await allowed.body()) == (200, b"ok")
    refused = await AsgiClient(guard, host="evil.example").request("GET", path="/anything")  # a JSON-RPC error body
    assert refused.status == 403
    assert b"DNS rebinding protection" in await refused.body()


async def test_the_route_table_serves_more_paths_and_404s_the_rest() -> None:
    app = HttpApp(make_deck(), routes={"/.well-known/oauth-protected-resource": ok_app})
    client = AsgiClient(app)
    served = await client.request("GET", path="/.well-known/oauth-protected-resource", jsonrpc=False)
    assert (served.status, await served.body()) == (200, b"ok")
    missing = await client.request("GET", path="/elsewhere")
    assert missing.status == 404
    assert orjson.loads(await missing.body())["error"]["message"] == "Not found: the MCP endpoint is /mcp"
    await app.aclose()


async def test_authentication_binds_a_session_to_its_principal() -> None:
    app = HttpApp(make_deck(), auth=TokenBackend())
    client = AsgiClient(app)
    alice = {"authorization": "Bearer alice"}
    init = await client.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, version=None,
                             headers=alice)  # fmt: skip
    session = init.headers["mcp-session-id"]
    await init.json()
    assert app.sessions[session].session.principal == "alice"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    assert (await (await client.post(call, session=session, headers=alice)).json())["result"]["isError"] is False
    for intruder in ({"authorization": "Bearer mallory"}, {}):
        refused = await client.post(call, session=session, headers=intruder)
        assert refused.status == 403
        assert "belongs to another principal" in (await refused.json())["error"]["message"]
    bad = await client.post(call, session=session, headers={"authorization": "Bearer bad"})
    assert bad.status == 401 and bad.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert (await bad.json())["error"]["message"] == "Unauthorized: the token is not valid"
    await app.aclose()


async def test_a_pipeline_refusal_is_answered_with_its_http_status() -> None:
    deck = make_deck()

    def policy(request: Any, call: Any) -> None:
        if call.name == "secret":
            raise RefusedError("Forbidden: insufficient scope for 'secret'", http_status=403)

    deck.policies.append(policy)
    app = HttpApp(deck)
    client = AsgiClient(app)
    session = await client.initialize()
    refused = await client.call(session, 5, "tools/call", {"name": "secret", "arguments": {}})
    assert refused.status == 403
    body = await refused.json()
    assert body["id"] == 5 and body["error"]["message"] == "Forbidden: insufficient scope for 'secret'"
    allowed = await client.call(session, 6, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    assert allowed.status == 200
    await allowed.json()
    await app.aclose()


@pytest.mark.parametrize("shared", [True, False])
async def test_a_session_store_lets_another_app_serve_the_session(shared: bool) -> None:
    store = MemorySessionStore()  # two processes' decks, with their backends' session store shared or not
    first = HttpApp(make_deck(backends=Backends(sessions=store)))
    second = HttpApp(make_deck(backends=Backends(sessions=store if shared else MemorySessionStore())))
    session = await AsgiClient(first).initialize("2025-06-18")
    other = AsgiClient(second)
    set_level = await other.call(session, 1, "logging/setLevel", {"level": "error"}, version="2025-06-18")
    if not shared:
        assert set_level.status == 404
        await set_level.json()
    else:
        assert (await set_level.json())["result"] == {}
        call = await other.call(session, 2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}},
                                version="2025-06-18")  # fmt: skip
        assert (await call.json())["result"]["structuredContent"] == {"result": 4}
        stored = await store.get(session)
        assert stored is not None and stored["logLevel"] == "error" and stored["revision"] == "2025-06-18"
        await second.close_session(second.sessions[session])
        assert await store.get(session) is None  # ended everywhere
    await first.aclose()
    await second.aclose()


async def test_an_id_past_64_bits_is_400_with_that_id() -> None:
    app = HttpApp(make_deck())
    client = AsgiClient(app)
    session = await client.initialize()
    response = await client.request(
        "POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json",
            "mcp-session-id": session,
            "mcp-protocol-version": "2025-11-25",
        },
        body=b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}',
    )
    assert response.status == 400
    body = await response.body()
    assert body.startswith(b'{"jsonrpc":"2.0","id":18446744073709551616,"error":{"code":-32600')
    await app.aclose()


async def test_a_cancellation_posted_to_another_app_reaches_the_request_through_the_bus() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    def deck_with_a_slow_tool(backends: Backends) -> Deck:
        deck = make_deck(backends=backends)

        @deck.tool
        async def slow(ctx: Context) -> str:
            return await sleep_until_cancelled(cancelled, started)

        return deck

    shared = Backends()  # two processes sharing a bus and a session store
    first_deck, second_deck = deck_with_a_slow_tool(shared), deck_with_a_slow_tool(shared)
    first = HttpApp(first_deck)
    second = HttpApp(second_deck)
    session = await AsgiClient(first).initialize()
    caller = AsgiClient(first)
    caller.checker.expect_no_messages()  # the cancelled call is answered by no message at all
    call = asyncio.ensure_future(
        caller.call(session, "long", "tools/call", {"name": "slow", "arguments": {}}, accept="application/json")
    )
    await asyncio.wait_for(started.wait(), 10)
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
    other = AsgiClient(second)
    other.checker.expect_no_messages()  # a notification is answered by 202 and no message
    assert (await other.post(note, session=session)).status == 202
    await asyncio.wait_for(cancelled.wait(), 10)
    response = await asyncio.wait_for(call, 10)
    assert response.status == 202  # cancelled: no JSON-RPC response, as the spec asks
    await first.aclose()
    await second.aclose()


async def test_a_refusal_of_a_tool_that_streams_is_still_its_http_status() -> None:
    deck = make_deck()

    @deck.tool
    async def watched(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        return "ran"

    deck.policies.append(lambda request, call: _refuse(call.name == "watched"))
    app = HttpApp(deck)
    client = AsgiClient(app)
    session = await client.initialize()
    # The refusal comes before the tool runs, so it is the exchange's first and only message: a JSON answer.
    refused = await client.call(
        session, 9, "tools/call", {"name": "watched", "arguments": {}, "_meta": {"progressToken": 1}}
    )
    assert refused.status == 403
    assert (await refused.json())["error"]["message"] == "Forbidden"
    await app.aclose()


def _refuse(refuse: bool) -> None:
    if refuse:
        raise RefusedError("Forbidden", http_status=403)
