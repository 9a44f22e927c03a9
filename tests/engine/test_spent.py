"""Single-use marks: spent once, fleet-wide, even when many processes try at the same moment."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tooldeck.engine.connection import Engine
from tooldeck.engine.spent import SpentMarks


async def test_a_name_is_spent_once_and_the_mark_expires_with_what_it_stood_for(engine: Engine) -> None:
    marks = SpentMarks(engine)
    assert await marks.is_spent("state-1") is False
    assert await marks.spend("state-1", ttl=300) is True
    assert await marks.spend("state-1", ttl=300) is False
    assert await marks.is_spent("state-1") is True
    assert 299_000 < await engine.client.pttl("tooldeck:spent:state-1") <= 300_000
    with pytest.raises(ValueError, match="ttl must be more than 0 seconds, got 0"):
        await marks.spend("state-2", ttl=0)


async def test_of_many_processes_spending_one_name_at_once_exactly_one_does(engines: Callable[..., Engine]) -> None:
    marks = [SpentMarks(engines()) for _ in range(4)]
    outcomes = await asyncio.gather(*(m.spend(f"confirmation-{n}", 60) for n in range(25) for m in marks))
    assert sum(outcomes) == 25  # one winner for each name
