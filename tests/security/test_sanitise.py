"""The output sanitiser (security/sanitise.py): results of every kind, listings, what a running tool sends besides its
result (logs, progress, its questions), every channel over the whole hostile corpus, and the text-only fast path."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import orjson
import pytest

from mcp_schema import LATEST, check
from security.hostile_deck import CASES, ENCODABLE, form, nested
from security.hostile_strings import FILLERS, SEPARATORS
from tooldeck.security.sanitise import (
    ALLOWED_SCHEMES,
    sanitise_block,
    sanitise_listing_text,
    sanitise_message,
    sanitise_result,
)
from tooldeck.security.text import clean_string, may_need_cleaning

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


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


# --- what a running tool sends besides its result -------------------------------------------------------------------


def log(data: Any, logger: str | None = None) -> dict[str, Any]:
    params = {"level": "info", "data": data}
    return params if logger is None else {**params, "logger": logger}


def progress(message: str) -> dict[str, Any]:
    return {"progressToken": "t", "progress": 1, "total": 2, "message": message}


def question(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"mode": "form", "message": message, "requestedSchema": schema}


def sampling(message: Any, system: str = "sys", description: str = "d") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": message}], "maxTokens": 10, "systemPrompt": system,
            "tools": [{"name": "t", "description": description, "inputSchema": {"type": "object"}}]}  # fmt: skip


def test_each_message_is_cleaned_where_it_is_read_and_left_alone_elsewhere() -> None:
    hostile = "\x1b[31mred\u202e"
    assert sanitise_message("notifications/message", log(hostile, hostile)) == log("red", "red")
    assert sanitise_message("notifications/message", log({hostile: [hostile, {"k": hostile}]})) == log(
        {"red": ["red", {"k": "red"}]}
    )
    assert sanitise_message("notifications/progress", progress(hostile)) == progress("red")
    assert sanitise_message("elicitation/create", question(hostile, form(hostile))) == question("red", form("red"))
    assert sanitise_message("sampling/createMessage", sampling(text(hostile), hostile, hostile)) == sampling(
        text("red"), "red", "red"
    )
    assert sanitise_message("sampling/createMessage", sampling([text(hostile), text("ok")])) == sampling(
        [text("red"), text("ok")]
    )
    other = {"uri": hostile}
    assert sanitise_message("notifications/resources/updated", other) is other


def test_clean_messages_are_returned_themselves_and_params_are_never_modified() -> None:
    for method, params in [
        ("notifications/message", log("fine")),
        ("notifications/message", log({"a": ["b", 1, None, {"c": 2.5}]}, "logger")),
        ("notifications/message", log(42)),
        ("notifications/progress", progress("step 1 of 2")),
        ("notifications/progress", {"progressToken": 1, "progress": 1}),
        ("elicitation/create", question("Your name?", form("Name"))),
        ("sampling/createMessage", sampling(text("Hi"))),
    ]:
        assert sanitise_message(method, params) is params
    schema = form("\x1b[1mName")
    before = copy.deepcopy(schema)
    sanitise_message("elicitation/create", question("q", schema))
    assert schema == before  # the tool's own schema (its validator was compiled from it) is untouched


def test_enum_values_and_defaults_are_the_tools_to_judge_and_stay() -> None:
    schema = {"type": "object", "properties": {"pick": {"type": "string", "enum": ["a\x00"], "default": "a\x00",
                                                        "enumNames": ["A\x00"]}}}  # fmt: skip
    out = sanitise_message("elicitation/create", question("q", schema))["requestedSchema"]
    assert out["properties"]["pick"] == {"type": "string", "enum": ["a\x00"], "default": "a\x00", "enumNames": ["A"]}


def test_a_url_to_open_has_its_unsafe_characters_percent_encoded() -> None:
    params = {
        "mode": "url",
        "message": "Open\x1b[8m",
        "url": "https://example.com/\u202egpj.exe?a b",
        "elicitationId": "1",
    }
    assert sanitise_message("elicitation/create", params) == {
        "mode": "url", "message": "Open", "url": "https://example.com/%E2%80%AEgpj.exe?a%20b", "elicitationId": "1"}  # fmt: skip


def test_log_data_that_is_not_json_is_still_walked() -> None:
    data = {"when": object(), "text\x1b[1m": "\ud800"}
    cleaned = sanitise_message("notifications/message", log(data))["data"]
    assert list(cleaned) == ["when", "text"] and cleaned["text"] == "\ufffd"


# --- every channel, every case of the corpus ---------------------------------------------------------------------------
# One function per channel, each given every hostile string of the corpus: a channel whose cleaning is removed, or
# weakened by one step (a key or a depth not walked, a pre-check that misses a class), fails here by name.


def _json(hostile: str) -> str:
    """JSON text holding ``hostile``: controls escaped (\\u001b), the rest as it is."""
    return json.dumps({"k": [hostile]}, ensure_ascii=False)


def _parsed(result: dict[str, Any]) -> Any:
    """The value a client parses from the one text of a resource read or an embedded resource."""
    (item,) = result["contents"] if "contents" in result else [block["resource"] for block in result["content"]]
    return json.loads(item["text"])


def _prompt_and_tools(params: dict[str, Any]) -> dict[str, Any]:
    return {"systemPrompt": params["systemPrompt"], "tools": params["tools"]}


def _structured(hostile: str) -> Any:
    value = {"values": [hostile], "keyed": [{hostile: hostile}]}
    out = sanitise_result({"content": [text(orjson.dumps(value).decode())], "structuredContent": value})
    return [json.loads(out["content"][0]["text"]), out["structuredContent"]]


CHANNELS: dict[str, Any] = {
    "log data, a string": lambda h: sanitise_message("notifications/message", log(h))["data"],
    "log data, keys and values nested": lambda h: sanitise_message("notifications/message", log(nested(h)))["data"],
    "log data, an array": lambda h: sanitise_message("notifications/message", log([h, [h]]))["data"],
    "log logger name": lambda h: sanitise_message("notifications/message", log("x", h))["logger"],
    "progress message": lambda h: sanitise_message("notifications/progress", progress(h))["message"],
    "elicitation message": lambda h: sanitise_message("elicitation/create", question(h, form("f")))["message"],
    "elicitation form labels": lambda h: sanitise_message("elicitation/create", question("q", form(h)))[
        "requestedSchema"
    ],
    "sampling message": lambda h: sanitise_message("sampling/createMessage", sampling(text(h)))["messages"],
    "sampling system prompt and tools": lambda h: _prompt_and_tools(
        sanitise_message("sampling/createMessage", sampling(text("m"), h, h))
    ),
    "tool result text": lambda h: sanitise_result({"content": [text(h)], "isError": False})["content"],
    "resource text": lambda h: sanitise_result({"contents": [{"uri": "file:///a", "text": h}]})["contents"],
    "resource JSON text": lambda h: _parsed(sanitise_result({"contents": [{"uri": "file:///a", "text": _json(h)}]})),
    "embedded resource JSON text": lambda h: _parsed(
        sanitise_result({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": _json(h)}}]})
    ),
    "prompt message and description": lambda h: sanitise_result(
        {"description": h, "messages": [{"role": "user", "content": text(h)}]}
    ),
    "listing": lambda h: sanitise_listing_text(
        {"name": "t", "title": h, "description": h, "inputSchema": form(h), "annotations": {"title": h}}
    ),
}
EXPECTED: dict[str, Any] = {
    "log data, a string": lambda e: e,
    "log data, keys and values nested": nested,
    "log data, an array": lambda e: [e, [e]],
    "log logger name": lambda e: e,
    "progress message": lambda e: e,
    "elicitation message": lambda e: e,
    "elicitation form labels": form,
    "sampling message": lambda e: [{"role": "user", "content": text(e)}],
    "sampling system prompt and tools": lambda e: {"systemPrompt": e, "tools": sampling(e, e, e)["tools"]},
    "tool result text": lambda e: [text(e)],
    "resource text": lambda e: [{"uri": "file:///a", "text": e}],
    "resource JSON text": lambda e: {"k": [e]},
    "embedded resource JSON text": lambda e: {"k": [e]},
    "prompt message and description": lambda e: {"description": e, "messages": [{"role": "user", "content": text(e)}]},
    "listing": lambda e: {
        "name": "t",
        "title": e,
        "description": e,
        "inputSchema": form(e),
        "annotations": {"title": e},
    },
}


@pytest.mark.parametrize("channel", list(CHANNELS))
def test_every_channel_cleans_every_case_of_the_corpus(channel: str) -> None:
    send, expect = CHANNELS[channel], EXPECTED[channel]
    wrong = [(hostile, send(hostile)) for hostile, expected in CASES if send(hostile) != expect(expected)]
    assert wrong == []


def test_a_structured_results_text_parses_to_its_cleaned_structured_content_for_every_case() -> None:
    wrong = []
    for hostile, expected in ENCODABLE:
        want = {"values": [expected], "keyed": [{expected: expected}]}
        got = _structured(hostile)
        if got != [want, want]:
            wrong.append((hostile, got))
    assert wrong == []


# --- the text-only fast path ----------------------------------------------------------------------------------------


def _planes() -> list[int]:
    """Every code point clean_text could act on lies in these ranges (C0/C1 and up to U+2FFF, the Hangul filler's,
    specials, shorthand and musical formatting, tags); the rest of the BMP is sampled so a regression elsewhere still
    shows."""
    return [*range(0, 0x3200), *range(0xF000, 0x10000), *range(0x1BC00, 0x1BD00), *range(0x1D100, 0x1D200),
            *range(0xE0000, 0xE0100), *range(0x3200, 0xD800, 7)]  # fmt: skip


def test_the_fast_path_sees_every_character_the_sanitiser_changes_raw_or_escaped_in_json_text() -> None:
    flagged = set()
    for code in _planes():
        for text in (f"a{chr(code)}b", json.dumps([f"a{chr(code)}b"])):  # json.dumps escapes it: \u....
            if clean_string(text) != text:
                encoded = orjson.dumps({"content": [{"type": "text", "text": text}], "structuredContent": {"r": text}})
                assert may_need_cleaning(encoded), (hex(code), text)
                flagged.add(chr(code))
    assert set(FILLERS) | set(SEPARATORS) | {"\r"} <= flagged


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
