"""Static bearer tokens (API keys): each configured entry names a subject, the SHA-256 of its token, its scopes and
roles. Only hashes are configured and kept; a presented token is hashed and compared with every entry.

    token, digest = new_token()            # give ``token`` to the client; put ``digest`` in the policy file
    backend = StaticTokens([{"subject": "ci", "hash": digest, "scopes": ["tools"]}], resource_metadata=url)

An unsalted SHA-256 is enough because the tokens are random secrets of 256 bits (``new_token``), not passwords: there
is nothing to guess from a list of common ones.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from ..protocol.record import Record
from .bearer import BearerBackend
from .metadata import WELL_KNOWN
from .principal import Principal

_HEX = re.compile(r"[0-9a-f]{64}")


def hash_token(token: str) -> str:
    """``"sha256:<hex>"``: how a token is written in the configuration (``tooldeck token hash``)."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh random token (43 URL-safe characters, 256 bits) and its hash."""
    token = secrets.token_urlsafe(32)
    return token, hash_token(token)


def parse_hash(value: str) -> bytes:
    """The 32-byte digest of ``"sha256:<hex>"`` or a bare 64-digit hex string (either case)."""
    text = value.strip().lower().removeprefix("sha256:")
    if not _HEX.fullmatch(text):
        raise ValueError(f"token hash {value[:12]!r}...: expected 'sha256:' and 64 hex digits (see hash_token)")
    return bytes.fromhex(text)


class StaticToken(Record):
    """One configured token: who it is, the digest of its secret, and what it may do."""

    __slots__ = ("subject", "digest", "scopes", "roles")

    def __init__(self, subject: str, token_hash: str, *, scopes: Iterable[str] = (), roles: Iterable[str] = ()) -> None:
        if not subject:
            raise ValueError("static token: the subject (name) is empty")
        self.subject = subject
        self.digest = parse_hash(token_hash)
        self.scopes = frozenset(scopes)
        self.roles = frozenset(roles)

    @classmethod
    def from_mapping(cls, entry: Mapping[str, Any]) -> StaticToken:
        """From a configuration entry: ``subject`` (or ``name``), ``sha256`` (as the policy file has it; or ``hash``,
        ``token_hash``), ``scopes``, ``roles``."""
        subject = entry.get("subject", entry.get("name"))
        token_hash = entry.get("sha256", entry.get("hash", entry.get("token_hash")))
        if not isinstance(subject, str):
            raise ValueError(f"static token entry {sorted(entry)}: 'subject' (or 'name') must be a string")
        if not isinstance(token_hash, str):
            raise ValueError(f"static token {subject!r}: 'hash' must be a string 'sha256:<hex>'")
        scopes, roles = entry.get("scopes", ()), entry.get("roles", ())
        for field, value in (("scopes", scopes), ("roles", roles)):
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"static token {subject!r}: {field!r} must be a list of strings")
        return cls(subject, token_hash, scopes=scopes, roles=roles)


class StaticTokens(BearerBackend):
    """An authentication backend for configured API keys. The principal's ``method`` is ``"token"``; it has no
    ``auth_time``, ``expires_at`` or claims.

    Every entry is compared with ``hmac.compare_digest``, all of them each time (no dict lookup keyed by the secret
    and no early exit), so the time taken says nothing about which entry, or how much of one, matched.
    """

    def __init__(
        self,
        entries: Iterable[StaticToken | Mapping[str, Any]],
        *,
        resource_metadata: str | None = None,
        required: bool = False,
        public_paths: Iterable[str] = (WELL_KNOWN,),
    ) -> None:
        super().__init__(resource_metadata=resource_metadata, required=required, public_paths=public_paths)
        self.entries = [e if isinstance(e, StaticToken) else StaticToken.from_mapping(e) for e in entries]
        seen: dict[bytes, str] = {}
        for entry in self.entries:
            if entry.digest in seen:
                raise ValueError(f"static tokens {seen[entry.digest]!r} and {entry.subject!r} have the same hash")
            seen[entry.digest] = entry.subject
        # One principal object per token: what is worked out per principal (its scopes) is worked out once.
        self._principals = {
            entry.digest: Principal(entry.subject, scopes=entry.scopes, roles=entry.roles, method="token")
            for entry in self.entries
        }

    def lookup(self, token: str) -> StaticToken | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for entry in self.entries:
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        return found

    def cached(self, token: str) -> Principal | None:
        entry = self.lookup(token)  # the constant-time comparison of every entry, each time: no secret-keyed cache
        return None if entry is None else self._principals[entry.digest]

    async def verify(self, token: str) -> Principal:
        principal = self.cached(token)
        if principal is None:
            raise self.invalid("the token is not known")
        return principal
