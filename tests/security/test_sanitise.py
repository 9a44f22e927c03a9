"""The output sanitiser: clean_text over the hostile corpus and random strings, results of every kind, listings."""

from __future__ import annotations

import base64
import copy
import json
import unicodedata

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_schema import LATEST, check
from security.hostile_strings import CASES, FORBIDDEN, SCOTLAND, SPECIALS, WOMAN_TECHNOLOGIST
from tooldeck.security.sanitise import (
    ALLOWED_SCHEMES,
    clean_error,
    clean_json,
    clean_text,
    sanitise_block,
    sanitise_listing_text,
    sanitise_result,
    too_large_result,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


def leftovers(text: str) -> list[str]:
    """The forbidden characters ``text`` still holds, judged without the sanitiser's own patterns: a ZWJ only
    between two characters outside ASCII that are emoji-like (So, Sk or U+FE0F), tags only in a flag sequence."""
    found = []
    for index, char in enumerate(text):
        if char == "\u200d" and 0 < index < len(text) - 1:
            before, after = text[index - 1], text[index + 1]
            if (before == "\ufe0f" or unicodedata.category(before) in ("So", "Sk")) and (
                unicodedata.category(after) == "So"
            ):
                continue
        if 0xE0000 <= ord(char) <= 0xE007F and SCOTLAND in text:
            continue
        if char in FORBIDDEN or char == "\x1b":
            found.append(char)
    return found


# --- clean_text ---------------------------------------------------------------------------------------------------


def test_the_corpus_is_large_and_covers_every_class() -> None:
    assert len(CASES) >= 200
    hostile = "".join(h for h, _ in CASES)
    missing = {c for c in FORBIDDEN - set(hostile) if not 0xE0000 <= ord(c) <= 0xE007F}  # tags: a sample of them
    assert missing == set()  # every other forbidden character appears in some case


@pytest.mark.parametrize(("hostile", "expected"), CASES, ids=[ascii(h)[:40] for h, _ in CASES])
def test_clean_text_leaves_exactly_the_visible_text(hostile: str, expected: str) -> None:
    cleaned = clean_text(hostile)
    assert cleaned == expected
    assert leftovers(cleaned) == []
    assert clean_text(cleaned) == cleaned


@pytest.mark.parametrize(
    "text",
    ["", "plain", "line one\nline two\r\n\tindented", "Grüße, 世界 — ½", WOMAN_TECHNOLOGIST, SCOTLAND, "a" * 10_000],
)
def test_clean_text_returns_clean_text_itself(text: str) -> None:
    assert clean_text(text) is text


def test_the_visible_text_of_a_hyperlink_stays_and_its_target_goes() -> None:
    link = "\x1b]8;id=x;https://evil.example/steal?token=1\x1b\\Open the docs\x1b]8;;\x1b\\ now"
    assert clean_text(link) == "Open the docs now"


@given(st.lists(st.one_of(st.sampled_from(SPECIALS), st.characters(codec=None)), max_size=60).map("".join))
def test_random_strings_come_out_clean_and_cleaning_again_changes_nothing(text: str) -> None:
    cleaned = clean_text(text)
    assert leftovers(cleaned) == []
    assert "\x1b" not in cleaned
    again = clean_text(cleaned)
    assert again == cleaned
    assert again is cleaned


# The tag block (U+E0000-E007F) is removed too, and holds unassigned code points (category Cn): leave it out here.
@given(
    st.text(
        st.characters(exclude_categories=("Cc", "Cf", "Cs")).filter(lambda c: not 0xE0000 <= ord(c) <= 0xE007F),
        max_size=60,
    )
)
def test_random_text_without_controls_or_formatting_is_returned_itself(text: str) -> None:
    assert clean_text(text) is text


@given(st.text(st.characters(codec=None), max_size=40))  # surrogates included
def test_clean_text_never_raises_and_its_output_encodes(text: str) -> None:
    clean_text(text).encode("utf-8")


def test_clean_error_cuts_long_messages() -> None:
    assert clean_error("x" * 4096) == "x" * 4096
    assert clean_error("x" * 4097) == "x" * 4095 + "…"
    assert clean_error("bad\x1b[31m thing", limit=5) == "bad …"
    message = "short"
    assert clean_error(message) is message


def test_clean_json_cleans_strings_and_keys_and_keeps_types() -> None:
    value = {"a\x1b[1m": ["x\x00", 1, 2.5, None, True, {"k": "\u202eevil"}], "clean": "yes"}
    assert clean_json(value) == {"a": ["x", 1, 2.5, None, True, {"k": "evil"}], "clean": "yes"}
    assert list(clean_json(value)) == ["a", "clean"]  # member order is kept
    clean = {"a": [1, "b", {"c": "d"}]}
    assert clean_json(clean) is clean


# --- results ------------------------------------------------------------------------------------------------------


def text(value: str) -> dict:
    return {"type": "text", "text": value}


CLEAN_RESULT = {
    "content": [
        text("42"),
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {"type": "audio", "data": PNG, "mimeType": "audio/wav; rate=44100"},
        {"type": "resource_link", "uri": "https://example.com/a", "name": "a", "title": "A", "description": "d"},
        {"type": "resource", "resource": {"uri": "file:///tmp/x.txt", "text": "hello", "mimeType": "text/plain"}},
        {"type": "resource", "resource": {"uri": "memo://x", "blob": PNG}},
    ],
    "structuredContent": {"answer": 42, "words": ["a", "b"]},
    "isError": False,
}


def test_a_clean_result_is_returned_itself() -> None:
    result = copy.deepcopy(CLEAN_RESULT)
    assert sanitise_result(result) is result
    assert sanitise_result(result, max_bytes=10_000) is result
    check(LATEST, "CallToolResult", result)


def test_every_text_of_a_result_is_cleaned_without_touching_the_input() -> None:
    result = {
        "content": [
            text("\x1b[31mred\x1b[0m"),
            text("fine"),
            {"type": "resource_link", "uri": "https://x/", "name": "n\x00", "title": "\u202et", "description": "d\x07"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "a\x9bb"}},
        ],
        "structuredContent": {"k\x1b": "v\u200b"},
        "isError": False,
        "_meta": {"left": "as\x00is"},
    }
    before = copy.deepcopy(result)
    out = sanitise_result(result)
    assert result == before
    assert out == {
        "content": [
            text("red"),
            text("fine"),
            {"type": "resource_link", "uri": "https://x/", "name": "n", "title": "t", "description": "d"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "a"}},
        ],
        "structuredContent": {"k": "v"},
        "isError": False,
        "_meta": {"left": "as\x00is"},
    }
    assert out["content"][1] is result["content"][1]  # unchanged blocks are shared, not copied
    check(LATEST, "CallToolResult", out)


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"type": "resource_link", "uri": "javascript:alert(1)", "name": "x"}, "[link removed: scheme 'javascript' is not allowed]"),
        ({"type": "resource_link", "uri": "VBScript:msgbox", "name": "x"}, "[link removed: scheme 'vbscript' is not allowed]"),
        ({"type": "resource_link", "uri": "data:text/html,<script>", "name": "x"}, "[link removed: scheme 'data' is not allowed]"),
        ({"type": "resource_link", "uri": "java\tscript:alert(1)", "name": "x"}, '[link removed: "java\\tscript:alert(1)" is not an absolute URI]'),
        ({"type": "resource_link", "uri": " https://x", "name": "x"}, '[link removed: " https://x" is not an absolute URI]'),
        ({"type": "resource_link", "uri": "https://x/\u202egpj.exe", "name": "x"}, "[link removed: the URI holds control or invisible formatting characters]"),
        ({"type": "resource_link", "uri": 3, "name": "x"}, "[link removed: the URI is not a string]"),
        ({"type": "image", "data": "not base64!", "mimeType": "image/png"}, "[image removed: data is not valid base64 (Only base64 data is allowed)]"),
        ({"type": "image", "data": "QUJD\n", "mimeType": "image/png"}, "[image removed: data is not valid base64 (Only base64 data is allowed)]"),
        ({"type": "image", "data": "QUJ", "mimeType": "image/png"}, "[image removed: data is not valid base64 (Incorrect padding)]"),
        ({"type": "image", "data": "QUJDé", "mimeType": "image/png"}, "[image removed: data is not valid base64 (string argument should contain only ASCII characters)]"),
        ({"type": "image", "data": None, "mimeType": "image/png"}, "[image removed: data is not a base64 string]"),
        ({"type": "image", "data": PNG, "mimeType": "text/html"}, '[image removed: mimeType "text/html" is not an image/* type]'),
        ({"type": "image", "data": PNG, "mimeType": "image"}, '[image removed: mimeType "image" is not a valid MIME type]'),
        ({"type": "image", "data": PNG, "mimeType": "image/png\x1b[2J"}, '[image removed: mimeType "image/png\\u001b[2J" is not a valid MIME type]'),
        ({"type": "image", "data": PNG}, "[image removed: mimeType is not a string but NoneType]"),
        ({"type": "audio", "data": PNG, "mimeType": "image/png"}, '[audio removed: mimeType "image/png" is not an audio/* type]'),
        ({"type": "resource", "resource": {"uri": "file:///x", "blob": "%%%"}}, "[resource removed: blob is not valid base64 (Only base64 data is allowed)]"),
        ({"type": "resource", "resource": {"uri": "file:///\x00", "text": "x"}}, "[resource removed: the URI holds control or invisible formatting characters]"),
    ],
)  # fmt: skip
def test_bad_blocks_become_text_that_says_why(block: dict, message: str) -> None:
    result = {"content": [text("before"), {**block, "annotations": {"audience": ["user"]}}], "isError": False}
    out = sanitise_result(result)
    assert out["content"] == [text("before"), {"type": "text", "text": message, "annotations": {"audience": ["user"]}}]
    check(LATEST, "CallToolResult", out)


