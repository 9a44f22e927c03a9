"""cli/jsonc.py: JSON with comments read as VS Code reads it, and one member set in the text with every comment,
trailing comma and line end around it kept. Random documents in random layouts (comments between any two tokens,
trailing commas or not, tabs or spaces, LF or CRLF) must read back as the document with the member set."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck.cli.jsonc import JsoncError, loads, set_member

KEYS = st.text(alphabet='abcdef"\\/*é ', min_size=1, max_size=4)  # quotes, slashes and stars inside keys too
SCALARS = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.text(alphabet='xy/*"\\\n', max_size=5)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                      max_leaves=8)  # fmt: skip


@st.composite
def layouts(draw: st.DrawFn, value: Any) -> str:
    """``value`` written as JSON with comments: random breaks, indentation, comments and trailing commas."""
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    unit = draw(st.sampled_from(["\t", "  ", "    "]))
    counter = iter(range(10_000))

    def gap(depth: int) -> str:
        """What may stand between two tokens: nothing, a space, a comment, a line break."""
        kind = draw(st.sampled_from(["", " ", "line", "block", "break"]))
        if kind == "line":
            return f" // c{next(counter)} /* not a block */{newline}{unit * depth}"
        if kind == "block":
            return f" /* c{next(counter)}{draw(st.sampled_from(['', newline]))} */ "
        if kind == "break":
            return f"{newline}{unit * depth}"
        return kind

    def write(item: Any, depth: int) -> str:
        if isinstance(item, dict | list):
            opening, closing = ("{", "}") if isinstance(item, dict) else ("[", "]")
            parts = [
                f"{json.dumps(k, ensure_ascii=False)}{gap(depth + 1)}:{gap(depth + 1)}{write(v, depth + 1)}"
                if isinstance(item, dict)
                else write(k, depth + 1)
                for k, v in (item.items() if isinstance(item, dict) else ((x, None) for x in item))
            ]
            if not parts:
                return f"{opening}{gap(depth + 1)}{closing}"
            body = "".join(f"{gap(depth + 1)}{part}{gap(depth + 1)}," for part in parts)
            if not draw(st.booleans()):  # no trailing comma
                body = body[:-1]
            return f"{opening}{body}{gap(depth)}{closing}"
        return json.dumps(item, ensure_ascii=False)

    return gap(0) + write(value, 0) + gap(0)


@st.composite
def documents(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    document = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    if draw(st.booleans()):
        document["servers"] = draw(st.dictionaries(KEYS, VALUES, max_size=3))
    return document, draw(layouts(document))


@settings(max_examples=300, deadline=None)
@given(documents(), VALUES)
def test_a_member_is_set_and_everything_else_is_kept(case: tuple[dict[str, Any], str], value: Any) -> None:
    document, text = case
    assert loads(text) == document
    written = set_member(text, ("servers",), "greeter", value)
    assert loads(written) == {**document, "servers": {**document.get("servers", {}), "greeter": value}}
    for number in range(text.count(" c")):  # every comment is still there, once
        for marker in (f"// c{number} ", f"/* c{number}"):
            assert written.count(marker) == text.count(marker)
    if "\r\n" in text and "\n" not in text.replace("\r\n", ""):
        assert "\n" not in written.replace("\r\n", "")  # CRLF stays CRLF


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_plain_json_reads_as_json_does(value: Any) -> None:
    text = json.dumps(value)
    assert loads(text) == json.loads(text)


def test_an_existing_member_is_replaced_where_it_stands() -> None:
    text = '{\n  "servers": {\n    "a": 1, // first\n    "b": [2, /* old */ 3], // second\n    "c": 4,\n  },\n}\n'
    assert set_member(text, ("servers",), "b", {"x": True}) == (
        '{\n  "servers": {\n    "a": 1, // first\n    "b": {\n      "x": true\n    }, // second\n    "c": 4,\n  },\n}\n'
    )


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("{\n  /* open", 2, 3, "Unterminated comment"),
        ('{"a": 1,,}', 1, 10, "Expecting property name enclosed in double quotes"),
        ('{"a": // no value\n}', 2, 1, "Expecting value"),
        ("[1, 2", 1, 6, "Expecting ',' delimiter"),
    ],
)
def test_errors_say_where_in_the_file(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(JsoncError) as raised:
        loads(text)
    assert (raised.value.lineno, raised.value.colno, raised.value.msg) == (line, column, message)


def test_comment_marks_inside_strings_are_text() -> None:
    assert loads('{"url": "http://example.com/*x*/", // a comment\n "b": "//"}') == {
        "url": "http://example.com/*x*/",
        "b": "//",
    }
