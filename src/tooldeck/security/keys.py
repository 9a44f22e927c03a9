"""Signing keys: the ``KeyRing`` seam, and the in-process ring of configured or random keys.

A deck signs what a client hands back later: the ``requestState`` of a 2026-07-28 input-required result
(``"request-state"``) and its list cursors (``"cursor"``). Every process serving the deck must sign with the same key,
or a retry or a next page that reaches another process is refused; so a shared backend's ring keeps the keys where
every process finds them, and a key that is random to one process is refused when the deck is shared
(``server/backends.py``). A request state's key is at least 32 bytes.
"""

from __future__ import annotations

import os
from typing import Protocol

MIN_KEY_BYTES = 32
PURPOSES = ("request-state", "cursor")


class KeyRing(Protocol):
    def key(self, purpose: str) -> bytes:
        """The key for ``purpose`` (one of ``PURPOSES``), the same on every call."""
        ...


class MemoryKeyRing:
    """Keys given by configuration (``configured``: purpose -> key, None for none; ``$TOOLDECK_STATE_KEY`` for the
    request-state key when the deck gives none), else random keys made once by this process (``random`` names their
    purposes: such a key is no use to another process)."""

    def __init__(self, configured: dict[str, bytes | None] | None = None) -> None:
        self._keys: dict[str, bytes] = {}
        for purpose, key in (configured or {}).items():
            if key is not None:
                self._keys[purpose] = checked(purpose, key)
        self.random: set[str] = set()

    def key(self, purpose: str) -> bytes:
        found = self._keys.get(purpose)
        if found is None:
            if purpose not in PURPOSES:
                raise KeyError(f"no key purpose {purpose!r} (purposes: {', '.join(PURPOSES)})")
            found = environment_key() if purpose == "request-state" else None
            if found is None:
                found = os.urandom(32)
                self.random.add(purpose)
            self._keys[purpose] = found
        return found


def environment_key() -> bytes | None:
    """``$TOOLDECK_STATE_KEY`` as a request-state key (its UTF-8 bytes), None when unset; ``ValueError`` saying what
    is wrong when it is shorter than 32 bytes (``tooldeck serve`` checks it at start, before serving anything)."""
    text = os.environ.get("TOOLDECK_STATE_KEY")
    if not text:
        return None
    key = text.encode()
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"$TOOLDECK_STATE_KEY must be at least 32 characters (it seals requestState for 2026-07-28 "
                         f'clients), got {len(key)}; make one with python -c "import secrets; '
                         f'print(secrets.token_hex(32))"')  # fmt: skip
    return key


def checked(purpose: str, key: bytes) -> bytes:
    """``key`` if it may sign for ``purpose``: bytes, at least 32 of them for a request state (any non-empty bytes
    for cursors, which guard only the position in a list)."""
    least = MIN_KEY_BYTES if purpose == "request-state" else 1
    if not isinstance(key, bytes) or len(key) < least:
        raise ValueError(f"the {purpose} key must be bytes, at least {least} of them")
    return key
