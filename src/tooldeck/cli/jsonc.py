"""JSON with comments, as VS Code writes its settings and ``mcp.json``: ``//`` and ``/* */`` comments and trailing
commas. ``loads`` reads it; ``set_member`` changes one member of an object in the text itself, so that every comment,
trailing comma, blank line and indentation around it stays as it was (a host's file is its user's, not ours).

Both work on a *blanked* copy of the text: comments (and, for parsing, trailing commas) replaced by spaces, newlines
kept, so the copy is plain JSON with every character at its original offset. ``json`` parses the copy (an error's
line and column are the file's), and the spans found in it are spans of the original text.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple


class JsoncError(ValueError):
    """Text that is not JSON with comments; ``lineno``/``colno`` (1-based) say where, as ``json`` does."""

    def __init__(self, msg: str, text: str, pos: int) -> None:
        self.msg = msg
        self.pos = pos
        self.lineno = text.count("\n", 0, pos) + 1
        self.colno = pos - text.rfind("\n", 0, pos)
        super().__init__(f"{msg}: line {self.lineno} column {self.colno}")


def loads(text: str) -> Any:
    """The value in ``text``; JsoncError for anything but JSON with comments and trailing commas."""
    clean = _without_trailing_commas(_without_comments(text))
    try:
        return json.loads(clean)
    except json.JSONDecodeError as exc:
        raise JsoncError(exc.msg, text, exc.pos) from None


def set_member(text: str, path: tuple[str, ...], name: str, value: Any) -> str:
    """``text`` with the member ``name`` of the object at ``path`` (keys from the top-level object) set to ``value``:
    an existing member's value is replaced where it stands, a new member goes after the object's last member (in the
    file's indentation, with a trailing comma if the file puts one there); objects missing on ``path`` are added the
    same way. ``text`` must hold an object at the top and objects along ``path`` (``loads`` it first)."""
    uncommented = _without_comments(text)
    clean = _without_trailing_commas(uncommented)
    layout = _Layout(_indent_unit(text), "\r\n" if "\r\n" in text else "\n")
    at = _skip_space(clean, 0)
    for depth, key in enumerate(path):
        members, close = _members(clean, at)
        found = next((m for m in reversed(members) if m.key == key), None)
        if found is None:  # build the rest of the path as one new member
            nested: Any = {name: value}
            for outer in reversed(path[depth + 1 :]):
                nested = {outer: nested}
            return _insert(text, uncommented, at, close, members, key, nested, layout)
        at = found.value_start
    members, close = _members(clean, at)
    found = next((m for m in reversed(members) if m.key == name), None)
    if found is None:
        return _insert(text, uncommented, at, close, members, name, value, layout)
    indent = _line_indent(text, found.key_start)
    return text[: found.value_start] + layout.dumps(value, indent) + text[found.value_end :]


# --- blanking -------------------------------------------------------------------------------------------------

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\r\n]*|/\*.*?\*/|/\*', re.S)


def _without_comments(text: str) -> str:
    """``text`` with every comment's characters but line ends replaced by spaces (strings are left alone)."""

    def blank(match: re.Match[str]) -> str:
        token = match.group()
        if token.startswith('"'):
            return token
        if token == "/*":
            raise JsoncError("Unterminated comment", text, match.start())
        return re.sub(r"[^\r\n]", " ", token)

    return _TOKENS.sub(blank, text)


_TRAILING = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=\s*[}\]])', re.S)


def _without_trailing_commas(uncommented: str) -> str:
    return _TRAILING.sub(lambda m: m.group() if m.group().startswith('"') else " ", uncommented)


# --- spans ----------------------------------------------------------------------------------------------------


class _Member(NamedTuple):
    key: str
    key_start: int
    value_start: int
    value_end: int


