"""JwtBackend: OAuth access tokens checked against the issuer's JWKS (a file, and a real HTTP server on loopback that
counts its fetches), with time under the test's control (an injected clock; no sleeps)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from helpers import authenticate
from tooldeck.protocol.errors import HttpError
from tooldeck.security.jwks import parse_jwks
from tooldeck.security.jwt import JwtBackend
from tooldeck.security.principal import Principal

ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
NOW = 1_700_000_000

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()


class Clock:
    def __init__(self) -> None:
        self.now = float(NOW)

    def __call__(self) -> float:
        return self.now


def jwk(key: Any, kid: str, alg: str | None = None) -> dict[str, Any]:
    """The public JWK of a private key."""
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        data = jwt.algorithms.RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        data = jwt.algorithms.ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        data = jwt.algorithms.OKPAlgorithm.to_jwk(public, as_dict=True)
    data["kid"] = kid
    if alg is not None:
        data["alg"] = alg
    return data


def jwks(*keys: dict[str, Any]) -> dict[str, Any]:
    return {"keys": list(keys)}


def claims(**changes: Any) -> dict[str, Any]:
    base = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": NOW + 600, "iat": NOW - 10,
            "scope": "tools:read tools:call", "roles": ["admin"], "auth_time": NOW - 60}  # fmt: skip
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def token(key: Any = RSA_KEY, kid: str | None = "rsa", alg: str = "RS256", **changes: Any) -> str:
    headers = {} if kid is None else {"kid": kid}
    return jwt.encode(claims(**changes), key, algorithm=alg, headers=headers)


@pytest.fixture
def jwks_file(tmp_path: Path) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(jwk(RSA_KEY, "rsa"), jwk(EC_KEY, "ec"), jwk(ED_KEY, "ed"))))
    return path


def backend(source: str | Path, clock: Clock | None = None, **options: Any) -> JwtBackend:
    return JwtBackend(ISSUER, RESOURCE, source, resource_metadata=PRM, clock=clock or Clock(), **options)


class JwksServer:
    """An issuer's JWKS endpoint on loopback, in a thread: serves ``document`` and counts the requests."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)  # quick shutdown


@pytest.fixture
def issuer() -> Iterator[JwksServer]:
    served = JwksServer(jwks(jwk(RSA_KEY, "rsa")))
    served.thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()
    served.thread.join(5)


def challenge(description: str) -> str:
    return f'Bearer error="invalid_token", error_description="{description}", resource_metadata="{PRM}"'


async def refused(backend: JwtBackend, presented: str) -> tuple[int, str, str]:
    with pytest.raises(HttpError) as caught:
        await backend.verify(presented)
    error = caught.value
    headers = dict(error.headers or [])
    return error.status, error.message, headers[b"www-authenticate"].decode()


# Accepted tokens


@pytest.mark.parametrize(
    ("key", "kid", "alg"),
    [(RSA_KEY, "rsa", "RS256"), (RSA_KEY, "rsa", "PS256"), (EC_KEY, "ec", "ES256"), (ED_KEY, "ed", "EdDSA")],
)
async def test_a_valid_token_gives_its_principal(jwks_file: Path, key: Any, kid: str, alg: str) -> None:
    principal = await backend(jwks_file).verify(token(key, kid, alg))
    assert principal == Principal(
        "alice",
        scopes={"tools:read", "tools:call"},
        roles={"admin"},
        method="jwt",
        issuer=ISSUER,
        auth_time=float(NOW - 60),
        expires_at=float(NOW + 600),
        claims=claims(),
    )
    assert principal.id == f"jwt:{ISSUER}#alice"  # the full identity: never the bare subject


async def test_authenticate_reads_the_authorization_header(jwks_file: Path) -> None:
    scope = {"type": "http", "path": "/mcp", "headers": [(b"authorization", f"Bearer {token()}".encode())]}
    principal = await authenticate(backend(jwks_file), scope)
    assert principal is not None and principal.subject == "alice" and principal.method == "jwt"
    assert await authenticate(backend(jwks_file), {"type": "http", "path": "/mcp", "headers": []}) is None


