"""RFC 9728 protected resource metadata: the document, its URL and paths, the ASGI app serving it, the
WWW-Authenticate challenges, and the whole thing through HttpApp with a required JWT backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jwt
import orjson
import pytest

from asgi_client import INIT, AsgiClient
from helpers import adder_deck
from tooldeck.security.jwt import JwtBackend
from tooldeck.security.metadata import (
    ProtectedResourceMetadata,
    metadata_paths,
    metadata_routes,
    metadata_url,
    protected_resource_metadata,
    www_authenticate,
)
from tooldeck.transports.http import HttpApp

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def test_the_document_has_the_rfc_9728_fields() -> None:
    document = protected_resource_metadata(
        RESOURCE, [ISSUER], scopes_supported=["tools:read", "tools:call"], resource_name="Deck",
        resource_documentation="https://docs.example.com", resource_policy_uri="https://example.com/policy",
    )  # fmt: skip
    assert document == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["tools:read", "tools:call"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Deck",
        "resource_documentation": "https://docs.example.com",
        "resource_policy_uri": "https://example.com/policy",
    }
    assert protected_resource_metadata(RESOURCE, [ISSUER]) == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
    }


@pytest.mark.parametrize(
    ("resource", "servers", "scopes", "message"),
    [
        (RESOURCE, [], None, "at least one authorization server"),
        (RESOURCE, ["auth.example.com"], None, "is not an http\\(s\\) URL"),
        ("mcp.example.com/mcp", [ISSUER], None, "is not an absolute http\\(s\\) URI"),
        (RESOURCE + "#top", [ISSUER], None, "has a fragment"),
        (RESOURCE, [ISSUER], ["two words"], "is not a scope-token"),
    ],
)
def test_a_bad_document_is_refused(resource: str, servers: list[str], scopes: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        protected_resource_metadata(resource, servers, scopes_supported=scopes)


@pytest.mark.parametrize(
    ("resource", "url", "paths"),
    [
        (RESOURCE, PRM, ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]),
        ("https://h.example/", "https://h.example/.well-known/oauth-protected-resource",
         ["/.well-known/oauth-protected-resource"]),
        ("https://h.example:8443/public/mcp", "https://h.example:8443/.well-known/oauth-protected-resource/public/mcp",
         ["/.well-known/oauth-protected-resource/public/mcp", "/.well-known/oauth-protected-resource"]),
    ],
)  # fmt: skip
def test_the_metadata_url_inserts_the_well_known_path_after_the_host(resource: str, url: str, paths: list[str]) -> None:
    assert metadata_url(resource) == url
    assert metadata_paths(resource) == paths


@pytest.mark.parametrize(
    ("arguments", "header"),
    [
        ((PRM,), f'Bearer resource_metadata="{PRM}"'),
        ((None,), "Bearer"),
        (
            (PRM, "invalid_token", "the token has expired"),
            f'Bearer error="invalid_token", error_description="the token has expired", resource_metadata="{PRM}"',
        ),
        (
            (PRM, "insufficient_scope", None, ["tools:call", "files:read"]),
            f'Bearer error="insufficient_scope", scope="tools:call files:read", resource_metadata="{PRM}"',
        ),
        (
            (PRM, "insufficient_scope", "needs more", "tools:call"),
            f'Bearer error="insufficient_scope", error_description="needs more", scope="tools:call", '
            f'resource_metadata="{PRM}"',
        ),
        ((None, "invalid_token", 'a "quoted" \\ caf\u00e9\n'), 'Bearer error="invalid_token", error_description="a \'quoted\'  caf"'),
    ],
)  # fmt: skip
def test_www_authenticate_values(arguments: tuple[Any, ...], header: str) -> None:
    assert www_authenticate(*arguments) == header


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((PRM, "bad_error"), "unknown error code"),
        ((PRM, "insufficient_scope", None, ['a"b']), "is not a scope-token"),
        (('https://x/"',), "contains a quote"),
    ],
)
def test_www_authenticate_refuses_what_would_break_the_header(arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        www_authenticate(*arguments)


async def test_the_app_serves_the_document_on_get_and_head_only() -> None:
    document = protected_resource_metadata(RESOURCE, [ISSUER], scopes_supported=["tools:read"])
    client = AsgiClient(ProtectedResourceMetadata(document))
    got = await client.request("GET", path="/.well-known/oauth-protected-resource", jsonrpc=False)
    body = await got.body()
    assert (got.status, got.headers["content-type"], orjson.loads(body)) == (200, "application/json", document)
    assert got.headers["content-length"] == str(len(body))
    head = await client.request("HEAD", path="/.well-known/oauth-protected-resource", jsonrpc=False)
    assert (head.status, await head.body(), head.headers["content-length"]) == (200, b"", str(len(body)))
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        refused = await client.request(method, path="/.well-known/oauth-protected-resource", jsonrpc=False)
        assert (refused.status, refused.headers["allow"]) == (405, "GET, HEAD")
        assert orjson.loads(await refused.body()) == {"error": "method_not_allowed", "error_description": "use GET"}


async def test_scopes_supported_as_they_are_at_each_request() -> None:
    document = protected_resource_metadata(RESOURCE, [ISSUER], resource_name="Deck")
    now = ["tools:read"]
    client = AsgiClient(ProtectedResourceMetadata(document, scopes=lambda: now))

    async def served() -> Any:
        got = await client.request("GET", path="/.well-known/oauth-protected-resource", jsonrpc=False)
        return orjson.loads(await got.body())

    first = await served()
    assert list(first) == ["resource", "authorization_servers", "scopes_supported", "bearer_methods_supported",
                           "resource_name"]  # fmt: skip
    assert first["scopes_supported"] == ["tools:read"]
    now = ["tools:write", "tools:read", "tools:write"]
    assert (await served())["scopes_supported"] == ["tools:read", "tools:write"]  # sorted, once each
    now = []
    assert "scopes_supported" not in await served()  # none: the member is left out, not an empty list


async def test_a_protected_http_app(signer: tuple[Any, Path]) -> None:
    """A required JWT backend in front of the MCP endpoint, the metadata beside it: a client with no token reads the
    challenge, follows it to the metadata, and comes back with a token for this resource."""
    key, jwks_path = signer
    document = protected_resource_metadata(RESOURCE, [ISSUER], scopes_supported=["tools:read"])
    backend = JwtBackend(ISSUER, RESOURCE, jwks_path, required=True, resource_metadata=metadata_url(RESOURCE))
    app = HttpApp(adder_deck("protected"), auth=backend, routes=metadata_routes(document))
    client = AsgiClient(app)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}

    anonymous = await client.post(initialize, version=None)
    assert (anonymous.status, anonymous.headers["www-authenticate"]) == (401, f'Bearer resource_metadata="{PRM}"')
    assert (await anonymous.json())["error"]["message"] == "Unauthorized: this server requires a bearer token"

    for path in metadata_paths(RESOURCE):  # readable without a token
        served = await client.request("GET", path=path, jsonrpc=False)
        assert (served.status, orjson.loads(await served.body())) == (200, document)

    claims = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": 4_000_000_000, "scope": "tools:read"}
    elsewhere = jwt.encode({**claims, "aud": "https://other.example/mcp"}, key, "ES256", headers={"kid": "k1"})
    refused = await client.post(initialize, version=None, headers={"authorization": f"Bearer {elsewhere}"})
    description = f"the token's audience (aud) is not {RESOURCE}"
    assert (refused.status, refused.headers["www-authenticate"]) == (
        401,
        f'Bearer error="invalid_token", error_description="{description}", resource_metadata="{PRM}"',
    )
    await refused.json()

    good = {"authorization": f"Bearer {jwt.encode(claims, key, 'ES256', headers={'kid': 'k1'})}"}
    accepted = await client.post(initialize, version=None, headers=good)
    assert accepted.status == 200
    await accepted.json()
    session = accepted.headers["mcp-session-id"]
    assert app.sessions[session].session.principal.subject == "alice"
    await app.aclose()
