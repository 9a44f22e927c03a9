"""Promises made by ``Deck`` methods that no narrower test module owns: ``deck.http_app()`` serves MCP."""

from __future__ import annotations

from asgi_client import AsgiClient
from tooldeck import Context, Deck


def make_deck() -> Deck:
    deck = Deck("mounted", version="2.0.0")

    @deck.tool
    async def greet(name: str, ctx: Context) -> str:
        await ctx.report_progress(1, 1)
        return f"hello {name}"

    return deck


async def test_http_app_is_an_asgi_app_that_serves_mcp() -> None:
    app = make_deck().http_app()
    http = AsgiClient(app)
    init = await http.post(
        {"jsonrpc": "2.0", "id": "init", "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None,
    )  # fmt: skip
    assert init.status == 200 and init.headers["content-type"] == "application/json"
    reply = await init.json()
    assert reply["result"]["serverInfo"] == {"name": "mounted", "version": "2.0.0"}
    session = init.headers["mcp-session-id"]
    assert (await http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)).status == 202
    call = await http.call(session, 2, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}})
    assert call.status == 200
    assert (await call.json())["result"]["structuredContent"] == {"result": "hello Ada"}
    streamed = await http.call(
        session, 3, "tools/call", {"name": "greet", "arguments": {"name": "Bo"}, "_meta": {"progressToken": "p"}}
    )
    assert streamed.headers["content-type"] == "text/event-stream"
    messages = await streamed.messages_until(3)
    assert [m.get("method") for m in messages] == ["notifications/progress", None]
    assert messages[-1]["result"]["structuredContent"] == {"result": "hello Bo"}
    await app.aclose()


async def test_http_app_passes_its_options_on() -> None:
    app = make_deck().http_app(path="/tools", stateless=True)
    http = AsgiClient(app)
    assert (await http.request("GET", path="/mcp")).status == 404
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Cy"}},
    }
    call = await http.post(message, path="/tools")
    assert "mcp-session-id" not in call.headers  # stateless: answered without initialize or a session
    assert (await call.json())["result"]["structuredContent"] == {"result": "hello Cy"}
    response = await http.request("GET", path="/tools", headers={"accept": "text/event-stream"})
    assert response.status == 405  # stateless: no GET stream
    await app.aclose()
