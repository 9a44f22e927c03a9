"""Deck and tool options are listed once and checked once, with messages that name what is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from tooldeck import Deck
from tooldeck.protocol.errors import RegistrationError
from tooldeck.server.options import ServerSettings
from tooldeck.tools.options import TOOL_OPTIONS, ToolOptions


def test_an_unknown_deck_option_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(
        RegistrationError, match=r"^Deck: unknown option 'page_sise' \(options: backends, cache_scope, cursor_secret, "
    ):
        Deck("d", page_sise=10)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"page_size": 0}, "page_size must be a positive integer or None, got 0"),
        ({"log_level": "loud"}, "log_level must be one of debug, info, notice, warning, error, critical, alert, "),
        ({"max_threads": 0}, "max_threads must be a positive integer, got 0"),
        ({"max_batch": True}, "max_batch must be a positive integer, got True"),
        ({"tool_timeout": -1}, "tool_timeout must be a positive number of seconds or None, got -1"),
        ({"state_key": b"short"}, "state_key must be bytes, at least 32 of them"),
        ({"state_key": "k" * 40}, "state_key must be bytes, at least 32 of them"),
        ({"task_lease": 0}, "task_lease must be a positive number of seconds, got 0"),
        ({"task_lease": "30"}, "task_lease must be a positive number of seconds, got '30'"),
        ({"task_lease_renewal": -1}, "task_lease_renewal must be a positive number of seconds, got -1"),
        (
            {"task_lease": 10, "task_lease_renewal": 6},
            "task_lease_renewal (6 s) must be at most half of task_lease "
            "(10 s), so that one late renewal never loses a task",
        ),
        ({"task_lease_renewal": 20}, "task_lease_renewal (20 s) must be at most half of task_lease (30 s)"),
        ({"node_id": ""}, "node_id must be 1 to 64 letters, digits, '_' or '-', got ''"),
        ({"node_id": "a.b"}, "node_id must be 1 to 64 letters, digits, '_' or '-', got 'a.b'"),
        ({"node_id": "n 1"}, "node_id must be 1 to 64 letters, digits, '_' or '-', got 'n 1'"),
        ({"node_id": "nœud"}, "node_id must be 1 to 64 letters, digits, '_' or '-', got 'nœud'"),
        ({"node_id": "x" * 65}, "node_id must be 1 to 64 letters, digits, '_' or '-', got 'xxx"),
        ({"node_id": 7}, "node_id must be 1 to 64 letters, digits, '_' or '-', got 7"),
    ],
)
def test_bad_deck_option_values_say_what_is_wrong(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        Deck("d", **options)
    assert str(info.value).startswith(message)


def test_server_info_takes_the_describing_options() -> None:
    deck = Deck("d", "2.0", title="D", website_url="https://example.com", instructions="Use it.")
    assert deck.server_info == {"name": "d", "version": "2.0", "title": "D", "websiteUrl": "https://example.com"}
    assert deck.instructions == "Use it."


def test_an_unknown_tool_option_is_refused_naming_the_known_ones() -> None:
    deck = Deck("d")
    with pytest.raises(RegistrationError, match=r"^tool: unknown option 'tmeout' \(options: annotations, "):
        deck.add_tool(lambda: "x", name="x", tmeout=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("timeout", [0, -2, "5", True])
def test_a_tool_timeout_must_be_positive_seconds(timeout: Any) -> None:
    with pytest.raises(RegistrationError, match="timeout must be a positive number of seconds or None"):
        Deck("d").add_tool(lambda: "x", name="x", timeout=timeout)


def test_the_option_lists_are_the_typed_dicts() -> None:
    assert set(ToolOptions.__annotations__) == TOOL_OPTIONS
    assert "tool_timeout" in ServerSettings.__annotations__ and "timeout" in TOOL_OPTIONS


def test_a_node_id_is_random_per_deck_unless_given() -> None:
    first, second = Deck("d"), Deck("d")
    assert first.node_id != second.node_id and len(first.node_id) == 8 and int(first.node_id, 16) >= 0
    assert Deck("d", node_id="web-1_a").node_id == "web-1_a"
    assert Deck("d", node_id="x" * 64).node_id == "x" * 64


def test_the_task_lease_options_reach_the_task_manager() -> None:
    manager = Deck("d", task_lease=12, task_lease_renewal=6, node_id="n1").task_manager()
    assert (manager.leases.lease, manager.leases.renewal, manager.node) == (12.0, 6.0, "n1")
    default = Deck("d").task_manager().leases
    assert (default.lease, default.renewal) == (30.0, 10.0)