async def test_scp_lists_nested_roles_and_a_list_of_audiences(jwks_file: Path) -> None:
    presented = token(scope=None, scp=["a", "b"], roles=None, auth_time=None, aud=["https://other.example", RESOURCE],
                      realm_access={"roles": ["reader"]})  # fmt: skip
    principal = await backend(jwks_file, roles_claim="realm_access.roles").verify(presented)
    assert (principal.scopes, principal.roles, principal.auth_time) == ({"a", "b"}, {"reader"}, None)
    second = JwtBackend(ISSUER, ["https://old.example/mcp", RESOURCE], jwks_file, clock=Clock())
    assert (await second.verify(token())).subject == "alice"


async def test_a_token_without_scope_or_roles_has_none(jwks_file: Path) -> None:
    principal = await backend(jwks_file).verify(token(scope=None, roles=None))
    assert (principal.scopes, principal.roles) == (frozenset(), frozenset())


@pytest.mark.parametrize(
    "changes",
    [{"exp": NOW - 29}, {"nbf": NOW + 29}, {"iat": NOW + 29}, {"auth_time": NOW + 29}],
    ids=["expired-within-leeway", "nbf-within-leeway", "iat-within-leeway", "auth-time-within-leeway"],
)
async def test_times_within_the_leeway_are_accepted(jwks_file: Path, changes: dict[str, Any]) -> None:
    assert (await backend(jwks_file).verify(token(**changes))).subject == "alice"


# Refused tokens


@pytest.mark.parametrize(
    ("presented", "description"),
    [
        (token(iss="https://evil.example"), f"the token's issuer (iss) is not {ISSUER}"),
        (token(aud="https://other.example/mcp"), f"the token's audience (aud) is not {RESOURCE}"),
        (token(aud=RESOURCE + "/"), f"the token's audience (aud) is not {RESOURCE}"),  # exact match only
        (token(exp=NOW - 30), "the token has expired"),
        (token(nbf=NOW + 31), "the token is not valid yet (nbf)"),
        (token(iat=NOW + 31), "the token was issued in the future (iat)"),
        # a future auth_time would count as a recent authentication (levels 8-10) for as long as the token lives
        (token(auth_time=NOW + 31), "the token's authentication time is in the future (auth_time)"),
        (token(auth_time="yesterday"), "the token's 'auth_time' claim is not a number"),
        (token(exp=None), "the token has no 'exp' claim"),
        (token(aud=None), "the token has no 'aud' claim"),
        (token(iss=None), "the token has no 'iss' claim"),
        (token(sub=None), "the token has no 'sub' claim"),
        (token(sub=""), "the token's 'sub' claim is empty"),
        (token(exp="tomorrow"), "the token's 'exp' claim is not a number"),
        (token(scope=7), "the token's scope claim is neither a space-separated string nor a list of strings"),
        (token(OTHER_RSA_KEY), "the token's signature is not valid"),
        (token()[:-4] + "AAAA", "the token's signature is not valid"),
        (token(kid=None), "the token has no key id (kid)"),
        (token(EC_KEY, "rsa", "ES256"), "the token's algorithm does not fit its signing key"),
        (token(RSA_KEY, "ec", "RS256"), "the token's algorithm does not fit its signing key"),
        ("not-a-jwt", "the token is not a JWT"),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) and " " in v else None,
)
async def test_bad_tokens_are_refused_with_401_invalid_token(jwks_file: Path, presented: str, description: str) -> None:
    assert await refused(backend(jwks_file), presented) == (401, f"Unauthorized: {description}", challenge(description))


def unsigned(header: dict[str, Any], payload: dict[str, Any], secret: bytes | None) -> str:
    """A token assembled by hand: ``alg: none`` (no signature) or HMAC with ``secret``."""

    def part(data: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    signing_input = f"{part(header)}.{part(payload)}"
    if secret is None:
        return signing_input + "."
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


PUBLIC_PEM = RSA_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)