@pytest.mark.parametrize(
    "mime", ["image/png", "IMAGE/PNG", "image/svg+xml", 'image/png; charset="x y"', "image/vnd.a-b.c"]
)
def test_valid_image_types_pass(mime: str) -> None:
    block = {"type": "image", "data": PNG, "mimeType": mime}
    assert sanitise_block(block) is block


def test_allowed_schemes_are_a_parameter() -> None:
    link = {"type": "resource_link", "uri": "memo://notes/1", "name": "n"}
    assert {"https", "http", "file"} == ALLOWED_SCHEMES
    assert sanitise_block(link)["text"] == "[link removed: scheme 'memo' is not allowed]"
    assert sanitise_block(link, {*ALLOWED_SCHEMES, "memo"}) is link
    result = {"content": [link]}
    assert sanitise_result(result, schemes={"memo"}) is result


def test_an_unknown_block_is_passed_as_it_is() -> None:
    block = {"type": "future", "text": "\x1b"}
    assert sanitise_block(block) is block


def test_resource_and_prompt_results_are_cleaned() -> None:
    read = {"contents": [{"uri": "file:///a", "text": "a\x1b[1mb"}, {"uri": "file:///b", "blob": "**"}]}
    assert sanitise_result(read) == {
        "contents": [
            {"uri": "file:///a", "text": "ab"},
            {"uri": "file:///b", "text": "[resource removed: blob is not valid base64 (Only base64 data is allowed)]"},
        ]
    }
    check(LATEST, "ReadResourceResult", sanitise_result(read))
    prompt = {
        "description": "d\u202e",
        "messages": [
            {"role": "user", "content": text("hi\x00")},
            {"role": "assistant", "content": {"type": "resource_link", "uri": "javascript:x", "name": "n"}},
        ],
    }
    out = sanitise_result(prompt)
    assert out == {
        "description": "d",
        "messages": [
            {"role": "user", "content": text("hi")},
            {"role": "assistant", "content": text("[link removed: scheme 'javascript' is not allowed]")},
        ],
    }
    check(LATEST, "GetPromptResult", out)
    clean = {"contents": [{"uri": "file:///a", "text": "ok"}]}
    assert sanitise_result(clean) is clean


