"""The table of what older revisions lack, checked against the official schemas, and the cut-down wire forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tooldeck.protocol import revisions

DATA = Path(__file__).resolve().parents[1] / "data"


def properties(revision: str) -> dict[str, set[str]]:
    root = json.loads((DATA / f"mcp-schema-{revision}.json").read_text())
    definitions = root.get("$defs") or root["definitions"]
    return {name: set(d.get("properties", {})) for name, d in definitions.items()}


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-03-26"])
def test_the_table_says_exactly_what_each_revision_lacks_of_what_tooldeck_sends(revision: str) -> None:
    latest, older = properties(revisions.LATEST), properties(revision)
    named = {*revisions.LACKS["2025-03-26"], *revisions.LACKS["2025-06-18"]}
    for definition in named:
        if definition not in older:
            continue
        lacking = latest[definition] - older[definition]
        assert revisions.LACKS[revision].get(definition, frozenset()) == lacking, definition
    for kind in revisions.LACKS_CONTENT.get(revision, ()):
        assert revisions._BLOCKS[kind] not in older


def test_a_tool_listed_for_2025_03_26_loses_what_that_revision_does_not_define() -> None:
    wire: dict[str, Any] = {"name": "t", "title": "T", "inputSchema": {"type": "object"}, "outputSchema": {},
                            "icons": [], "execution": {"taskSupport": "optional"}, "annotations": {"readOnlyHint": True}}  # fmt: skip
    assert revisions.listing_item("tools", wire, "2025-03-26") == {
        "name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}  # fmt: skip
    assert revisions.listing_item("tools", wire, revisions.LATEST) is wire


def test_a_resource_link_becomes_text_where_the_revision_has_none() -> None:
    result = {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}], "structuredContent": {"x": 1},
              "isError": False}  # fmt: skip
    assert revisions.call_result(result, "2025-03-26") == {
        "content": [{"type": "text", "text": "Resource link: a <file:///a>"}], "isError": False}  # fmt: skip
    assert revisions.call_result(result, "2025-06-18") == result


def test_2026_07_28_lacks_exactly_what_moved_to_the_tasks_extension() -> None:
    latest, modern = properties(revisions.LATEST), properties("2026-07-28")
    for definition in ("Tool", "ServerCapabilities", "CallToolResult", "Resource", "Prompt", "Implementation"):
        lacking = latest[definition] - modern[definition]
        assert revisions.LACKS["2026-07-28"].get(definition, frozenset()) == lacking, definition
