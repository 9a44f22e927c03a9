"""What each older revision does not define, and the wire forms cut down to it.

tooldeck builds every message in the latest revision's form. A session that negotiated an older revision must not
receive fields that revision does not define (its clients may validate strictly): a 2025-03-26 client gets no
``title``, ``outputSchema``, ``structuredContent``, ``icons``, ``execution``, ``_meta`` on content, resource links or
``tasks`` capability. The table below says what is missing where; tests/protocol/test_revisions.py checks it
against the official schemas. Sessions on the latest revision never pay for any of this. 2026-07-28 (the stateless
era) is newer, but it dropped what moved to the tasks extension (``Tool.execution``, the ``tasks`` capability), so
its messages are cut down the same way.
"""

from __future__ import annotations

from typing import Any

LATEST = "2025-11-25"

_CONTENT = {"_meta"}
# revision -> schema definition -> properties the revision does not have
LACKS: dict[str, dict[str, frozenset[str]]] = {
    "2026-07-28": {
        "Tool": frozenset({"execution"}),
        "ServerCapabilities": frozenset({"tasks"}),
    },
    "2025-06-18": {
        "Tool": frozenset({"execution", "icons"}),
        "Implementation": frozenset({"description", "icons", "websiteUrl"}),
        "Resource": frozenset({"icons"}),
        "ResourceTemplate": frozenset({"icons"}),
        "Prompt": frozenset({"icons"}),
        "ResourceLink": frozenset({"icons"}),
        "ServerCapabilities": frozenset({"tasks"}),
    },
    "2025-03-26": {
        "Tool": frozenset({"_meta", "execution", "icons", "outputSchema", "title"}),
        "CallToolResult": frozenset({"structuredContent"}),
        "TextContent": frozenset(_CONTENT),
        "ImageContent": frozenset(_CONTENT),
        "AudioContent": frozenset(_CONTENT),
        "EmbeddedResource": frozenset(_CONTENT),
        "Annotations": frozenset({"lastModified"}),
        "Implementation": frozenset({"description", "icons", "title", "websiteUrl"}),
        "Resource": frozenset({"_meta", "icons", "title"}),
        "ResourceTemplate": frozenset({"_meta", "icons", "title"}),
        "Prompt": frozenset({"_meta", "icons", "title"}),
        "PromptArgument": frozenset({"title"}),
        "TextResourceContents": frozenset(_CONTENT),
        "BlobResourceContents": frozenset(_CONTENT),
        "ServerCapabilities": frozenset({"tasks"}),
    },
}
OLDER = frozenset(LACKS)  # the revisions whose messages are cut down (2026-07-28 among them, though newer)
# Content block types each revision lacks entirely (they are sent as a text block describing them instead).
LACKS_CONTENT: dict[str, frozenset[str]] = {"2025-03-26": frozenset({"resource_link"})}
_BLOCKS = {"text": "TextContent", "image": "ImageContent", "audio": "AudioContent", "resource_link": "ResourceLink",
           "resource": "EmbeddedResource"}  # fmt: skip
ITEMS = {"tools": "Tool", "resources": "Resource", "resourceTemplates": "ResourceTemplate", "prompts": "Prompt"}
# What a CallToolResult holds (itself, its content blocks, what they hold), and the revisions that cut any of it:
# the only ones whose tools/call results are rebuilt (2026-07-28 lacks nothing there).
_IN_CALL_RESULTS = frozenset({"CallToolResult", "Annotations", "TextResourceContents", "BlobResourceContents",
                              *_BLOCKS.values()})  # fmt: skip
CUTS_CALL_RESULTS = frozenset(
    [revision for revision, lacks in LACKS.items() if not lacks.keys().isdisjoint(_IN_CALL_RESULTS)]
) | frozenset(LACKS_CONTENT)


def is_latest(revision: str | None) -> bool:
    return revision not in OLDER  # None (a request of no revision yet) and unknown revisions get the latest form


def cut(definition: str, wire: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """``wire`` (an object of ``definition``) without the properties ``revision`` lacks; the same dict if none."""
    lacks = LACKS.get(revision or LATEST, {}).get(definition)
    if not lacks or lacks.isdisjoint(wire):
        return wire
    return {k: v for k, v in wire.items() if k not in lacks}


def listing_item(kind: str, wire: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """One item of ``tools/list`` (``kind`` "tools"), ``resources/list``, ``resources/templates/list`` or
    ``prompts/list`` as ``revision`` defines it."""
    item = cut(ITEMS[kind], wire, revision)
    if "annotations" in item and kind != "tools":
        item = {**item, "annotations": cut("Annotations", item["annotations"], revision)}
    if kind == "prompts" and item.get("arguments"):
        item = {**item, "arguments": [cut("PromptArgument", a, revision) for a in item["arguments"]]}
    return item


def initialize_result(result: dict[str, Any], revision: str | None) -> dict[str, Any]:
    if is_latest(revision):
        return result
    return {**result, "capabilities": cut("ServerCapabilities", result["capabilities"], revision),
            "serverInfo": cut("Implementation", result["serverInfo"], revision)}  # fmt: skip


def content_block(block: dict[str, Any], revision: str | None) -> dict[str, Any]:
    kind = block.get("type")
    if kind in LACKS_CONTENT.get(revision or LATEST, ()):
        return {"type": "text", "text": _describe(block)}
    block = cut(_BLOCKS.get(kind, ""), block, revision)  # type: ignore[arg-type]
    if "annotations" in block:
        block = {**block, "annotations": cut("Annotations", block["annotations"], revision)}
    if kind == "resource":
        resource = block["resource"]
        block = {**block, "resource": cut("BlobResourceContents" if "blob" in resource else "TextResourceContents",
                                          resource, revision)}  # fmt: skip
    return block


def call_result(result: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """A CallToolResult as ``revision`` defines it."""
    if is_latest(revision):
        return result
    result = cut("CallToolResult", result, revision)
    return {**result, "content": [content_block(b, revision) for b in result.get("content", ())]}


def prompt_result(result: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """A GetPromptResult as ``revision`` defines it."""
    if is_latest(revision):
        return result
    messages = [{**m, "content": content_block(m["content"], revision)} for m in result["messages"]]
    return {**result, "messages": messages}


def read_result(result: dict[str, Any], revision: str | None) -> dict[str, Any]:
    """A ReadResourceResult as ``revision`` defines it."""
    if is_latest(revision):
        return result
    contents = [cut("BlobResourceContents" if "blob" in c else "TextResourceContents", c, revision)
                for c in result["contents"]]  # fmt: skip
    return {**result, "contents": contents}


def _describe(block: dict[str, Any]) -> str:
    name = block.get("title") or block.get("name") or block.get("uri")
    return f"Resource link: {name} <{block.get('uri')}>" if name != block.get("uri") else f"Resource link: <{name}>"