# --- size ---------------------------------------------------------------------------------------------------------


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


def test_truncation_keeps_structured_content_when_it_fits() -> None:
    structured = {"rows": list(range(20))}
    result = {"content": [text(json.dumps(structured) * 20)], "structuredContent": structured, "isError": False}
    out = sanitise_result(result, max_bytes=500)
    assert out["structuredContent"] is structured
    assert size(out) <= 500
    assert out["isError"] is False


def test_truncation_drops_structured_content_that_cannot_fit_and_says_so() -> None:
    structured = {"rows": list(range(1000))}
    result = {"content": [text(json.dumps(structured))], "structuredContent": structured, "isError": False}
    n = size(result)
    out = sanitise_result(result, max_bytes=500)
    assert "structuredContent" not in out
    assert out["isError"] is True
    notice = f"[truncated: the result was {n:,} bytes, the limit is 500; structuredContent was dropped]"
    assert out["content"][-1] == text(notice)
    assert size(out) <= 500
    check(LATEST, "CallToolResult", out)


def test_a_limit_too_small_for_the_notice_gives_the_error_result() -> None:
    result = {"content": [text("x" * 100)]}
    assert sanitise_result(result, max_bytes=20) == too_large_result(size(result), 20)


def test_oversize_must_be_known() -> None:
    with pytest.raises(ValueError, match="oversize"):
        sanitise_result({"content": []}, oversize="drop")


