"""The size cap of tool results (security/oversize.py), through sanitise_result as the pipeline calls it: cut at the
limit, the error mode, a structured result never cut, and a property test over sizes: the result is never over the
limit unless it is the documented error, and its text never disagrees with its structured content."""

from __future__ import annotations

import base64
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_schema import LATEST, check
from security.hostile_strings import SCOTLAND, SPECIALS, WOMAN_TECHNOLOGIST, dirty_strings
from tooldeck.security.sanitise import sanitise_result, too_large_result


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def size(result: dict) -> int:
    return len(orjson.dumps(result))


def test_a_result_at_the_limit_passes_and_one_byte_over_is_cut() -> None:
    result = {"content": [text("x" * 1000)], "isError": False}
    n = size(result)
    assert sanitise_result(result, max_bytes=n) is result
    out = sanitise_result(result, max_bytes=n - 1)
    assert size(out) <= n - 1
    notice = f"[truncated: the result was {n:,} bytes, the limit is {n - 1:,}]"
    assert out["content"][-1] == text(notice)
    assert out["content"][0]["text"] == "x" * len(out["content"][0]["text"])
    assert out["isError"] is False
    check(LATEST, "CallToolResult", out)


def test_oversize_error_mode_gives_an_error_result() -> None:
    result = {"content": [text("x" * 5000)], "isError": False}
    n = size(result)
    out = sanitise_result(result, max_bytes=1000, oversize="error")
    assert out == {"content": [text(f"Tool result too large: {n:,} bytes (limit 1,000)")], "isError": True}
    assert out == too_large_result(n, 1000)
    check(LATEST, "CallToolResult", out)


def test_truncation_keeps_the_blocks_that_fit_and_cuts_the_next_text_block() -> None:
    first, second, third = text("a" * 100), text("é" * 500 + "\n" * 100), text("c" * 1000)
    result = {"content": [first, second, third], "isError": False}
    for limit in (150, 200, 400, 700, 1000, 1200):
        out = sanitise_result(result, max_bytes=limit)
        assert size(out) <= limit, limit
        check(LATEST, "CallToolResult", out)
        content = out["content"]
        assert content[-1]["text"].startswith("[truncated: the result was")
        if len(content) > 1:
            assert content[0] == first or first["text"].startswith(content[0]["text"])
        if len(content) > 2:
            assert second["text"].startswith(content[1]["text"])
    out = sanitise_result(result, max_bytes=size(result) - 50)
    assert out["content"][:2] == [first, second]
    assert "c" * 800 in out["content"][2]["text"]  # the third block is cut, not dropped
    assert size(out) > size(result) - 50 - 10  # and the cut is tight


def test_truncation_drops_a_block_that_cannot_be_cut() -> None:
    image = {"type": "image", "data": base64.b64encode(b"x" * 1000).decode(), "mimeType": "image/png"}
    result = {"content": [text("caption"), image, text("after")], "isError": False}
    out = sanitise_result(result, max_bytes=400)
    assert out["content"][0] == text("caption")
    assert len(out["content"]) == 2
    assert size(out) <= 400


@pytest.mark.parametrize("limit", [100, 150, 200, 400, 1000, 1500])
def test_a_structured_result_over_the_limit_is_the_error_never_a_cut(limit: int) -> None:
    # Before: 150-1500 bytes kept the whole structuredContent beside a cut text (the two disagreed), 100 bytes gave
    # an error: now every size over the limit is the same documented error.
    structured = {"rows": list(range(300))}
    result = {"content": [text(orjson.dumps(structured).decode())], "structuredContent": structured, "isError": False}
    n = size(result)
    out = sanitise_result(result, max_bytes=limit)
    assert out == {"content": [text(f"Tool result too large: {n:,} bytes (limit {limit:,}); a result with "
                                    "structuredContent is not truncated, as a cut value could break its "
                                    "outputSchema")], "isError": True}  # fmt: skip
    check(LATEST, "CallToolResult", out)
    assert sanitise_result(result, max_bytes=n) is result  # at the limit: whole


def test_a_limit_too_small_for_the_notice_gives_the_error_result() -> None:
    result = {"content": [text("x" * 100)]}
    assert sanitise_result(result, max_bytes=20) == too_large_result(size(result), 20)


def test_oversize_must_be_known() -> None:
    with pytest.raises(ValueError, match="oversize"):
        sanitise_result({"content": []}, oversize="drop")


