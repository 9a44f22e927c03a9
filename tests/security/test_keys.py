"""Signing keys (security/keys.py, keys_redis.py): configured keys are used as given, the rest are random to one
process in memory, and settled once for a whole fleet in Redis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tooldeck.security.keys import MemoryKeyRing
from tooldeck.security.keys_redis import RedisKeyRing

KEY = b"r" * 32


def test_a_memory_ring_uses_configured_keys_and_names_the_random_ones() -> None:
    ring = MemoryKeyRing({"request-state": KEY, "cursor": None})
    assert ring.key("request-state") == KEY
    cursor = ring.key("cursor")
    assert len(cursor) == 32 and ring.key("cursor") is cursor and ring.random == {"cursor"}
    with pytest.raises(KeyError, match="no key purpose 'other'"):
        ring.key("other")
    with pytest.raises(ValueError, match="request-state key must be bytes, at least 32"):
        MemoryKeyRing({"request-state": b"short"})


def test_the_environment_gives_the_request_state_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDECK_STATE_KEY", "e" * 32)
    ring = MemoryKeyRing()
    assert ring.key("request-state") == b"e" * 32 and ring.random == set()


async def test_processes_settle_on_the_same_keys_in_redis(engines: Callable[..., Any]) -> None:
    first, second = RedisKeyRing(engines()), RedisKeyRing(engines())
    with pytest.raises(RuntimeError, match="not open yet"):
        first.key("cursor")
    await first.open()
    await second.open()
    for purpose in ("request-state", "cursor"):
        assert first.key(purpose) == second.key(purpose) and len(first.key(purpose)) == 32
    assert first.key("request-state") != first.key("cursor")
    third = RedisKeyRing(engines(), {"request-state": KEY})  # configuration wins over the stored key
    await third.open()
    assert third.key("request-state") == KEY and third.key("cursor") == first.key("cursor")
