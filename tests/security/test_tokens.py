"""StaticTokens: configured API keys, known only by their SHA-256, compared in constant time with every entry."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from helpers import authenticate
from tooldeck.protocol.errors import HttpError
from tooldeck.security import tokens
from tooldeck.security.principal import Principal
from tooldeck.security.tokens import StaticToken, StaticTokens, hash_token, new_token, parse_hash

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
SECRET_HEX = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"  # sha256("secret")


def entries() -> list[dict[str, Any]]:
    return [
        {"subject": "ci", "hash": hash_token("ci-token"), "scopes": ["tools:read"]},
        {"name": "alice", "hash": SECRET_HEX, "scopes": ["tools:read", "tools:call"], "roles": ["admin"]},
        {"subject": "bob", "token_hash": "SHA256:" + hashlib.sha256(b"bob-token").hexdigest().upper()},
    ]


def test_hash_token_is_prefixed_sha256_hex() -> None:
    assert hash_token("secret") == f"sha256:{SECRET_HEX}"


@pytest.mark.parametrize("written", [SECRET_HEX, f"sha256:{SECRET_HEX}", f" SHA256:{SECRET_HEX.upper()} "])
def test_a_hash_is_written_with_or_without_its_prefix(written: str) -> None:
    assert parse_hash(written) == hashlib.sha256(b"secret").digest()


@pytest.mark.parametrize("written", ["", "sha256:", SECRET_HEX[:-1], "md5:" + SECRET_HEX, SECRET_HEX + "0", "secret"])
def test_a_malformed_hash_is_refused(written: str) -> None:
    with pytest.raises(ValueError, match="expected 'sha256:' and 64 hex digits"):
        parse_hash(written)


def test_new_token_is_random_and_comes_with_its_hash() -> None:
    token, digest = new_token()
    assert len(token) == 43 and digest == hash_token(token)
    assert new_token()[0] != token


@pytest.mark.parametrize(
    ("presented", "expected"),
    [
        ("secret", Principal("alice", scopes={"tools:read", "tools:call"}, roles={"admin"}, method="token")),
        ("ci-token", Principal("ci", scopes={"tools:read"}, method="token")),
        ("bob-token", Principal("bob", method="token")),
    ],
)
async def test_a_known_token_gives_its_principal(presented: str, expected: Principal) -> None:
    principal = await StaticTokens(entries()).verify(presented)
    assert principal == expected
    assert (principal.auth_time, principal.expires_at, principal.claims) == (None, None, {})


async def test_an_unknown_token_is_refused_with_401_invalid_token() -> None:
    with pytest.raises(HttpError) as caught:
        await StaticTokens(entries(), resource_metadata=PRM).verify("secreT")
    assert (caught.value.status, caught.value.message) == (401, "Unauthorized: the token is not known")
    assert caught.value.headers == [
        (
            b"www-authenticate",
            f'Bearer error="invalid_token", error_description="the token is not known", resource_metadata="{PRM}"'.encode(),
        )
    ]


@pytest.mark.parametrize("presented", ["secret", "ci-token", "bob-token", "wrong"])
def test_every_entry_is_compared_in_constant_time(presented: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", counting)
    backend = StaticTokens(entries())
    backend.lookup(presented)
    digest = hashlib.sha256(presented.encode()).digest()
    assert compared == [(digest, entry.digest) for entry in backend.entries]  # all of them, hit or miss


async def test_authenticate_through_the_header() -> None:
    backend = StaticTokens(entries(), required=True, resource_metadata=PRM)
    scope = {"type": "http", "path": "/mcp", "headers": [(b"authorization", b"Bearer ci-token")]}
    assert await authenticate(backend, scope) == Principal("ci", scopes={"tools:read"}, method="token")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"hash": SECRET_HEX}, r"static token entry \['hash'\]: 'subject' \(or 'name'\) must be a string"),
        ({"subject": "x"}, "static token 'x': 'hash' must be a string"),
        ({"subject": "x", "hash": "sha256:00"}, "expected 'sha256:' and 64 hex digits"),
        ({"subject": "x", "hash": SECRET_HEX, "scopes": "tools:read"}, "'scopes' must be a list of strings"),
        ({"subject": "x", "hash": SECRET_HEX, "roles": [1]}, "'roles' must be a list of strings"),
        ({"subject": "", "hash": SECRET_HEX}, "the subject \\(name\\) is empty"),
    ],
)
def test_a_bad_entry_is_refused(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StaticTokens([entry])


def test_two_entries_with_one_hash_are_refused() -> None:
    with pytest.raises(ValueError, match="static tokens 'a' and 'b' have the same hash"):
        StaticTokens([StaticToken("a", SECRET_HEX), {"subject": "b", "hash": hash_token("secret")}])
