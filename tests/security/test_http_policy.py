"""A policy over Streamable HTTP: API keys and JWTs from the policy file, 401 and the step-up 403 exactly as the spec
shows them, RFC 9728 metadata, a session bound to its token's subject, and rate limits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt

from asgi_client import AsgiClient
from tooldeck import Deck
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http.app import HttpApp

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def token(key: Any, sub: str, scope: str = "", **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now + 600, "iat": now, "scope": scope, **claims}
    return jwt.encode(payload, key, algorithm="ES256", headers={"kid": "k1"})


def policy_file(tmp_path: Path, jwks: Path, limits: str = "") -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        f"""
[[authentication.tokens]]
subject = "ci-bot"
sha256 = "{hash_token("ci-secret")}"
scopes = ["weather:read"]

[authentication.jwt]
issuer = "{ISSUER}"
audience = "{RESOURCE}"
jwks = "{jwks}"

[roles]
ops = ["deploy:write"]
{limits}
"""
    )
    return path


def secured_deck(policy: Path) -> Deck:
    deck = Deck("secured")

    @deck.tool
    def ping() -> str:
        return "pong"

    @deck.tool(security_level=5, scopes=["weather:read"])
    def weather() -> str:
        return "sunny"

    deck.apply_policy(policy)
    return deck


async def open_session(client: AsgiClient, bearer: str | None) -> tuple[Any, str | None]:
    headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
    reply = await client.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, version=None,
                              headers=headers)  # fmt: skip
    session = reply.headers.get("mcp-session-id")
    await reply.body()
    if session is not None:
        done = await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session,
                                 headers=headers)  # fmt: skip
        assert done.status == 202
    return reply, session


async def call(client: AsgiClient, session: str, name: str, bearer: str | None) -> Any:
    headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    return await client.post(message, session=session, headers=headers, accept="application/json")


async def test_levels_over_http_with_keys_and_jwts(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    key, jwks = signer
    client = AsgiClient(HttpApp(secured_deck(policy_file(tmp_path, jwks))))

    _, anonymous = await open_session(client, None)  # authentication is not required: anonymous may connect
    assert anonymous is not None
    refused = await call(client, anonymous, "weather", None)
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{PRM}"'
    assert (await refused.json())["error"]["message"] == (
        "tool 'weather' needs an authenticated caller (security level 5); send credentials"
    )
    assert (await (await call(client, anonymous, "ping", None)).json())["result"]["structuredContent"] == {
        "result": "pong"
    }

    bob = token(key, "bob")
    _, session = await open_session(client, bob)
    assert session is not None
    refused = await call(client, session, "weather", bob)
    assert refused.status == 403
    assert refused.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="weather:read", resource_metadata="{PRM}"'
    )
    stepped_up = token(key, "bob", "weather:read")  # the same subject with more scope: the same session
    allowed = await call(client, session, "weather", stepped_up)
    assert allowed.status == 200 and (await allowed.json())["result"]["structuredContent"] == {"result": "sunny"}

    _, ci = await open_session(client, "ci-secret")  # an API key from the policy file
    assert ci is not None
    assert (await (await call(client, ci, "weather", "ci-secret")).json())["result"]["isError"] is False
    stolen = await call(client, ci, "weather", stepped_up)  # bob's token on ci-bot's session
    assert stolen.status == 403
    assert (await stolen.json())["error"]["message"] == "Forbidden: this session belongs to another principal"


async def test_bad_tokens_get_invalid_token(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    key, jwks = signer
    client = AsgiClient(HttpApp(secured_deck(policy_file(tmp_path, jwks))))
    expired = token(key, "bob", exp=int(time.time()) - 3600)
    for bad in (expired, "not-a-key", token(key, "bob", aud="https://elsewhere.example.com/mcp")):
        reply, session = await open_session(client, bad)
        assert (reply.status, session) == (401, None)
        assert reply.headers["www-authenticate"].startswith('Bearer error="invalid_token", error_description=')
        assert reply.headers["www-authenticate"].endswith(f'resource_metadata="{PRM}"')


async def test_a_fresher_token_with_fewer_scopes_takes_them_away_on_the_same_session(
    tmp_path: Path, signer: tuple[Any, Path]
) -> None:
    key, jwks = signer
    client = AsgiClient(HttpApp(secured_deck(policy_file(tmp_path, jwks))))
    scoped = token(key, "bob", "weather:read")
    _, session = await open_session(client, scoped)
    assert session is not None
    assert (await (await call(client, session, "weather", scoped)).json())["result"]["isError"] is False
    narrowed = await call(client, session, "weather", token(key, "bob"))  # bob again, now without the scope
    assert narrowed.status == 403
    assert (await narrowed.json())["error"]["message"].startswith("tool 'weather' needs the scope weather:read")


async def test_the_policy_can_require_credentials_and_narrow_the_algorithms(
    tmp_path: Path, signer: tuple[Any, Path]
) -> None:
    key, jwks = signer  # an ES256 key
    path = tmp_path / "strict.toml"
    path.write_text(
        f"""
