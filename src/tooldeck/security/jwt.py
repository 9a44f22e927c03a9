"""OAuth 2.1 resource server: JWT access tokens, signed by the authorization server with a key from its JWKS.

A token is accepted when its signature verifies with the issuer's key named by its ``kid``, with an asymmetric
algorithm from the configured list (never ``none``, never HMAC: a public key must not double as a shared secret),
and its claims hold: ``iss`` is the issuer, ``aud`` names this server (RFC 8707: exact match with its canonical
URI), ``sub`` is a string, ``exp`` is not past and ``nbf``/``iat``/``auth_time`` not ahead (each within ``leeway``).

A verified token is remembered (by its SHA-256, never the token itself) until it expires, as long as its key is in
a key set fetched within ``cache_ttl``, so a client's next request costs a dictionary lookup rather than a signature
check. The token is used for nothing else: it is not
logged, not stored, not put in the principal, and never forwarded to another service (MCP forbids token
passthrough; a tool that calls an upstream API gets its own credentials).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from ..protocol.errors import SERVER_ERROR, HttpError
from .bearer import BearerBackend
from .jwks import KeySet, SigningKey
from .metadata import WELL_KNOWN
from .principal import Principal

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_CURVES = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
_REQUIRED = ["exp", "iss", "aud", "sub"]
# Signature, issuer, audience and sub (a string) are PyJWT's; the times are checked here against the injected clock.
_OPTIONS: Any = {"verify_exp": False, "verify_nbf": False, "verify_iat": False, "require": _REQUIRED}


class JwtBackend(BearerBackend):
    """An authentication backend for JWT access tokens (``method="jwt"``).

    ``issuer``: the authorization server's issuer, matched exactly against ``iss``. ``audience``: this server's
    canonical URI (or several), one of which ``aud`` must name. ``jwks``: a file path or an http(s) URL of the
    issuer's key set (plain http only on loopback). ``roles_claim``: where the roles are (dots for nested claims,
    e.g. ``realm_access.roles``). ``clock``: seconds since the epoch (tests pass their own).
    """

    def __init__(
        self,
        issuer: str,
        audience: str | Iterable[str],
        jwks: str | Path,
        *,
        algorithms: Iterable[str] = ALGORITHMS,
        leeway: float = 30.0,
        roles_claim: str = "roles",
        required: bool = False,
        resource_metadata: str | None = None,
        cache_ttl: float = 300.0,
        min_refetch_interval: float = 30.0,
        max_cached_tokens: int = 10_000,
        fetch_timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        public_paths: Iterable[str] = (WELL_KNOWN,),
    ) -> None:
        super().__init__(resource_metadata=resource_metadata, required=required, public_paths=public_paths)
        if not issuer:
            raise ValueError("JwtBackend: issuer is empty")
        self.issuer = issuer
        self.audience = [audience] if isinstance(audience, str) else list(audience)
        if not self.audience or not all(isinstance(a, str) and a for a in self.audience):
            raise ValueError("JwtBackend: audience must be this server's canonical URI (or a list of them)")
        self.algorithms = tuple(algorithms)
        for alg in self.algorithms:
            if alg.lower() == "none" or alg.upper().startswith("HS"):
                raise ValueError(f"JwtBackend: algorithm {alg!r} is refused (only asymmetric signatures are accepted)")
            if alg not in ALGORITHMS:
                raise ValueError(f"JwtBackend: unknown algorithm {alg!r} (choose from {', '.join(ALGORITHMS)})")
        if not self.algorithms:
            raise ValueError("JwtBackend: no algorithms")
        self.leeway = leeway
        self.roles_claim = roles_claim.split(".")
        self.max_cached_tokens = max_cached_tokens
        self.clock = clock
        self.keys = KeySet(jwks, cache_ttl=cache_ttl, min_refetch_interval=min_refetch_interval,
                           timeout=fetch_timeout, clock=clock)  # fmt: skip
        self.decoder = jwt.PyJWT(_OPTIONS)
        # sha256(token) -> (principal, accepted until, kid); insertion order is age, the oldest goes first
        self.verified: dict[bytes, tuple[Principal, float, str]] = {}

    def cached(self, token: str) -> Principal | None:
        return self._cached(hashlib.sha256(token.encode()).digest())

    def _cached(self, digest: bytes) -> Principal | None:
        cached = self.verified.get(digest)
        if cached is not None:
            principal, until, cached_kid = cached
            keys = self.keys
            now = self.clock()
            # Still valid, its key not withdrawn, and the key set current: a verdict is trusted no longer than its
            # key is known to be the issuer's (past cache_ttl the token is verified again, which refreshes the set).
            if now < until and cached_kid in keys.keys and now - keys.fetched_at < keys.cache_ttl:
                return principal
            del self.verified[digest]
        return None

    async def verify(self, token: str) -> Principal:
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._cached(digest)  # hashed once, for the lookup and for remembering the verdict
        if cached is not None:
            return cached
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise self.invalid("the token is not a JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise self.invalid(f"the token's algorithm is not accepted (accepted: {', '.join(self.algorithms)})")
        if not isinstance(kid, str) or not kid:
            raise self.invalid("the token has no key id (kid)")
        key = await self.keys.key(kid)
        if key is None:
            if not self.keys.loaded:
                raise HttpError(503, SERVER_ERROR, "Service Unavailable: the issuer's signing keys cannot be fetched")
            raise self.invalid("no signing key of the issuer has the token's key id (kid)")
        if not fits(key, alg):
            raise self.invalid("the token's algorithm does not fit its signing key")
        claims = self.decode(token, key, alg)
        principal = self.principal(claims)
        self.remember(digest, principal, float(claims["exp"]) + self.leeway, kid)
        return principal

    def decode(self, token: str, key: SigningKey, alg: str) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = self.decoder.decode(
                token, key.key, algorithms=[alg], audience=self.audience, issuer=self.issuer
            )
        except jwt.InvalidSignatureError:
            raise self.invalid("the token's signature is not valid") from None
        except jwt.MissingRequiredClaimError as exc:
            raise self.invalid(f"the token has no {exc.claim!r} claim") from None
        except jwt.InvalidIssuerError:
            raise self.invalid(f"the token's issuer (iss) is not {self.issuer}") from None
        except jwt.InvalidAudienceError:
            raise self.invalid(f"the token's audience (aud) is not {' or '.join(self.audience)}") from None
        except jwt.PyJWTError as exc:  # a malformed token, a sub that is not a string, ...
            raise self.invalid(f"the token is not valid ({type(exc).__name__})") from None
        if not claims["sub"]:
            raise self.invalid("the token's 'sub' claim is empty")
        now, leeway = self.clock(), self.leeway
        exp, nbf, iat, auth_time = claims["exp"], claims.get("nbf"), claims.get("iat"), claims.get("auth_time")
        for name, value in (("exp", exp), ("nbf", nbf), ("iat", iat), ("auth_time", auth_time)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise self.invalid(f"the token's {name!r} claim is not a number")
        if now >= exp + leeway:
            raise self.invalid("the token has expired")
        if nbf is not None and nbf > now + leeway:
            raise self.invalid("the token is not valid yet (nbf)")
        if iat is not None and iat > now + leeway:
            raise self.invalid("the token was issued in the future (iat)")
        if auth_time is not None and auth_time > now + leeway:  # it would pass as a recent authentication for ever
            raise self.invalid("the token's authentication time is in the future (auth_time)")
        return claims

    def principal(self, claims: dict[str, Any]) -> Principal:
        scope = claims.get("scope", claims.get("scp", ()))
        scopes = scope.split() if isinstance(scope, str) else scope
        if not isinstance(scopes, list | tuple) or not all(isinstance(s, str) for s in scopes):
            raise self.invalid("the token's scope claim is neither a space-separated string nor a list of strings")
        roles: Any = claims
        for part in self.roles_claim:
            roles = roles.get(part) if isinstance(roles, dict) else None
        roles = roles.split() if isinstance(roles, str) else roles
        roles = [r for r in roles if isinstance(r, str)] if isinstance(roles, list) else []
        auth_time = claims.get("auth_time")
        auth_time = float(auth_time) if isinstance(auth_time, int | float) and not isinstance(auth_time, bool) else None
        return Principal(claims["sub"], scopes=scopes, roles=roles, method="jwt", issuer=self.issuer,
                         auth_time=auth_time, expires_at=float(claims["exp"]), claims=claims)  # fmt: skip

    def remember(self, digest: bytes, principal: Principal, until: float, kid: str) -> None:
        if self.max_cached_tokens <= 0:
            return
        while len(self.verified) >= self.max_cached_tokens:
            del self.verified[next(iter(self.verified))]
        self.verified[digest] = (principal, until, kid)


def fits(key: SigningKey, alg: str) -> bool:
    """Whether ``alg`` may be verified with ``key``: the JWK's own ``alg`` (if it has one) and its key type agree."""
    if key.alg is not None and key.alg != alg:
        return False
    public = key.key
    if alg.startswith(("RS", "PS")):
        return isinstance(public, rsa.RSAPublicKey)
    if alg in _CURVES:
        return isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == _CURVES[alg]
    return isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey)
