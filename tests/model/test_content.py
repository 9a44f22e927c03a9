"""Content helpers: wire forms and the values they refuse."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tooldeck import Annotations, Audio, EmbeddedResource, Image, ResourceLink, Text
from tooldeck.model.content import ContentError


def test_annotations_wire_form() -> None:
    moment = datetime(2025, 1, 12, 15, 0, 58, tzinfo=UTC)
    assert Annotations(audience=["user", "assistant"], priority=1, last_modified=moment).to_wire() == {
        "audience": ["user", "assistant"],
        "priority": 1,
        "lastModified": "2025-01-12T15:00:58+00:00",
    }
    assert Text("t", annotations={"audience": "user"}).to_wire()["annotations"] == {"audience": ["user"]}


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: Annotations(audience=["robot"]), "'robot' is not 'user' or 'assistant'"),
        (lambda: Annotations(priority=1.5), "outside 0..1"),
        (lambda: Annotations(priority="high"), "expected a number"),
        (lambda: Text("x", annotations={"importance": 1}), "unknown key 'importance'"),
        (lambda: Image(b"x", "text/plain"), "expected a image/* type"),
        (lambda: Audio(b"x", "wav"), "MIME type"),
        (lambda: ResourceLink("no-scheme", "n"), "absolute URI"),
        (lambda: ResourceLink("file:///x", "n", size=-1), "byte count"),
        (lambda: EmbeddedResource("test://x"), "exactly one of text= or blob="),
        (lambda: EmbeddedResource("test://x", text="a", blob=b"b"), "exactly one of text= or blob="),
    ],
)
def test_invalid_content_is_refused(make: Any, text: str) -> None:
    with pytest.raises(ContentError) as info:
        make()
    assert text in str(info.value)


def test_image_data_must_be_bytes() -> None:
    with pytest.raises(ContentError, match="expected bytes"):
        Image("aGVsbG8=", "image/png").to_wire()  # type: ignore[arg-type]


def test_resource_link_optional_fields() -> None:
    link = ResourceLink("https://example.com/a", "a", title="A", description="d", icons=[{"src": "https://e/i.png"}])
    assert link.to_wire() == {
        "type": "resource_link",
        "uri": "https://example.com/a",
        "name": "a",
        "title": "A",
        "description": "d",
        "icons": [{"src": "https://e/i.png"}],
    }
