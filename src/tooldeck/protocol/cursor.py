"""Opaque, tamper-evident cursors for paginated lists.

A cursor names the last item of the previous page (by its registration sequence number, or by a key such as a task
id), so pages stay stable when items are added or removed between requests. It is signed with an HMAC key (random
per process unless given), so a cursor that was edited, truncated or minted for another list is refused with -32602.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from .errors import InvalidParamsError

_MAC_BYTES = 16


class CursorCodec:
    """Signs and checks cursors; ``kind`` keeps a tools cursor from being replayed against prompts."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._key = secret if secret is not None else os.urandom(32)

    def encode(self, kind: str, position: int) -> str:
        return self.encode_key(kind, str(position))

    def encode_key(self, kind: str, key: str) -> str:
        """A cursor naming ``key`` (a position, or the id of the last item sent) in the list ``kind``."""
        payload = f"{kind}:{key}".encode()
        return base64.urlsafe_b64encode(payload + self._mac(payload)).rstrip(b"=").decode()

    def decode(self, kind: str, cursor: Any) -> int:
        key = self.decode_key(kind, cursor)
        if not key.isdigit():
            raise InvalidParamsError("Invalid cursor")
        return int(key)

    def decode_key(self, kind: str, cursor: Any) -> str:
        if type(cursor) is not str:
            raise InvalidParamsError("Invalid cursor: expected a string")
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except ValueError:
            raise InvalidParamsError("Invalid cursor") from None
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != cursor:
            raise InvalidParamsError("Invalid cursor")  # only the canonical spelling: no two strings name one page
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        import hmac  # deferred: only paginated lists pay for it

        if len(raw) <= _MAC_BYTES or not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidParamsError("Invalid cursor")
        got_kind, _, key = payload.decode("utf-8", "replace").partition(":")
        if got_kind != kind or not key:
            raise InvalidParamsError("Invalid cursor")
        return key

    def _mac(self, payload: bytes) -> bytes:
        import hashlib
        import hmac

        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_MAC_BYTES]