[authentication]
required = true

[[authentication.tokens]]
subject = "ci-bot"
sha256 = "{hash_token("ci-secret")}"

[authentication.jwt]
issuer = "{ISSUER}"
audience = "{RESOURCE}"
jwks = "{jwks}"
algorithms = ["RS256"]
"""
    )
    client = AsgiClient(HttpApp(secured_deck(path)))
    reply, session = await open_session(client, None)
    assert (reply.status, session) == (401, None)
    assert reply.headers["www-authenticate"] == f'Bearer resource_metadata="{PRM}"'
    reply, session = await open_session(client, token(key, "bob"))
    assert (reply.status, session) == (401, None)
    assert "the token's algorithm is not accepted (accepted: RS256)" in reply.headers["www-authenticate"]
    _, session = await open_session(client, "ci-secret")
    assert session is not None


async def test_the_protected_resource_metadata_is_served(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    _, jwks = signer
    client = AsgiClient(HttpApp(secured_deck(policy_file(tmp_path, jwks))))
    reply = await client.request("GET", path="/.well-known/oauth-protected-resource/mcp", jsonrpc=False)
    document = await reply.json()
    assert (reply.status, document["resource"], document["authorization_servers"]) == (200, RESOURCE, [ISSUER])
    assert document["scopes_supported"] == ["deploy:write", "weather:read"]  # [roles]' scopes and the tools'


async def test_the_metadata_lists_the_scopes_of_what_is_served_now(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    _, jwks = signer
    deck = secured_deck(policy_file(tmp_path, jwks))
    client = AsgiClient(HttpApp(deck))

    async def scopes() -> Any:
        reply = await client.request("GET", path="/.well-known/oauth-protected-resource/mcp", jsonrpc=False)
        return (await reply.json()).get("scopes_supported")

    deck.add_tool(lambda: "ok", name="audit", description="Reads the trail.", security_level=5,
                  scopes=["audit:read", "weather:read"])  # fmt: skip
    deck.add_resource("plans://q3", "secret", security_level=5, scopes=["plans:read"])
    assert await scopes() == ["audit:read", "deploy:write", "plans:read", "weather:read"]
    deck.remove_tool("audit")
    deck.remove_tool("weather")
    assert await scopes() == ["deploy:write", "plans:read"]


async def test_rate_limits_over_http(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    _, jwks = signer
    deck = secured_deck(policy_file(tmp_path, jwks, '[limits]\nper_principal = "2/minute"\n'))
    client = AsgiClient(HttpApp(deck))
    _, session = await open_session(client, "ci-secret")
    assert session is not None
    results = [await (await call(client, session, "ping", "ci-secret")).json() for _ in range(3)]
    assert [r["result"]["isError"] for r in results] == [False, False, True]
    third = results[2]["result"]
    assert third["content"][0]["text"].startswith("Rate limit exceeded (per principal: 2/minute); retry in ")
    assert 29 < third["_meta"]["tooldeck/retryAfter"] <= 30.1


async def test_a_flood_of_requests_gets_429_with_retry_after(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    _, jwks = signer
    deck = secured_deck(policy_file(tmp_path, jwks, '[limits]\nhttp_requests = "3/minute"\n'))
    client = AsgiClient(HttpApp(deck))
    _, session = await open_session(client, "ci-secret")  # two requests: initialize, initialized
    assert session is not None
    assert (await call(client, session, "ping", "ci-secret")).status == 200
    flooded = await call(client, session, "ping", "ci-secret")
    assert (flooded.status, flooded.headers["retry-after"]) == (429, "20")
    assert (await flooded.json())["error"] == {"code": -32000, "message": "Too Many Requests: retry in 20 s"}
    _, other = await open_session(client, None)  # another caller (anonymous, by address) has a bucket of its own
    assert other is not None


async def test_requests_refused_before_the_protocol_are_audited(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    from tooldeck.security.audit_verify import verify

    _, jwks = signer
    trail = tmp_path / "audit.jsonl"
    deck = secured_deck(policy_file(tmp_path, jwks, f'[audit]\nfile = "{trail}"\n'))
    client = AsgiClient(HttpApp(deck))
    reply, session = await open_session(client, "not-a-key")
    assert (reply.status, session) == (401, None)
    _, session = await open_session(client, "ci-secret")
    assert session is not None
    assert (await call(client, session, "weather", "ci-secret")).status == 200
    deck._security.sink.close()
    records = [json.loads(line) for line in trail.read_text().splitlines()]
    assert [(r["event"], r["decision"]) for r in records] == [("http-refused", "refused"), ("call", "allowed")]
    refused = records[0]
    assert (refused["status"], refused["method"], refused["path"], refused["client"]) == (401, "POST", "/mcp",
                                                                                       "127.0.0.1")  # fmt: skip
    assert refused["reason"].startswith("Unauthorized: ")
    assert verify([str(trail)]).ok


CHANGING_DECK = '''
from tooldeck import Deck

deck = Deck("changing", version="1.0.0")
deck.add_resource("config://app", "{}")  # so that sessions negotiate resources (the marker below)


@deck.tool
async def unlock() -> str:
    """Adds a tool only ops:write can use."""
    deck.add_tool(lambda: "secret", name="secret", description="Needs ops:write.", security_level=5,
                  scopes=["ops:write"])
    return "unlocked"


@deck.tool
async def publish() -> str:
    """Adds a resource: a change everyone sees, after the tool's."""
    deck.add_resource("config://more", "{}")
    return "published"