@pytest.mark.parametrize(
    "presented",
    [
        unsigned({"alg": "none", "typ": "JWT", "kid": "rsa"}, claims(), None),
        unsigned({"alg": "HS256", "typ": "JWT", "kid": "rsa"}, claims(), PUBLIC_PEM),  # the key-confusion attack
    ],
    ids=["alg-none", "hs256-with-the-rsa-public-key"],
)
async def test_none_and_hmac_tokens_are_refused(jwks_file: Path, presented: str) -> None:
    accepted = "RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA"
    description = f"the token's algorithm is not accepted (accepted: {accepted})"
    assert await refused(backend(jwks_file), presented) == (401, f"Unauthorized: {description}", challenge(description))


@pytest.mark.parametrize("alg", ["none", "HS256", "hs512", "XS999"])
def test_none_hmac_and_unknown_algorithms_cannot_be_configured(jwks_file: Path, alg: str) -> None:
    with pytest.raises(ValueError, match=f"algorithm {alg!r}"):
        backend(jwks_file, algorithms=[alg])


async def test_a_jwk_that_pins_its_algorithm_refuses_another(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(jwk(RSA_KEY, "rsa", alg="RS256"))))
    assert (await backend(path).verify(token(alg="RS256"))).subject == "alice"
    description = "the token's algorithm does not fit its signing key"
    assert (await refused(backend(path), token(alg="PS256")))[1] == f"Unauthorized: {description}"


async def test_algorithms_can_be_narrowed(jwks_file: Path) -> None:
    narrow = backend(jwks_file, algorithms=["ES256"])
    assert (await narrow.verify(token(EC_KEY, "ec", "ES256"))).subject == "alice"
    message = (await refused(narrow, token()))[1]
    assert message == "Unauthorized: the token's algorithm is not accepted (accepted: ES256)"


def test_the_jwks_keeps_asymmetric_signing_public_keys_only() -> None:
    secret = {"kty": "oct", "kid": "oct", "k": "c2VjcmV0"}
    private = {**jwt.algorithms.RSAAlgorithm.to_jwk(RSA_KEY, as_dict=True), "kid": "private"}
    encryption = {**jwk(EC_KEY, "enc"), "use": "enc"}
    keys = parse_jwks(jwks(secret, private, encryption, jwk(RSA_KEY, "rsa"), {"kty": "RSA"}, "junk"), "test")
    assert list(keys) == ["rsa"]
    assert isinstance(keys["rsa"].key, rsa.RSAPublicKey)


# The key set over HTTP: fetches counted


async def test_keys_are_fetched_once_and_cached(issuer: JwksServer) -> None:
    clock = Clock()
    checker = backend(issuer.url, clock)
    for n in range(3):
        assert (await checker.verify(token(jti=str(n)))).subject == "alice"
    assert issuer.hits == 1
    clock.now += 301  # past cache_ttl: the next token that needs a key refetches the set
    await checker.verify(token(jti="later"))
    assert issuer.hits == 2


async def test_an_unknown_kid_refetches_at_most_once_per_interval(issuer: JwksServer) -> None:
    clock = Clock()
    checker = backend(issuer.url, clock)
    await checker.verify(token())
    assert issuer.hits == 1
    description = "no signing key of the issuer has the token's key id (kid)"
    assert await refused(checker, token(kid="new")) == (401, f"Unauthorized: {description}", challenge(description))
    assert issuer.hits == 1  # the set was fetched less than min_refetch_interval ago
    clock.now += 30
    await refused(checker, token(kid="new"))
    assert issuer.hits == 2  # one refetch, then refused
    await refused(checker, token(kid="newer"))
    assert issuer.hits == 2  # a second unknown kid inside the interval: no second fetch
    clock.now += 30
    await refused(checker, token(kid="newer"))
    assert issuer.hits == 3


async def test_key_rotation_picks_up_new_keys_and_drops_removed_ones(issuer: JwksServer) -> None:
    clock = Clock()
    checker = backend(issuer.url, clock)
    old = token()
    await checker.verify(old)
    issuer.document = jwks(jwk(EC_KEY, "ec-2"))  # the issuer rotates: a new key, the old one withdrawn
    clock.now += 31
    assert (await checker.verify(token(EC_KEY, "ec-2", "ES256"))).subject == "alice"
    assert issuer.hits == 2
    description = "no signing key of the issuer has the token's key id (kid)"
    assert (await refused(checker, old))[1] == f"Unauthorized: {description}"  # even though it was cached


