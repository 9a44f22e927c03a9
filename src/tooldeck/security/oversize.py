"""The size cap of tool results (``[sanitise] max_result_bytes``): what a CallToolResult that encodes to more bytes
becomes, with ``oversize = "truncate"`` (the default) or ``"error"``.

- ``"error"``: the isError result ``too_large_result`` ("Tool result too large: N bytes (limit M)").
- ``"truncate"``, a result without ``structuredContent``: its content blocks from the start while they fit, the
  first that does not cut short if it is text (dropped if not: an image cannot be cut), then a text block
  "[truncated: the result was N bytes, the limit is M]"; ``isError`` and ``_meta`` as they were. The result is at
  most M bytes. If not even the notice fits beside the rest of the result, it is the error result.
- ``"truncate"``, a result with ``structuredContent``: the error result, saying that a structured result is not
  cut. A cut structured value would no longer match the tool's outputSchema, and a cut text block beside the whole
  value would disagree with it; a client must never get either.

The error result is sent whatever its own size (about a hundred bytes), so a limit below that still holds back the
result. A cut text never ends in half a line break or half an emoji, nor holds part of a removed sequence.
"""

from __future__ import annotations

from typing import Any

import orjson

from .text import clean_text

STRUCTURED_NOTE = "; a result with structuredContent is not truncated, as a cut value could break its outputSchema"


def limit(result: dict[str, Any], max_bytes: int, oversize: str, size: int | None = None) -> dict[str, Any]:
    """``result`` if it encodes to at most ``max_bytes`` (``size``: its encoded length, when known), else what
    ``oversize`` makes of it (see the module docstring). A result that is not JSON is left to the transport."""
    if size is None:
        try:
            size = len(orjson.dumps(result))
        except TypeError:  # not JSON at all: the transport reports that, not the size check
            return result
    if size <= max_bytes:
        return result
    if oversize == "error":
        return too_large_result(size, max_bytes)
    if "structuredContent" in result:
        return too_large_result(size, max_bytes, structured=True)
    return truncate_result(result, size, max_bytes)


def too_large_result(size: int, max_bytes: int, *, structured: bool = False) -> dict[str, Any]:
    note = STRUCTURED_NOTE if structured else ""
    return {"content": [{"type": "text", "text": f"Tool result too large: {size:,} bytes (limit {max_bytes:,}){note}"}],
            "isError": True}  # fmt: skip


def truncate_result(result: dict[str, Any], size: int, max_bytes: int) -> dict[str, Any]:
    """``result`` (``size`` bytes encoded, no structuredContent) cut to fit ``max_bytes``: the longest run of its
    content blocks from the start that fits, the last text block in it cut short, then a block "[truncated: ...]".
    If not even that notice fits, the result is ``too_large_result``."""
    notice = f"[truncated: the result was {size:,} bytes, the limit is {max_bytes:,}]"
    skeleton = {**result, "content": [{"type": "text", "text": notice}]}
    room = max_bytes - len(orjson.dumps(skeleton))
    if room < 0:
        return too_large_result(size, max_bytes)
    kept: list[Any] = []
    for block in result["content"]:
        cost = len(orjson.dumps(block)) + 1  # and the comma before the notice
        if cost <= room:
            kept.append(block)
            room -= cost
            continue
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str:
            cut = _cut_text(block, room)
            if cut is not None:
                kept.append(cut)
        break
    return {**skeleton, "content": [*kept, *skeleton["content"]]}


def _cut_text(block: dict[str, Any], room: int) -> dict[str, Any] | None:
    """``block`` with the longest prefix of its text that encodes (with the comma after it) to ``room`` bytes, made
    clean again (a cut can leave a CR without its LF, a ZWJ or a flag's tags without the rest); None if empty."""
    text = block["text"]
    low, high = 0, len(text)  # the prefix length that fits is in [low, high]
    empty = len(orjson.dumps({**block, "text": ""})) + 1
    if empty > room:
        return None
    high = min(high, room - empty)  # every character encodes to at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if len(orjson.dumps(text[:middle])) - 2 <= room - empty:
            low = middle
        else:
            high = middle - 1
    cut = clean_text(text[:low]) if low else ""  # never longer: it removes, or puts a LF for a CR
    return {**block, "text": cut} if cut else None
