"""What a resource function returns -> resources/read contents, checked against the official schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
from pydantic import BaseModel

from mcp_schema import check
from tooldeck.model.content import EmbeddedResource, Image
from tooldeck.resources.contents import contents_for

URI = "file:///data"


@dataclass
class Point:
    x: int
    y: int


class Pair(NamedTuple):
    a: str
    b: str


class Model(BaseModel):
    name: str


@pytest.mark.parametrize(
    ("value", "mime_type", "contents"),
    [
        ("hello", None, [{"uri": URI, "mimeType": "text/plain", "text": "hello"}]),
        ("# hi", "text/markdown", [{"uri": URI, "mimeType": "text/markdown", "text": "# hi"}]),
        (b"\x00\xff", None, [{"uri": URI, "mimeType": "application/octet-stream", "blob": "AP8="}]),
        (bytearray(b"png"), "image/png", [{"uri": URI, "mimeType": "image/png", "blob": "cG5n"}]),
        (memoryview(b"ab"), None, [{"uri": URI, "mimeType": "application/octet-stream", "blob": "YWI="}]),
        ({"a": [1, 2]}, None, [{"uri": URI, "mimeType": "application/json", "text": '{"a":[1,2]}'}]),
        ({"a": 1}, "application/ld+json", [{"uri": URI, "mimeType": "application/ld+json", "text": '{"a":1}'}]),
        ([{"a": 1}, {"a": 2}], None, [{"uri": URI, "mimeType": "application/json", "text": '[{"a":1},{"a":2}]'}]),
        ([1, 2], None, [{"uri": URI, "mimeType": "application/json", "text": "[1,2]"}]),
        ([], None, [{"uri": URI, "mimeType": "application/json", "text": "[]"}]),
        (Point(1, 2), None, [{"uri": URI, "mimeType": "application/json", "text": '{"x":1,"y":2}'}]),
        (Pair("p", "q"), None, [{"uri": URI, "mimeType": "application/json", "text": '{"a":"p","b":"q"}'}]),
        (Model(name="n"), None, [{"uri": URI, "mimeType": "application/json", "text": '{"name":"n"}'}]),
        (
            ["one", b"\x01"],
            None,
            [
                {"uri": URI, "mimeType": "text/plain", "text": "one"},
                {"uri": URI, "mimeType": "application/octet-stream", "blob": "AQ=="},
            ],
        ),
        (
            EmbeddedResource("file:///data/part1", text="p1", mime_type="text/csv", resource_meta={"k": "v"}),
            None,
            [{"uri": "file:///data/part1", "mimeType": "text/csv", "text": "p1", "_meta": {"k": "v"}}],
        ),
        (
            (
                EmbeddedResource("file:///data/a", text="A"),
                EmbeddedResource("file:///data/b", blob=b"B"),
                "summary",
            ),
            "text/markdown",
            [
                {"uri": "file:///data/a", "text": "A"},
                {"uri": "file:///data/b", "blob": "Qg=="},
                {"uri": URI, "mimeType": "text/markdown", "text": "summary"},
            ],
        ),
    ],
)
def test_contents(value: Any, mime_type: str | None, contents: list[dict[str, Any]]) -> None:
    assert contents_for(URI, value, mime_type) == contents
    for item in contents:
        check("2025-11-25", "TextResourceContents" if "text" in item else "BlobResourceContents", item)
    check("2025-11-25", "ReadResourceResult", {"contents": contents})


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "NoneType"), (42, "int"), (Image(b"x", "image/png"), "Image"), ({1, 2}, "set"), (object(), "object")],
)
def test_other_values_are_a_type_error(value: Any, kind: str) -> None:
    with pytest.raises(TypeError) as info:
        contents_for(URI, value, None)
    assert str(info.value) == (
        f"resource {URI!r}: a resource function must return str, bytes, an EmbeddedResource, a dict, a list, "
        f"a dataclass or a model, or a list of str / bytes / EmbeddedResource; got {kind}"
    )


def test_values_json_cannot_hold_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="resource 'file:///data': the returned value cannot be written as JSON"):
        contents_for(URI, {"when": object()}, None)
