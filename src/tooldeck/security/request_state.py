"""Sealed ``requestState`` for multi round-trip requests (MCP 2026-07-28): what a server hands the client when it needs
input, and gets back with the client's retry.

The client holds the state between the two requests, so it is attacker-controlled: the spec requires integrity
protection when the state affects authorization or business logic, and recommends binding it to the principal, a
short expiry and the originating request. A sealed state is ``<payload>.<tag>``, both base64url without padding:
the payload is JSON, the tag its HMAC-SHA256 under the deck's key. The payload carries:

- ``p``: the principal's id (None: anonymous), ``r``: the request it belongs to (method, name, and the SHA-256 of
  the arguments as canonical JSON), ``e``: when it expires (seconds since the epoch), ``n``: a random nonce;
- ``d``: the caller's data (the answers gathered so far, say).

``open`` refuses a state whose tag does not match (tampered, or sealed under another key), that has expired, or that
belongs to another principal or another request; ``spend`` does the same and marks the state used in a
``SpentStore``, so a second ``spend`` of it is refused wherever that store reaches (this process's memory by default;
every process of a deck that shares its backends). Wall-clock time is used (not a monotonic clock), because another
process may open what this one sealed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from ..protocol.errors import TooldeckError

if TYPE_CHECKING:
    from .spent import SpentStore

DEFAULT_TTL = 300.0  # seconds a state may wait for its retry
MIN_KEY_BYTES = 32
MAX_STATE_CHARS = 64 * 1024  # longer is refused before any work is spent on it


class RequestStateError(TooldeckError):
    """A ``requestState`` that cannot be accepted; the message says why (for a -32602 error)."""


def request_digest(method: str, name: str, arguments: Any) -> str:
    """What binds a state to its request: the SHA-256 hex of the method, the name and the arguments (canonical)."""
    canonical = orjson.dumps([method, name, arguments], option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(canonical).hexdigest()


class RequestStates:
    """Seals and opens request states under one key (at least 32 bytes; share it between processes that serve the
    same deck, so any of them can take the retry), spending single-use ones in ``spent`` (this process's memory when
    none is given)."""

    def __init__(
        self,
        key: bytes,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        spent: SpentStore | None = None,
    ) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the request-state key must be at least {MIN_KEY_BYTES} bytes, got {len(key)}")
        if not ttl > 0:
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        self._key = key
        self.ttl = ttl
        self.clock = clock
        if spent is None:
            from .spent import MemorySpentStore

            spent = MemorySpentStore(clock=clock)
        self.spent = spent

    def seal(self, principal_id: str | None, request: str, data: Any = None) -> str:
        """A state for ``request`` (a ``request_digest``) on behalf of ``principal_id``, carrying ``data`` (JSON)."""
        import secrets

        payload = {"p": principal_id, "r": request, "e": self.clock() + self.ttl, "n": secrets.token_urlsafe(12),
                   "d": data}  # fmt: skip
        body = _b64(orjson.dumps(payload))
        return f"{body}.{_b64(self._tag(body))}"

    def open(self, state: Any, principal_id: str | None, request: str) -> Any:
        """The data sealed in ``state``, if it is intact, current, this principal's and this request's; raises
        ``RequestStateError`` saying which check failed."""
        return self._open(state, principal_id, request)["d"]

    async def spend(self, state: Any, principal_id: str | None, request: str) -> Any:
        """``open``, and mark the state used: a second ``spend`` of it is refused (``RequestStateError``)."""
        payload = self._open(state, principal_id, request)
        if not await self.spent.spend(f"request-state:{payload['n']}", payload["e"]):
            raise RequestStateError("requestState was used already: send the request again without it")
        return payload["d"]

    def _open(self, state: Any, principal_id: str | None, request: str) -> dict[str, Any]:
        if not isinstance(state, str) or len(state) > MAX_STATE_CHARS or state.count(".") != 1:
            raise RequestStateError("requestState is not a state this server issued")
        body, _, tag = state.partition(".")
        try:
            given = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4))
        except ValueError:
            raise RequestStateError("requestState is not a state this server issued") from None
        if not hmac.compare_digest(given, self._tag(body)):
            raise RequestStateError("requestState failed its integrity check (changed, or not issued here)")
        payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        now = self.clock()
        if not now < payload["e"]:
            raise RequestStateError("requestState has expired: send the request again without it")
        if payload["p"] != principal_id:
            raise RequestStateError("requestState belongs to another principal")
        if payload["r"] != request:
            raise RequestStateError("requestState belongs to another request (method, name or arguments differ)")
        return payload

    def _tag(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