async def test_a_cached_token_is_trusted_no_longer_than_its_key_is_known_current(issuer: JwksServer) -> None:
    # The issuer withdraws the token's key and no other token comes to force a fetch: past cache_ttl the cached
    # verdict is not used, the set is fetched again, and the token is refused.
    clock = Clock()
    checker = backend(issuer.url, clock)
    presented = token()
    scope = {"type": "http", "path": "/mcp", "headers": [(b"authorization", f"Bearer {presented}".encode())]}
    assert (await authenticate(checker, scope)).subject == "alice"
    issuer.document = jwks(jwk(EC_KEY, "ec-2"))
    clock.now += 299
    assert (await authenticate(checker, scope)).subject == "alice"  # within cache_ttl: the cached verdict
    assert issuer.hits == 1
    clock.now += 2
    with pytest.raises(HttpError) as caught:
        await authenticate(checker, scope)
    assert caught.value.message == "Unauthorized: no signing key of the issuer has the token's key id (kid)"
    assert issuer.hits == 2


async def test_concurrent_requests_share_one_fetch(issuer: JwksServer) -> None:
    checker = backend(issuer.url)
    principals = await asyncio.gather(*(checker.verify(token(jti=str(n))) for n in range(20)))
    assert {p.subject for p in principals} == {"alice"}
    assert issuer.hits == 1
    assert checker.keys.fetches == 1


async def test_keys_that_cannot_be_fetched_give_503(tmp_path: Path, issuer: JwksServer) -> None:
    for source in (tmp_path / "missing.json", "http://127.0.0.1:9/jwks.json"):
        with pytest.raises(HttpError) as caught:
            await backend(source).verify(token())
        assert (caught.value.status, caught.value.message) == (
            503,
            "Service Unavailable: the issuer's signing keys cannot be fetched",
        )
    clock = Clock()
    checker = backend(issuer.url, clock)
    await checker.verify(token())
    issuer.document = {"not": "a jwks"}
    clock.now += 301
    assert (await checker.verify(token(jti="x"))).subject == "alice"  # a failed refetch keeps the keys it had
    assert issuer.hits == 2


def test_plain_http_is_for_loopback_only() -> None:
    with pytest.raises(ValueError, match="use https"):
        JwtBackend(ISSUER, RESOURCE, "http://auth.example.com/jwks.json")
    JwtBackend(ISSUER, RESOURCE, "https://auth.example.com/jwks.json")


# The verified-token cache


async def test_a_second_use_of_a_token_costs_no_signature_check(
    jwks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    checker = backend(jwks_file, clock)
    decodes = []
    original = checker.decoder.decode
    monkeypatch.setattr(checker.decoder, "decode", lambda *a, **kw: decodes.append(1) or original(*a, **kw))
    presented = token()
    first = await checker.verify(presented)
    assert await checker.verify(presented) is first
    assert len(decodes) == 1
    assert presented not in repr(checker.verified)  # kept by its hash only
    clock.now = NOW + 600 + 30  # exp + leeway: the cache does not outlive the token
    assert (await refused(checker, presented))[1] == "Unauthorized: the token has expired"
    assert len(decodes) == 2


async def test_a_cached_token_expires_with_the_token(jwks_file: Path) -> None:
    # The token expires long before its key set is due to be fetched again: the cache alone must refuse it.
    clock = Clock()
    checker = backend(jwks_file, clock, cache_ttl=3600)
    presented = token(exp=NOW + 60)
    await checker.verify(presented)
    clock.now = NOW + 60 + 29.5  # past exp, within the leeway
    assert checker.cached(presented) is not None
    clock.now = NOW + 60 + 30  # exp + leeway
    assert checker.cached(presented) is None
    assert (await refused(checker, presented))[1] == "Unauthorized: the token has expired"


async def test_the_token_cache_is_bounded_and_evicts_the_oldest(jwks_file: Path) -> None:
    checker = backend(jwks_file, max_cached_tokens=2)
    tokens = [token(jti=str(n)) for n in range(3)]
    for presented in tokens:
        await checker.verify(presented)
    assert list(checker.verified) == [hashlib.sha256(t.encode()).digest() for t in tokens[1:]]
