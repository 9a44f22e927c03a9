"""Prompt messages: the Message helper and render(), checked against PromptMessage and GetPromptResult."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_schema import check
from tooldeck.model.content import Audio, ContentError, EmbeddedResource, Image, ResourceLink, Text
from tooldeck.prompts.messages import Message, render

VERSION = "2025-11-25"


def text(role: str, value: str) -> dict[str, Any]:
    return {"role": role, "content": {"type": "text", "text": value}}


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("Review this.", [text("user", "Review this.")]),
        (Message("assistant", "Sure."), [text("assistant", "Sure.")]),
        ({"role": "assistant", "content": "Sure."}, [text("assistant", "Sure.")]),
        (["one", "two"], [text("user", "one"), text("user", "two")]),  # roles are never guessed
        (
            (
                "Hi",
                Message("assistant", "Hello"),
                {"role": "user", "content": Text("Bye", annotations={"priority": 1})},
            ),
            [
                text("user", "Hi"),
                text("assistant", "Hello"),
                {"role": "user", "content": {"type": "text", "text": "Bye", "annotations": {"priority": 1}}},
            ],
        ),
        (
            Image(b"png", "image/png"),
            [{"role": "user", "content": {"type": "image", "data": "cG5n", "mimeType": "image/png"}}],
        ),
        (
            Message("user", Audio(b"wav", "audio/wav")),
            [{"role": "user", "content": {"type": "audio", "data": "d2F2", "mimeType": "audio/wav"}}],
        ),
        (
            Message("user", EmbeddedResource("file:///a.py", text="x = 1", mime_type="text/x-python")),
            [
                {
                    "role": "user",
                    "content": {
                        "type": "resource",
                        "resource": {"uri": "file:///a.py", "mimeType": "text/x-python", "text": "x = 1"},
                    },
                }
            ],
        ),
        (
            Message("assistant", ResourceLink("file:///a.py", "a.py", mime_type="text/x-python")),
            [
                {
                    "role": "assistant",
                    "content": {
                        "type": "resource_link",
                        "uri": "file:///a.py",
                        "name": "a.py",
                        "mimeType": "text/x-python",
                    },
                }
            ],
        ),
        (
            {"role": "user", "content": {"type": "text", "text": "wire form"}},
            [text("user", "wire form")],
        ),
        ([], []),
    ],
)
def test_render(value: Any, messages: list[dict[str, Any]]) -> None:
    assert render(value) == messages
    for message in messages:
        check(VERSION, "PromptMessage", message)
    check(VERSION, "GetPromptResult", {"description": "d", "messages": messages})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Message("system", "x"), "message role must be 'user' or 'assistant', got 'system'"),
        (lambda: Message("user", 3), "message content must be a str, Text, Image, Audio, EmbeddedResource"),
        (lambda: Message("user", {"type": "video"}), "got dict"),
        (lambda: render({"role": "tool", "content": "x"}), "message role must be 'user' or 'assistant', got 'tool'"),
    ],
)
def test_bad_roles_and_content_are_content_errors(make: Any, message: str) -> None:
    with pytest.raises(ContentError) as info:
        make()
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            None,
            "a prompt must return a str, a Message, a {'role', 'content'} dict, a content block, or a list of them; got NoneType",
        ),
        (42, "got int"),
        (["ok", 42], "got int (item [1])"),
        ([["nested"]], "got list (item [0])"),
        ({"content": "x"}, "a prompt message dict has exactly the keys 'role' and 'content', got ['content']"),
        ([{"role": "user", "content": "x", "name": "n"}], "exactly the keys 'role' and 'content' (item [0])"),
    ],
)
def test_other_return_values_are_type_errors(value: Any, message: str) -> None:
    with pytest.raises(TypeError) as info:
        render(value)
    assert message in str(info.value)


def test_message_is_a_record() -> None:
    assert Message("user", "a") == Message("user", "a") != Message("assistant", "a")
    assert repr(Message("user", "a")) == "Message(role='user', content='a')"
    assert Message(role="assistant", content="b").to_wire() == text("assistant", "b")
