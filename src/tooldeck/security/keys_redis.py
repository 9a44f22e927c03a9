"""The ``KeyRing`` of a fleet: signing keys kept in Redis, so every process signs and checks with the same ones.

Opening the ring (``await ring.open()``, before the deck serves) settles each key once for the whole fleet: a key
the deck's configuration gives is used as it is (and must then be the same in every process's configuration); any
other is made by whichever process asks first (``SET NX`` of 32 random bytes) and read by all the others. Keys
``<prefix>key:<purpose>``, kept until removed (removing one makes the next process to open the ring make a new one,
and the old one's signatures fail everywhere). A Redis restart that lost the keys (no persistence) is not a removal:
once Redis is back, each process writes the keys it signs with back (``SET NX``, ``Engine.when_back``), so the
first one to do so restores them for all, and a process started later reads them again.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from .keys import PURPOSES, checked

if TYPE_CHECKING:
    from ..engine.connection import Engine

log = logging.getLogger("tooldeck.engine")


class RedisKeyRing:
    def __init__(self, engine: Engine, configured: dict[str, bytes | None] | None = None) -> None:
        self.engine = engine
        self._configured = {purpose: checked(purpose, key) for purpose, key in (configured or {}).items()
                            if key is not None}  # fmt: skip
        self._keys: dict[str, bytes] = {}
        self._shared: set[str] = set()  # the purposes whose key is kept in Redis (not configured)

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
            self._shared.add(purpose)
        if self._shared:
            engine.when_back(self.restore)

    async def restore(self) -> None:
        """Write the keys this process signs with back, where Redis lost them (a restart without persistence); one
        that another process made meanwhile is kept, and said in the log (this process's signatures fail there)."""
        engine = self.engine
        for purpose in sorted(self._shared):
            name = engine.key("key", purpose)
            with engine.reaching():
                await engine.client.set(name, self._keys[purpose], nx=True)
                found = await engine.client.get(name)
            if found != self._keys[purpose]:
                log.warning("the shared %s key at %s is not the one this process signs with (Redis lost it and "
                            "another process made a new one): restart this process to sign with it", purpose,
                            engine.name)  # fmt: skip

    def key(self, purpose: str) -> bytes:
        found = self._keys.get(purpose)
        if found is None:
            raise RuntimeError(f"the shared key ring is not open yet: no {purpose!r} key (await its open() first)")
        return found
