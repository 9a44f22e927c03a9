"""The lifecycle table, driven directly: what each state serves and what moves it."""

from __future__ import annotations

import pytest

from tooldeck.server import lifecycle
from tooldeck.server.lifecycle import CLOSED, INITIALIZED, NEW, READY


@pytest.mark.parametrize(
    ("state", "method", "served"),
    [
        (NEW, "initialize", True),
        (NEW, "ping", True),
        (NEW, "tools/list", False),
        (NEW, "tools/call", False),
        (INITIALIZED, "tools/call", True),
        (INITIALIZED, "initialize", False),
        (READY, "resources/read", True),
        (READY, "initialize", False),
        (CLOSED, "ping", False),
        (CLOSED, "initialize", False),
    ],
)
def test_what_each_state_serves(state: str, method: str, served: bool) -> None:
    assert lifecycle.serves(state, method) is served


@pytest.mark.parametrize(
    ("state", "event", "after"),
    [
        (NEW, "initialize", INITIALIZED),
        (INITIALIZED, "notifications/initialized", READY),
        (NEW, "notifications/initialized", NEW),  # ignored before initialize, as any notification is
        (READY, "notifications/initialized", READY),
        (READY, "initialize", READY),
        (CLOSED, "initialize", CLOSED),
    ],
)
def test_only_the_table_moves_a_session(state: str, event: str, after: str) -> None:
    assert lifecycle.move(state, event) == after


def test_refusals_say_what_to_do() -> None:
    assert (
        lifecycle.refusal(NEW, "tools/list") == "Invalid request: tools/list before initialize; send initialize first"
    )
    assert lifecycle.refusal(READY, "initialize") == "Invalid request: the session is already initialized"
    assert lifecycle.refusal(CLOSED, "ping") == "Invalid request: the session is closed"
