"""The authorization server's signing keys (a JWKS, RFC 7517 §5), from a file or an http(s) URL, cached by key id.

Keys are fetched in a worker thread (``urllib``; the event loop never waits on the network) when first needed, again
when the set is older than ``cache_ttl``, and when a token names a key id the set does not have (key rotation), but
never more often than once per ``min_refetch_interval``, so tokens with made-up key ids cannot make the server hammer
the issuer. Concurrent requests that need a fetch share one. Each fetch replaces the whole set: keys the issuer
removed are dropped. A failed fetch keeps the keys already known.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt

log = logging.getLogger("tooldeck.security")

MAX_JWKS_BYTES = 1024 * 1024
LOOPBACK = ("localhost", "127.0.0.1", "::1")
_KEY_TYPES = ("RSA", "EC", "OKP")  # asymmetric only: an "oct" (shared secret) key is never loaded


class SigningKey:
    """One key of the set: its id, the algorithm the JWK pins (its ``alg``, if it has one), the public key."""

    __slots__ = ("alg", "key", "kid")

    def __init__(self, kid: str, alg: str | None, key: Any) -> None:
        self.kid = kid
        self.alg = alg
        self.key = key


class JwksError(Exception):
    """The key set could not be fetched or read."""


class KeySet:
    """Signing keys by ``kid``; ``await key(kid)`` returns the ``SigningKey`` or None."""

    def __init__(
        self,
        source: str | Path,
        *,
        cache_ttl: float = 300.0,
        min_refetch_interval: float = 30.0,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = str(source)
        self.url = self.source if is_url(self.source) else None
        if self.url is not None:
            check_url(self.url)
        self.cache_ttl = cache_ttl
        self.min_refetch_interval = min_refetch_interval
        self.timeout = timeout
        self.clock = clock
        self.keys: dict[str, SigningKey] = {}
        self.loaded = False  # a fetch has succeeded at least once
        self.fetched_at = -float("inf")  # when the keys in hand were fetched
        self.attempted_at = -float("inf")  # when the last fetch started, successful or not
        self.fetches = 0  # fetches started (the tests count them)
        self._inflight: asyncio.Task[None] | None = None

    async def key(self, kid: str) -> SigningKey | None:
        if self._inflight is not None:
            await asyncio.shield(self._inflight)
        elif self.clock() - self.fetched_at >= self.cache_ttl:
            await self.refresh()
        found = self.keys.get(kid)
        if found is None and self._inflight is not None:  # a fetch started while this one waited
            await asyncio.shield(self._inflight)
            found = self.keys.get(kid)
        if found is None and await self.refresh():  # an unknown kid: the issuer may have rotated its keys
            found = self.keys.get(kid)
        return found

    async def refresh(self) -> bool:
        """Fetch the set again if the last attempt is at least ``min_refetch_interval`` old (or join the fetch under
        way); True if a fetch was made or joined."""
        if self._inflight is None:
            now = self.clock()
            if now - self.attempted_at < self.min_refetch_interval:
                return False
            self.attempted_at = now
            self.fetches += 1
            self._inflight = asyncio.get_running_loop().create_task(self._fetch())
        task = self._inflight
        # shield: one waiter going away (its request cancelled) must not cancel the fetch the others share
        await asyncio.shield(task)
        return True

    async def _fetch(self) -> None:
        try:
            document = await asyncio.to_thread(self._read)
            self.keys = parse_jwks(document, self.source)
            self.loaded = True
            self.fetched_at = self.clock()
        except JwksError as exc:
            log.warning("%s", exc)
        finally:
            self._inflight = None

    def _read(self) -> Any:
        """Runs in a worker thread."""
        try:
            if self.url is None:
                data = Path(self.source).read_bytes()
            else:
                request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    data = response.read(MAX_JWKS_BYTES + 1)
            if len(data) > MAX_JWKS_BYTES:
                raise JwksError(f"JWKS {self.source}: larger than {MAX_JWKS_BYTES} bytes")
            return json.loads(data)
        except JwksError:
            raise
        except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors; JSONDecodeError a ValueError
            raise JwksError(f"JWKS {self.source}: cannot be read ({exc})") from None


def is_url(source: str) -> bool:
    """Whether a JWKS source is fetched over http(s) (else it is a file)."""
    return source.startswith(("https://", "http://"))


def check_url(url: str) -> None:
    """ValueError for a JWKS URL that would carry the keys unprotected: plain http to anything but loopback."""
    parts = urlsplit(url)
    if parts.scheme == "http" and parts.hostname not in LOOPBACK:
        raise ValueError(f"JWKS {url}: use https (plain http is accepted for loopback addresses only)")


def read_file(path: str | Path) -> dict[str, SigningKey]:
    """The usable signing keys of a JWKS file, read now: a policy reads its file at start, so that a missing or broken
    one is refused there rather than answered 503 at each call. JwksError says what is wrong."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise JwksError(f"JWKS {path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_JWKS_BYTES:
        raise JwksError(f"JWKS {path}: larger than {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise JwksError(f"JWKS {path}: not JSON ({exc})") from None
    keys = parse_jwks(document, str(path))
    if not keys:
        raise JwksError(f'JWKS {path}: no usable signing key (each needs a "kid", "kty" RSA, EC or OKP, and no private '
                        "part)")  # fmt: skip
    return keys


def parse_jwks(document: Any, source: str) -> dict[str, SigningKey]:
    """The usable signing keys of a JWKS document by kid. Skipped: keys with no kid, symmetric keys, keys for
    encryption (``use`` other than ``sig``), private keys, and keys PyJWT cannot read."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError(f'JWKS {source}: expected an object with a "keys" list')
    keys: dict[str, SigningKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        if entry.get("kty") not in _KEY_TYPES or entry.get("use", "sig") != "sig":
            continue
        if "d" in entry:  # private key material: the issuer's JWKS is misconfigured; never load a private key
            log.warning("JWKS %s: key %r skipped (it holds a private key)", source, entry["kid"])
            continue
        try:
            key = jwt.PyJWK(entry).key
        except (jwt.PyJWTError, ValueError, TypeError, KeyError, NotImplementedError) as exc:
            log.warning("JWKS %s: key %r skipped (%s)", source, entry["kid"], exc)
            continue
        alg = entry.get("alg")
        keys[entry["kid"]] = SigningKey(entry["kid"], alg if isinstance(alg, str) else None, key)
    return keys
