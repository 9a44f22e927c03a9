"""The prompt registry: unique names, order, change events, pagination."""

from __future__ import annotations

import pytest

from mcp_schema import check
from tooldeck.prompts.prompt import prompt_from_function
from tooldeck.prompts.registry import PromptRegistry
from tooldeck.protocol.cursor import CursorCodec
from tooldeck.protocol.errors import RegistrationError


def summarize(text: str) -> str:
    """Summarize a text."""
    return text


def test_register_list_and_get() -> None:
    registry = PromptRegistry()
    for name in ("b", "a", "c"):
        registry.register(prompt_from_function(summarize, name=name))
    assert [p["name"] for p in registry.listing()] == ["b", "a", "c"]
    assert registry.get("a") is not None and "c" in registry and len(registry) == 3
    check("2025-11-25", "ListPromptsResult", {"prompts": registry.listing()})


def test_duplicates_are_refused_and_names_are_case_sensitive() -> None:
    registry = PromptRegistry()
    registry.register(prompt_from_function(summarize))
    with pytest.raises(RegistrationError) as info:
        registry.register(prompt_from_function(summarize))
    assert str(info.value) == (
        "a prompt named 'summarize' is already registered; remove it first or choose another name"
    )
    registry.register(prompt_from_function(summarize, name="Summarize"))
    assert len(registry) == 2


def test_unregister_notifies_listeners() -> None:
    registry = PromptRegistry()
    prompt = registry.register(prompt_from_function(summarize))
    changes: list[None] = []
    registry.subscribe(lambda: changes.append(None))
    assert registry.unregister("summarize") is prompt
    assert changes == [None] and len(registry) == 0
    with pytest.raises(RegistrationError, match="no prompt named 'summarize' is registered"):
        registry.unregister("summarize")


def test_prompts_paginate() -> None:
    registry = PromptRegistry()
    for index in range(3):
        registry.register(prompt_from_function(summarize, name=f"p{index}"))
    codec = CursorCodec(b"k" * 32)
    first, cursor = registry.page(None, 2, codec)
    rest, last = registry.page(cursor, 2, codec)
    assert [p["name"] for p in first] == ["p0", "p1"]  # type: ignore[index]
    assert [p["name"] for p in rest] == ["p2"] and last is None  # type: ignore[index]