def _members(clean: str, start: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is at ``start`` in plain JSON, and the offset of its ``}``."""
    members: list[_Member] = []
    at = _skip_space(clean, start + 1)
    while clean[at] != "}":
        key_end = _value_end(clean, at)
        key = json.loads(clean[at:key_end])
        value_start = _skip_space(clean, _skip_space(clean, key_end) + 1)  # past the colon
        value_end = _value_end(clean, value_start)
        members.append(_Member(key, at, value_start, value_end))
        at = _skip_space(clean, value_end)
        if clean[at] == ",":
            at = _skip_space(clean, at + 1)
    return members, at


_SCALAR = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s,}\]]+', re.S)


def _value_end(clean: str, start: int) -> int:
    """Where the JSON value starting at ``start`` ends (the text is valid JSON)."""
    if clean[start] not in "{[":
        match = _SCALAR.match(clean, start)
        assert match is not None
        return match.end()
    depth, at = 0, start
    while True:
        match = _STRUCTURE.search(clean, at)
        assert match is not None
        token = match.group()
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
            if depth == 0:
                return match.end()
        at = match.end()


_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]', re.S)


def _skip_space(clean: str, at: int) -> int:
    while clean[at] in " \t\r\n":
        at += 1
    return at


# --- writing --------------------------------------------------------------------------------------------------


class _Layout(NamedTuple):
    unit: str  # one level of indentation
    newline: str

    def dumps(self, value: Any, indent: str) -> str:
        """``value`` as JSON, a level per ``unit``, its lines after the first starting at ``indent``."""
        return json.dumps(value, indent=self.unit, ensure_ascii=False).replace("\n", self.newline + indent)

    def member(self, name: str, value: Any, indent: str) -> str:
        return f"{json.dumps(name, ensure_ascii=False)}: {self.dumps(value, indent)}"


def _insert(text: str, uncommented: str, start: int, close: int, members: list[_Member], name: str, value: Any,
            layout: _Layout) -> str:  # fmt: skip
    """``text`` with the member ``name: value`` added to the object spanning ``start``..``close``."""
    nl = layout.newline
    if not members:
        outer = _line_indent(text, start)
        member = layout.member(name, value, outer + layout.unit)
        if not text[start + 1 : close].strip():  # "{}" or "{ }": the member on its own line inside
            return f"{text[: start + 1]}{nl}{outer}{layout.unit}{member}{nl}{outer}{text[close:]}"
        line_end = _line_end(text, uncommented, start + 1)  # comments inside: the member right after the "{" line
        if line_end < 0:
            return f"{text[: start + 1]} {member}{text[start + 1 :]}"
        return f"{text[:line_end]}{nl}{outer}{layout.unit}{member}{text[line_end:]}"
    last = members[-1]
    indent = _line_indent(text, last.key_start)
    member = layout.member(name, value, indent)
    after = _skip_space(uncommented, last.value_end)
    if uncommented[after] == ",":  # the file ends its members with a comma: so does the new one
        line_end = _line_end(text, uncommented, after + 1)
        if line_end < 0:
            return f"{text[: after + 1]} {member},{text[after + 1 :]}"
        return f"{text[:line_end]}{nl}{indent}{member},{text[line_end:]}"
    line_end = _line_end(text, uncommented, last.value_end)
    if line_end < 0:
        return f"{text[: last.value_end]}, {member}{text[last.value_end :]}"
    return f"{text[: last.value_end]},{text[last.value_end : line_end]}{nl}{indent}{member}{text[line_end:]}"


def _line_end(text: str, uncommented: str, at: int) -> int:
    """The offset of the line end after ``at`` if the rest of that line is blank or a comment that ends on it (so a
    member can go on a line of its own after it), else -1."""
    newline = uncommented.find("\n", at)
    if newline < 0 or uncommented[at:newline].strip():
        return -1
    for token in _TOKENS.finditer(text, at):
        if token.start() > newline:
            break
        if token.group().startswith("/*") and token.end() > newline:
            return -1  # a block comment goes on past the line end
    return newline - 1 if newline > 0 and text[newline - 1] == "\r" else newline


def _line_indent(text: str, at: int) -> str:
    """The whitespace that starts the line holding offset ``at`` (nothing when the line does not start there)."""
    line_start = text.rfind("\n", 0, at) + 1
    match = re.match(r"[ \t]*", text[line_start:at])
    return match.group() if match else ""


def _indent_unit(text: str) -> str:
    """One level of the file's indentation: that of its first indented line (a tab, or so many spaces)."""
    match = re.search(r"^([ \t]+)\S", text, re.M)
    if match is None:
        return "  "
    found = match.group(1)
    return "\t" if found.startswith("\t") else " " * len(found)
