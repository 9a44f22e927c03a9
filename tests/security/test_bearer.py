"""The bearer layer both backends share: the Authorization header, anonymous requests, required credentials, public
paths, and the exact refusals (RFC 6750 §3)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import authenticate
from tooldeck.protocol.errors import HttpError
from tooldeck.security.tokens import StaticTokens, hash_token

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


def backend(**options: Any) -> StaticTokens:
    return StaticTokens([{"subject": "ci", "hash": hash_token("ci-token")}], resource_metadata=PRM, **options)


def request(*headers: tuple[bytes, bytes], path: str = "/mcp", query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "path": path, "query_string": query, "headers": list(headers)}


async def refusal(backend: StaticTokens, scope: dict[str, Any]) -> tuple[int, str, str]:
    with pytest.raises(HttpError) as caught:
        await authenticate(backend, scope)
    return caught.value.status, caught.value.message, dict(caught.value.headers or [])[b"www-authenticate"].decode()


async def test_no_credentials_is_anonymous_unless_required() -> None:
    assert await authenticate(backend(), request()) is None
    assert await authenticate(backend(), request(query=b"my_access_token=1")) is None  # another parameter
    assert await refusal(backend(required=True), request()) == (
        401,
        "Unauthorized: this server requires a bearer token",
        f'Bearer resource_metadata="{PRM}"',
    )


async def test_without_a_metadata_url_the_challenge_is_bare() -> None:
    bare = StaticTokens([], required=True)
    assert (await refusal(bare, request()))[2] == "Bearer"
    assert (await refusal(bare, request((b"authorization", b"Bearer x"))))[2] == (
        'Bearer error="invalid_token", error_description="the token is not known"'
    )


@pytest.mark.parametrize("required", [False, True])
async def test_the_metadata_paths_are_never_authenticated(required: bool) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        scope = request((b"authorization", b"Bearer bad"), path=path)
        assert await authenticate(backend(required=required), scope) is None
    await refusal(backend(required=True), request(path="/.well-known/oauth-protected-resource-not"))


@pytest.mark.parametrize("value", [b"Bearer ci-token", b"bearer ci-token", b"BEARER   ci-token  "])
async def test_the_scheme_is_case_insensitive(value: bytes) -> None:
    principal = await authenticate(backend(), request((b"authorization", value)))
    assert principal is not None and principal.subject == "ci"


async def test_another_scheme_gets_the_challenge_without_an_error_code() -> None:
    assert await refusal(backend(), request((b"authorization", b"Basic Y2k6Y2k="))) == (
        401,
        "Unauthorized: use the Bearer scheme in the Authorization header",
        f'Bearer resource_metadata="{PRM}"',
    )


@pytest.mark.parametrize("value", [b"Bearer", b"Bearer ", b"Bearer a b", b'Bearer "quoted"', b"Bearer \xff"])
async def test_a_malformed_header_is_an_invalid_token(value: bytes) -> None:
    description = "the Authorization header is not 'Bearer <token>'"
    assert await refusal(backend(), request((b"authorization", value))) == (
        401,
        f"Unauthorized: {description}",
        f'Bearer error="invalid_token", error_description="{description}", resource_metadata="{PRM}"',
    )


async def test_an_overlong_token_is_refused_before_it_is_checked() -> None:
    status, message, _ = await refusal(backend(), request((b"authorization", b"Bearer " + b"a" * 16385)))
    assert (status, message) == (401, "Unauthorized: the token is longer than 16384 characters")


@pytest.mark.parametrize(
    ("scope", "description"),
    [
        (
            request((b"authorization", b"Bearer ci-token"), (b"authorization", b"Bearer ci-token")),
            "the request has more than one Authorization header",
        ),
        (
            request(query=b"x=1&access_token=ci-token"),
            "the access token must be sent in the Authorization header, not the URL",
        ),
    ],
)
async def test_ambiguous_or_url_credentials_are_a_bad_request(scope: dict[str, Any], description: str) -> None:
    assert await refusal(backend(), scope) == (
        400,
        f"Bad Request: {description}",
        f'Bearer error="invalid_request", error_description="{description}", resource_metadata="{PRM}"',
    )


async def test_the_guards_header_dict_is_used_when_present() -> None:
    scope = request()
    scope["tooldeck.headers"] = {b"authorization": b"Bearer ci-token"}
    principal = await authenticate(backend(), scope)
    assert principal is not None and principal.subject == "ci"


def test_a_metadata_url_with_a_quote_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="contains a quote"):
        StaticTokens([], resource_metadata='https://x/"')
