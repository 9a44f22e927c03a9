"""Prompt messages: the ``Message`` helper and ``render``, which turns what a prompt function returned into messages.

A ``str`` is one user message. Roles are never guessed: a list of plain strings is a list of user messages, and an
assistant turn is written ``Message("assistant", ...)`` or ``{"role": "assistant", "content": ...}``.
"""

from __future__ import annotations

from typing import Any

from ..model.content import CONTENT_TYPES, ContentBlock, ContentError
from ..protocol.record import Record

ROLES = ("user", "assistant")
_CONTENT_KINDS = frozenset({"text", "image", "audio", "resource", "resource_link"})


class Message(Record):
    """One prompt message: ``role`` is "user" or "assistant"; ``content`` a ``str`` or a content helper
    (Text, Image, Audio, EmbeddedResource, ResourceLink)."""

    __slots__ = ("role", "content")

    def __init__(self, role: str, content: str | ContentBlock | dict[str, Any]) -> None:
        if role not in ROLES:
            raise ContentError(f"message role must be 'user' or 'assistant', got {role!r}")
        _check_content(content)  # refused here, where the mistake is made, rather than when the prompt is got
        self.role = role
        self.content = content

    def to_wire(self) -> dict[str, Any]:
        return {"role": self.role, "content": _content_wire(self.content)}


def render(value: Any) -> list[dict[str, Any]]:
    """The ``messages`` of a prompts/get result for what a prompt function returned.

    Accepts a ``str``, a ``Message``, a ``{"role", "content"}`` dict, a content helper (a user message), or a list
    or tuple of those. Anything else raises TypeError; a bad role or content raises ContentError.
    """
    if isinstance(value, list | tuple):
        return [_message(item, index) for index, item in enumerate(value)]
    return [_message(value, None)]


def _message(item: Any, index: int | None) -> dict[str, Any]:
    if isinstance(item, Message):
        return item.to_wire()
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, CONTENT_TYPES):
        return {"role": "user", "content": item.to_wire()}  # type: ignore[attr-defined]
    where = "" if index is None else f" (item [{index}])"
    if isinstance(item, dict):
        extra = sorted(set(item) - {"role", "content"})
        if extra or "role" not in item or "content" not in item:
            raise TypeError(
                f"a prompt message dict has exactly the keys 'role' and 'content'{where}, got {sorted(item)}"
            )
        return Message(item["role"], item["content"]).to_wire()
    raise TypeError(
        f"a prompt must return a str, a Message, a {{'role', 'content'}} dict, a content block, or a list of "
        f"them; got {type(item).__name__}{where}"
    )


def _content_wire(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"type": "text", "text": content}
    if isinstance(content, CONTENT_TYPES):
        wire: dict[str, Any] = content.to_wire()  # type: ignore[attr-defined]
        return wire
    return content  # a content dict in wire form, checked when the Message was made


def _check_content(content: Any) -> None:
    if isinstance(content, (str, *CONTENT_TYPES)):
        return
    if isinstance(content, dict) and content.get("type") in _CONTENT_KINDS:
        return
    raise ContentError(
        "message content must be a str, Text, Image, Audio, EmbeddedResource, ResourceLink or a content dict "
        f"with a 'type', got {type(content).__name__}"
    )
