"""Docstring parsing: split a docstring into the prose a client sees and per-parameter descriptions.

Google (``Args:``), NumPy (``Parameters`` over a dashed rule) and Sphinx (``:param x:``) styles are understood.
Parameter sections are removed from the prose because the schema already carries them; every other section
(Returns, Raises, Examples, ...) stays, since it tells the model something the schema cannot.
"""

from __future__ import annotations

import re
import sys

_FUNCTION_SECTIONS = (
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
)
# A class documents its fields as attributes as often as it does as constructor arguments.
_CLASS_SECTIONS = (*_FUNCTION_SECTIONS, "attributes")
# inspect.cleandoc strips only spaces from 3.13 on, as the 3.13 compiler does when it stores a docstring.
_MARGIN_CHARACTERS = " " if sys.version_info >= (3, 13) else None

# Each is matched against a stripped line, and only after a cheap test that the line could match (a header ends
# with ":", a Sphinx field starts with one, an entry contains one), so most lines never run a regex. They are
# compiled on first use (re caches them): compiling all four at import costs ~0.7 ms of start-up, and a docstring
# without sections needs none of them.
_GOOGLE_HEADER = r"(?P<title>[A-Za-z][A-Za-z ]*?)\s*:\s*\Z"
_GOOGLE_ENTRY = r"\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(?P<text>.*))?\Z"
_NUMPY_ENTRY = r"(?P<names>\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?\Z"
_SPHINX_FIELD = (
    r":(?P<field>param|parameter|arg|argument|key|keyword|type|var|ivar|cvar|vartype)"
    r"(?:\s+(?P<spec>[^:]+?))?\s*:(?:\s+(?P<text>.*))?\Z"
)
_SPHINX_DESCRIBES = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "var", "ivar", "cvar"})


def cleandoc(doc: str) -> str:
    """``inspect.cleandoc``, without importing inspect (which loads ast, dis and tokenize: ~4 ms of start-up).

    Strips the first line's leading whitespace, removes the common margin of the others, and drops blank lines at
    either end.
    """
    lines = doc.expandtabs().split("\n")
    margin = sys.maxsize
    for line in lines[1:]:
        content = len(line.lstrip(_MARGIN_CHARACTERS))
        if content:
            margin = min(margin, len(line) - content)
    if lines:
        lines[0] = lines[0].lstrip(_MARGIN_CHARACTERS)
    if margin < sys.maxsize:
        lines[1:] = [line[margin:] for line in lines[1:]]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def parse_docstring(doc: str | None, *, for_class: bool = False) -> tuple[str | None, dict[str, str]]:
    """Return ``(description, {parameter: description})``.

    The description is the cleaned docstring without its parameter sections, or None when nothing is left.
    ``for_class`` also treats an ``Attributes`` section as field descriptions.
    """
    if not doc or not doc.strip():
        return None, {}
    sections = _CLASS_SECTIONS if for_class else _FUNCTION_SECTIONS
    first = doc.lstrip("\n").split("\n", 1)[0].strip()
    if _is_section_header(first, sections):
        # cleandoc dedents the lines after the first by their own margin, which would pull a section's entries
        # out to the column of a header written on the opening line; starting on a fresh line keeps them inside.
        doc = "\n" + doc.lstrip("\n")
    lines = cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = _indent(line)
        if _is_section_header(stripped, sections):
            i = _google_section(lines, i + 1, indent, params)
            continue
        if (
            stripped.lower() in sections
            and i + 1 < len(lines)
            and _is_rule(lines[i + 1].strip())
            and _indent(lines[i + 1]) == indent
        ):
            i = _numpy_section(lines, i + 2, indent, params)
            continue
        field = re.match(_SPHINX_FIELD, stripped) if stripped.startswith(":") else None
        if field:
            i = _sphinx_field(lines, i, indent, field, params)
            continue
        kept.append(line)
        i += 1
    description = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return description or None, params


def _is_section_header(stripped: str, sections: tuple[str, ...]) -> bool:
    """Whether a stripped line is a Google-style header (``Args:``) of one of ``sections``."""
    header = re.match(_GOOGLE_HEADER, stripped) if stripped.endswith(":") else None
    return header is not None and header["title"].lower() in sections


def _is_rule(stripped: str) -> bool:
    """Whether a stripped line is a NumPy section's dashed rule: three dashes or more, and nothing else."""
    return len(stripped) >= 3 and not stripped.strip("-")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _join(parts: list[str]) -> str:
    return " ".join(part for part in parts if part)


def _google_section(lines: list[str], i: int, header_indent: int, params: dict[str, str]) -> int:
    """Consume a Google-style section body; return the index of the first line after it."""
    name: str | None = None
    entry_indent = -1
    text: list[str] = []
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped and _indent(line) <= header_indent:
            break
        if stripped:
            indent = _indent(line)
            entry = re.match(_GOOGLE_ENTRY, stripped) if ":" in stripped else None
            if entry and (name is None or indent <= entry_indent):
                if name is not None:
                    params[name] = _join(text)
                name, entry_indent, text = entry["name"], indent, [entry["text"] or ""]
            elif name is not None:
                text.append(stripped)
        i += 1
    if name is not None:
        params[name] = _join(text)
    return i


def _numpy_section(lines: list[str], i: int, header_indent: int, params: dict[str, str]) -> int:
    """Consume a NumPy-style section body (after the dashed rule); return the index of the first line after it."""
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for name in names:
            params[name] = _join(text)

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        # The next section is a header line over its own dashed rule.
        if i + 1 < len(lines) and stripped and _is_rule(lines[i + 1].strip()):
            break
        if stripped and _indent(line) <= header_indent:
            entry = re.match(_NUMPY_ENTRY, stripped)
            if entry is None:
                break
            flush()
            names = [name.strip().lstrip("*") for name in entry["names"].split(",")]
            text = []
        elif stripped and names:
            text.append(stripped)
        i += 1
    flush()
    return i


def _sphinx_field(lines: list[str], i: int, indent: int, field: re.Match[str], params: dict[str, str]) -> int:
    """Consume one ``:param x: ...`` field and its continuation lines; return the index after it."""
    text = [field["text"] or ""]
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > indent:
        text.append(lines[i].strip())
        i += 1
    spec = field["spec"]
    if field["field"] in _SPHINX_DESCRIBES and spec:
        # ":param int x:" names its type before the parameter; the name is the last word.
        params[spec.split()[-1].lstrip("*")] = _join(text)
    return i