@pytest.mark.parametrize(
    "whole",
    [
        "line one\r\nline two",  # cut between CR and LF: the CR alone would overwrite the line
        f"flag {SCOTLAND} here",  # cut inside the flag: its tags alone would be hidden text
        f"we {WOMAN_TECHNOLOGIST} code",  # cut after the ZWJ: it would join nothing
    ],
)
def test_a_cut_text_is_clean_wherever_it_was_cut(whole: str) -> None:
    result = {"content": [text(whole), text("x" * 300)], "isError": False}
    cuts = 0
    for limit in range(1, size(result)):  # every cut position of either block
        out = sanitise_result(result, max_bytes=limit)
        if out == too_large_result(size(result), limit):
            continue  # not even the notice fits
        assert size(out) <= limit
        assert dirty_strings(out) == [], limit
        if len(out["content"]) == 2 and out["content"][0] != text(whole):
            cut = out["content"][0]["text"]
            assert whole.startswith(cut) or whole.startswith(cut[:-1]), cut
            cuts += 1
    assert cuts >= len(whole) - 2  # the first block was cut at (nearly) every character


# --- the property: every size ----------------------------------------------------------------------------------------

_TEXT = st.lists(st.one_of(st.sampled_from([c for c in SPECIALS if not 0xD800 <= ord(c[0]) < 0xE000]),
                           st.characters(codec="utf-8")), max_size=60).map("".join)  # fmt: skip
_PNG = base64.b64encode(b"\x89PNG" + b"x" * 40).decode()
_BLOCKS = st.one_of(
    _TEXT.map(text),
    st.just({"type": "image", "data": _PNG, "mimeType": "image/png"}),
    st.builds(lambda name: {"type": "resource_link", "uri": "https://example.com/r", "name": name}, _TEXT),
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=15,
)
UNSTRUCTURED = st.builds(lambda blocks, failed: {"content": blocks, "isError": failed},
                         st.lists(_BLOCKS, max_size=6), st.booleans())  # fmt: skip
# As tools/result.py makes them: an object and its JSON text; a wrapped string and the string itself.
STRUCTURED = st.one_of(
    st.dictionaries(_TEXT, _JSON, max_size=6).map(
        lambda value: {"content": [text(orjson.dumps(value).decode())], "structuredContent": value, "isError": False}
    ),
    _TEXT.map(lambda value: {"content": [text(value)], "structuredContent": {"result": value}, "isError": False}),
)


def agree(result: dict[str, Any]) -> bool:
    """Whether a structured result's text block says what its structuredContent holds."""
    (block,) = result["content"]
    structured = result["structuredContent"]
    if set(structured) == {"result"} and type(structured["result"]) is str:
        return block["text"] == structured["result"] or json.loads(block["text"]) == structured
    return json.loads(block["text"]) == structured


@settings(max_examples=300)
@given(result=st.one_of(UNSTRUCTURED, STRUCTURED), data=st.data())
def test_a_capped_result_is_within_the_limit_or_the_documented_error_and_never_disagrees(
    result: dict[str, Any], data: st.DataObject
) -> None:
    whole = sanitise_result(result)  # cleaned, uncapped
    n = size(whole)
    limit = data.draw(st.integers(1, n + 40), label="max_result_bytes")
    out = sanitise_result(result, max_bytes=limit)
    check(LATEST, "CallToolResult", out)
    assert dirty_strings(out) == []
    assert sanitise_result(result, max_bytes=limit, oversize="error") == (
        whole if n <= limit else too_large_result(n, limit)
    )
    if n <= limit:
        assert out == whole
        if "structuredContent" in whole:
            assert agree(out)
        return
    if "structuredContent" in result:
        assert out == too_large_result(n, limit, structured=True)
        return
    if out == too_large_result(n, limit):  # only when the notice itself does not fit
        notice = f"[truncated: the result was {n:,} bytes, the limit is {limit:,}]"
        assert size({**whole, "content": [text(notice)]}) > limit
        return
    assert size(out) <= limit
    assert out["isError"] == whole["isError"]
    *kept, notice_block = out["content"]
    assert notice_block == text(f"[truncated: the result was {n:,} bytes, the limit is {limit:,}]")
    assert len(kept) <= len(whole["content"])
    for index, block in enumerate(kept):
        original = whole["content"][index]
        if block != original:  # only the last kept block may differ: a text cut short
            assert index == len(kept) - 1 and original["type"] == "text"
            cut = block["text"]
            assert 0 < len(cut) < len(original["text"])
            assert original["text"].startswith(cut[:-1])