# --- listings -----------------------------------------------------------------------------------------------------


def test_listing_text_is_cleaned_where_it_is_shown() -> None:
    tool = {
        "name": "t",
        "title": "T\x1b[8m",
        "description": "Adds.\u202e hidden",
        "annotations": {"title": "\u200bT", "readOnlyHint": True},
        "inputSchema": {
            "type": "object",
            "description": "in\x00",
            "properties": {
                "enum": {"type": "string", "description": "a property called enum\x07"},
                "mode": {"enum": ["a\x00"], "default": "a\x00", "title": "Mode\x1b"},
            },
            "$defs": {"x": {"anyOf": [{"description": "d\x9b"}]}},
        },
        "outputSchema": {"type": "object", "title": "out\u2066"},
    }
    before = copy.deepcopy(tool)
    out = sanitise_listing_text(tool)
    assert tool == before
    assert out == {
        "name": "t",
        "title": "T",
        "description": "Adds. hidden",
        "annotations": {"title": "T", "readOnlyHint": True},
        "inputSchema": {
            "type": "object",
            "description": "in",
            "properties": {
                "enum": {"type": "string", "description": "a property called enum"},
                "mode": {"enum": ["a\x00"], "default": "a\x00", "title": "Mode"},  # values are the tool's to judge
            },
            "$defs": {"x": {"anyOf": [{"description": "d"}]}},
        },
        "outputSchema": {"type": "object", "title": "out"},
    }


def test_prompt_arguments_are_cleaned_and_clean_listings_are_returned_themselves() -> None:
    prompt = {"name": "p", "arguments": [{"name": "a", "description": "x\x1b]0;t\x07y"}, {"name": "b"}]}
    assert sanitise_listing_text(prompt)["arguments"] == [{"name": "a", "description": "xy"}, {"name": "b"}]
    clean = {"name": "t", "description": "fine", "inputSchema": {"type": "object", "properties": {"a": {}}}}
    assert sanitise_listing_text(clean) is clean


# --- the text-only fast path ----------------------------------------------------------------------------------------


def _planes() -> list[int]:
    """Every code point clean_text could act on lies in these ranges (C0/C1, Arabic, general punctuation, specials,
    tags); the rest of the BMP is sampled so a regression elsewhere still shows."""
    return [*range(0, 0x3000), *range(0xF000, 0x10000), *range(0xE0000, 0xE0100), *range(0x3000, 0xD800, 7)]


def test_the_fast_path_sees_every_character_clean_text_removes() -> None:
    from tooldeck.security.sanitise import _may_need_cleaning

    for code in _planes():
        text = f"a{chr(code)}b"
        if clean_text(text) != text:
            encoded = orjson.dumps({"content": [{"type": "text", "text": text}], "structuredContent": {"r": text}})
            assert _may_need_cleaning(encoded), hex(code)


def test_a_clean_text_result_comes_back_as_the_same_object() -> None:
    for text in ("hello", "naïve café, 東京, 🙂", "line\nbreak\ttab", 'quote " and \\ backslash'):
        result = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}
        assert sanitise_result(result) is result


def test_a_false_alarm_of_the_fast_path_still_changes_nothing() -> None:
    result = {"content": [{"type": "text", "text": "a \\b path, “quotes” and © \u2019"}]}
    assert sanitise_result(result) is result


def test_the_fast_path_cleans_what_it_flags_and_applies_the_size_limit() -> None:
    dirty = {"content": [{"type": "text", "text": "red \x1b[31mtext\x1b[0m"}], "structuredContent": {"t": "\u202eabc"}}
    cleaned = sanitise_result(dirty)
    assert cleaned["content"][0]["text"] == "red text" and cleaned["structuredContent"] == {"t": "abc"}
    big = {"content": [{"type": "text", "text": "x" * 5000}]}
    assert sanitise_result(big, max_bytes=1000, oversize="error")["isError"] is True
    cut = sanitise_result(big, max_bytes=1000)
    assert len(orjson.dumps(cut)) <= 1000 and "[truncated:" in cut["content"][-1]["text"]