'''


def test_over_real_http_list_changed_reaches_only_the_sessions_that_can_see_the_change(tmp_path: Path) -> None:
    from eras import MODERN, modern
    from http_client import HttpClient, initialize_message, serve_http

    (tmp_path / "changing.py").write_text(CHANGING_DECK)
    (tmp_path / "policy.toml").write_text(
        f'[authentication]\nrequired = true\n\n[[authentication.tokens]]\nsubject = "plain"\n'
        f'sha256 = "{hash_token("plain")}"\n\n[[authentication.tokens]]\nsubject = "ops"\n'
        f'sha256 = "{hash_token("ops")}"\nscopes = ["ops:write"]\n'
    )
    tools = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    resources = {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}
    with serve_http(str(tmp_path / "changing.py"), "--policy", str(tmp_path / "policy.toml"), "--task-store",
                    "memory") as url, HttpClient(url) as http, HttpClient(url) as modern_http:  # fmt: skip
        sessions = {}
        for who in ("plain", "ops"):
            bearer = {"authorization": f"Bearer {who}"}
            session = http.post(initialize_message(), version=None, headers=bearer).headers["mcp-session-id"]
            http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session, headers=bearer)
            sessions[who] = (session, bearer)
        listen = modern("L", "subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                                        "resourcesListChanged": True}})  # fmt: skip
        listen_headers = {"authorization": "Bearer plain", "mcp-method": "subscriptions/listen"}
        with http.stream(method="GET", session=sessions["plain"][0], headers=sessions["plain"][1]) as plain, \
                http.stream(method="GET", session=sessions["ops"][0], headers=sessions["ops"][1]) as ops, \
                modern_http.stream(listen, version=MODERN, headers=listen_headers) as modern_plain:  # fmt: skip
            modern_messages = modern_plain.messages()
            assert next(modern_messages)["method"] == "notifications/subscriptions/acknowledged"
            for name in ("unlock", "publish"):  # two calls: two announcements, in this order
                call = {"jsonrpc": "2.0", "id": name, "method": "tools/call", "params": {"name": name}}
                reply = http.post(call, session=sessions["ops"][0], headers=sessions["ops"][1])
                assert reply.status_code == 200
            assert next(plain.messages()) == resources  # the tool's change never reached it: the marker comes first
            ops_messages = ops.messages()
            assert [next(ops_messages), next(ops_messages)] == [tools, resources]
            assert next(modern_messages)["method"] == "notifications/resources/list_changed"
