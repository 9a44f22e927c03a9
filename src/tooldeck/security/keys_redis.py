"""The ``KeyRing`` of a fleet: signing keys kept in Redis, so every process signs and checks with the same ones.

Opening the ring (``await ring.open()``, before the deck serves) settles each key once for the whole fleet: a key
the deck's configuration gives is used as it is (and must then be the same in every process's configuration); any
other is made by whichever process asks first (``SET NX`` of 32 random bytes) and read by all the others. Keys
``<prefix>key:<purpose>``, kept until removed (removing one makes the next process to open the ring make a new one,
and the old one's signatures fail everywhere).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .keys import PURPOSES, checked

if TYPE_CHECKING:
    from ..engine.connection import Engine


class RedisKeyRing:
    def __init__(self, engine: Engine, configured: dict[str, bytes | None] | None = None) -> None:
        self.engine = engine
        self._configured = {purpose: checked(purpose, key) for purpose, key in (configured or {}).items()
                            if key is not None}  # fmt: skip
        self._keys: dict[str, bytes] = {}

    async def open(self) -> None:
        """Settle every purpose's key: configured, or the fleet's (made by the first process that asks)."""
        engine = self.engine
        for purpose in PURPOSES:
            given = self._configured.get(purpose)
            if given is None and purpose == "request-state":
                from .keys import environment_key

                given = environment_key()
            if given is not None:
                self._keys[purpose] = given
                continue
            name = engine.key("key", purpose)
            with engine.reaching():
                await engine.client.set(name, os.urandom(32), nx=True)
                found = await engine.client.get(name)
            if not isinstance(found, bytes):  # removed between the two commands: the next open makes a new one
                raise RuntimeError(f"the shared {purpose} key at {engine.name} vanished while it was read; start again")
            self._keys[purpose] = checked(purpose, found)

    def key(self, purpose: str) -> bytes:
        found = self._keys.get(purpose)
        if found is None:
            raise RuntimeError(f"the shared key ring is not open yet: no {purpose!r} key (await its open() first)")
        return found
