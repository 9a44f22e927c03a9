"""Cleaning text (security/text.py): clean_text over the hostile corpus and random strings, JSON text cleaned string
by string (clean_string), JSON values (clean_json)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from security.hostile_strings import (
    CASES,
    FILLERS,
    FORBIDDEN,
    SCOTLAND,
    SPECIALS,
    WOMAN_TECHNOLOGIST,
    dirty_strings,
    leftovers,
)
from tooldeck.security.text import clean_error, clean_json, clean_string, clean_text

ENCODABLE = [(hostile, expected) for hostile, expected in CASES if not any(0xD800 <= ord(c) < 0xE000 for c in hostile)]

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


# The tag block (U+E0000-E007F) is removed too, and holds unassigned code points (category Cn); the line and
# paragraph separators (Zl, Zp) become LFs; the printable fillers go: leave them all out here.
@given(
    st.text(
        st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp")).filter(
            lambda c: not 0xE0000 <= ord(c) <= 0xE007F and c not in FILLERS
        ),
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


def test_clean_json_cleans_keys_and_strings_at_any_depth() -> None:
    deep: Any = "\x1b[1mbottom"
    for depth in range(50):
        deep = {f"k{depth}\u202e": [deep]}
    cleaned = clean_json(deep)
    for depth in reversed(range(50)):
        (key,) = cleaned
        assert key == f"k{depth}"
        (cleaned,) = cleaned[key]
    assert cleaned == "bottom"


# --- JSON text ------------------------------------------------------------------------------------------------------


def test_json_text_parses_to_clean_strings_for_every_case_of_the_corpus() -> None:
    wrong = []
    for hostile, expected in ENCODABLE:
        encoded = orjson.dumps({"key": hostile, hostile: [hostile, 1]}).decode()  # controls escaped as \u001b
        parsed = orjson.loads(clean_string(encoded))
        if parsed != {"key": expected, expected: [expected, 1]}:
            wrong.append((hostile, parsed))
    assert wrong == []


def test_json_made_by_the_json_module_is_read_as_a_client_reads_it() -> None:
    # json.dumps escapes everything outside ASCII, lone surrogates too (orjson refuses those; JavaScript does not)
    wrong = []
    for hostile, expected in CASES:
        if hostile == "\ud83d\ude00":  # as JSON escapes, a surrogate pair is the emoji it encodes
            expected = "\U0001f600"
        cleaned = clean_string(json.dumps({"values": [hostile]}))
        if json.loads(cleaned) != {"values": [expected]}:
            wrong.append((hostile, cleaned))
    assert wrong == []


def test_only_the_strings_that_needed_it_change_and_the_formatting_stays() -> None:
    text = json.dumps({"a": "x\x1b[31my", "b": [1, 2.50, "caf\u00e9"], "c\u202e": None}, indent=2)
    cleaned = clean_string(text)
    assert cleaned == text.replace('"x\\u001b[31my"', '"xy"').replace('"c\\u202e"', '"c"')
    assert clean_string(cleaned) is cleaned


def test_a_sequence_is_never_cut_across_the_quotes_of_json_text() -> None:
    # Cleaned as plain text, the 8-bit CSI would take '","b' with it (a quote is an intermediate byte, b a final
    # byte) and an OSC would run to the end: the text would no longer be JSON.
    for raw in ('{"a": "x\x9b", "b": "y"}', '["x\x9d0;", "kept", "too"]'):
        assert orjson.loads(clean_string(raw)) == [clean_text(v) for v in orjson.loads(raw)] if raw[0] == "[" else {
            "a": "x", "b": "y"}  # fmt: skip


def test_json_inside_a_json_string_is_cleaned_too() -> None:
    inner = orjson.dumps({"x": "\x1b[2Jwiped"}).decode()
    outer = orjson.dumps({"inner": inner}).decode()
    assert orjson.loads(orjson.loads(clean_string(outer))["inner"]) == {"x": "wiped"}
    assert clean_string(inner) == '{"x":"wiped"}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":\r1}', '{"a":\n1}'),  # a lone CR between tokens is JSON whitespace: a LF keeps it JSON
        ('{"a":\r"\\u001b"}\r', '{"a":\n""}\n'),
        ('"\\r overwrite"', '"\\n overwrite"'),
        ('"\\u2028"', '"\\n"'),
        ("[1, 2, 3]", "[1, 2, 3]"),
        ("C:\\users\\bob and \\u001b", "C:\\users\\bob and \\u001b"),  # not JSON: the escape is plain text
        ('{"a": "\\u001b[1m", broken', '{"a": "\\u001b[1m", broken'),
        ("[\x1b[31m]", "[]"),  # not JSON either: cleaned as text
    ],
)
def test_json_text_cases(text: str, expected: str) -> None:
    assert clean_string(text) == expected


@pytest.mark.parametrize("text", ['{"a": "caf\\u00e9"}', '["\\n", "\\t", "\\r\\n", "\\"", "\\\\b"]', "\\r\\n", "[]"])
def test_json_text_with_nothing_to_clean_is_returned_itself(text: str) -> None:
    assert clean_string(text) is text


_ENCODABLE_SPECIALS = [c for c in SPECIALS if not 0xD800 <= ord(c[0]) < 0xE000]
_TEXTS = st.lists(st.one_of(st.sampled_from(_ENCODABLE_SPECIALS), st.characters(codec="utf-8")), max_size=30).map(
    "".join
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXTS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXTS, children, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_json_text_and_the_value_it_encodes_are_cleaned_alike(value: Any) -> None:
    text = orjson.dumps(value).decode()
    cleaned = clean_string(text)
    assert orjson.loads(cleaned) == clean_json(value)
    assert dirty_strings(orjson.loads(cleaned)) == []
    assert clean_string(cleaned) is cleaned
