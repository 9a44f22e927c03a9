"""RFC 6570 URI templates, levels 1-3: parsed once, then expanded into URIs or matched against them.

A template compiles to one regular expression with a group per expression. A match splits each group the way the
expression's operator joined its values, then percent-decodes them. Query expressions (``{?x,y}``, ``{&z}``, and
literal pairs such as ``?fixed=yes``) are matched as a set of parameters instead: in any order, each optional,
unknown ones ignored. Level 4 (the ``*`` explode and ``:n`` prefix modifiers) is refused: a prefix cannot be
matched back to the value it was cut from.

What a match cannot tell apart, it reads one way, documented here once:
- an empty value of an unnamed operator (``{x}``, ``{+x}``, ``{#x}``, ``{.x}``, ``{/x}``) is indistinguishable
  from an undefined one, so it is reported as absent (``users/{id}`` does not give ``id=""`` for ``users/``);
  the named operators (``{;x}``, ``{?x}``, ``{&x}``) spell the name, so their empty values come back as ``""``;
- ``{x,y}`` with only one value present gives it to ``x``: undefined variables leave no trace in a URI;
- reserved expansion (``{+x}``, ``{#x}``) passes ``,`` and ``%XX`` through unencoded, so such values in a
  multi-variable expression, or already percent-encoded, do not come back unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from ..protocol.errors import RegistrationError

# RFC 6570 appendix A: operator -> (first, separator, named, if-empty, allows reserved characters)
_OPERATORS: dict[str, tuple[str, str, bool, str, bool]] = {
    "": ("", ",", False, "", False),
    "+": ("", ",", False, "", True),
    "#": ("#", ",", False, "", True),
    ".": (".", ".", False, "", False),
    "/": ("/", "/", False, "", False),
    ";": (";", ";", True, "", False),
    "?": ("?", "&", True, "=", False),
    "&": ("&", "&", True, "=", False),
}
_FUTURE_OPERATORS = "=,!@|"
_ALPHA_DIGIT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UNRESERVED = frozenset(_ALPHA_DIGIT + "-._~")
_RESERVED = frozenset(":/?#[]@!$&'()*+,;=")
_UNRESERVED_OR_RESERVED = _UNRESERVED | _RESERVED
_VARCHAR = frozenset(_ALPHA_DIGIT + "_")
_HEX = frozenset("0123456789abcdefABCDEF")
# ASCII characters a literal may not contain (RFC 6570 section 2.1): controls, space, " ' % < > \ ^ ` { | }
_NOT_LITERAL = frozenset(chr(c) for c in range(0x21)) | frozenset("\"'%<>\\^`{|}\x7f")
# Patterns are compiled on first use (re caches them), not at import: start-up pays for none of them.
_PERCENT_RUN = r"(?:%[0-9A-Fa-f]{2})+"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*:"

Values = dict[str, str]


class _Expression:
    __slots__ = ("operator", "names", "group")

    def __init__(self, operator: str, names: tuple[str, ...], group: str) -> None:
        self.operator = operator
        self.names = names
        self.group = group  # the regex group that captures this expression (without its first character)


class UriTemplate:
    """A parsed URI template: ``variables``, ``expand(values)`` and ``match(uri)``.

    ``UriTemplate("file:///{+path}{?rev}")`` raises RegistrationError, naming the column, for a malformed template
    or a level-4 modifier. Two templates are equal when their text is.
    """

    __slots__ = ("text", "variables", "_parts", "_regex", "_query", "_fixed")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise RegistrationError(f"a URI template must be a string, got {type(text).__name__}")
        self.text = text
        self._parts = _parse(text)
        names: dict[str, None] = {}
        for part in self._parts:
            if isinstance(part, _Expression):
                names.update(dict.fromkeys(part.names))
        self.variables: tuple[str, ...] = tuple(names)
        self._query: tuple[str, ...] | None = None  # the variables matched as query parameters, in query mode
        self._fixed: dict[str, str] = {}  # literal query parameters the URI must carry, in query mode
        self._regex = self._compile()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UriTemplate) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"UriTemplate({self.text!r})"

    @property
    def is_absolute(self) -> bool:
        """Whether every expansion starts with a scheme (``scheme:``), as an absolute URI must (RFC 3986)."""
        first = self._parts[0] if self._parts else ""
        return isinstance(first, str) and re.match(_SCHEME, first) is not None

    # -- expansion ------------------------------------------------------------------------------------------------

    def expand(self, values: Values) -> str:
        """The URI for ``values``; a missing variable (or None) is undefined and leaves no trace, as RFC 6570 says."""
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            first, separator, named, if_empty, reserved = _OPERATORS[part.operator]
            items: list[str] = []
            for name in part.names:
                value = values.get(name)
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise TypeError(f"URI template {self.text!r}: variable {name!r} must be a string, got {value!r}")
                encoded = _encode(value, reserved)
                if named:
                    items.append(f"{name}={encoded}" if value else name + if_empty)
                else:
                    items.append(encoded)
            if items:
                out.append(first + separator.join(items))
        return "".join(out)

    # -- matching -------------------------------------------------------------------------------------------------

    def match(self, uri: str) -> Values | None:
        """The decoded variable values if ``uri`` is an expansion of this template, else None.

        Variables the URI leaves undefined are absent from the result (see the module docstring).
        """
        if not isinstance(uri, str):
            return None
        found = self._regex.fullmatch(uri)
        if found is None:
            return None
        values: Values = {}
        groups = found.groupdict()  # in query mode, the query's expressions have no group of their own
        for part in self._parts:
            if isinstance(part, _Expression):
                text = groups.get(part.group)
                if text is not None and not _read_expression(part, text, values):
                    return None
        if self._query is not None and not self._read_query(found.group("query"), values):
            return None
        return values

    def _read_query(self, query: str | None, values: Values) -> bool:
        if query is None:
            return not self._fixed
        variables = self._query or ()
        seen: set[str] = set()
        for piece in query.split("&"):
            if not piece:
                continue
            raw_name, _, raw_value = piece.partition("=")
            name, value = _decode(raw_name), _decode(raw_value)
            if name is None or value is None:
                return False
            if name in self._fixed:
                if value != self._fixed[name]:
                    return False
                seen.add(name)
            elif name in variables:
                if name in seen or not _assign(values, name, value):
                    return False  # ?x=1&x=2 names two values for one variable
                seen.add(name)
            # Any other parameter is not the template's business: it is ignored, as web frameworks do.
        return all(name in seen for name in self._fixed)

    # -- compilation ----------------------------------------------------------------------------------------------

    def _compile(self) -> re.Pattern[str]:
        parts = self._parts
        query_start = next((i for i, part in enumerate(parts) if _opens(part, "?")), None)
        fragment_start = next((i for i, part in enumerate(parts) if _opens(part, "#")), len(parts))
        if query_start is not None and query_start < fragment_start:
            query = self._query_section(parts[query_start:fragment_start])
            if query is not None:
                self._query, self._fixed, before = query
                # The literal that opens the query may start with path text: "list?fixed=yes" keeps "list".
                prefix = [*parts[:query_start], before] if before else list(parts[:query_start])
                question = r"\?(?P<query>[^#]*)" if self._fixed else r"(?:\?(?P<query>[^#]*))?"
                pattern = (
                    self._pattern(prefix, query_start, fragment_start)
                    + question
                    + self._pattern(parts[fragment_start:], query_start, fragment_start, offset=fragment_start)
                )
                return re.compile(pattern, re.DOTALL)
        return re.compile(self._pattern(parts, query_start, fragment_start), re.DOTALL)

    def _query_section(self, section: list[Any]) -> tuple[tuple[str, ...], dict[str, str], str] | None:
        """``(query variables, fixed parameters, text before the '?')`` when the query holds nothing but query
        expressions and literal ``name=value`` pairs; None sends the template to in-order matching instead."""
        names: dict[str, None] = {}
        literal: list[str] = []
        before = ""
        for index, part in enumerate(section):
            if isinstance(part, _Expression):
                # Only the opener may be {?...}; after it, {&...} expressions add parameters.
                if part.operator != ("?" if index == 0 else "&"):
                    return None
                names.update(dict.fromkeys(part.names))
                literal.append("&")
            elif index == 0:
                before, _, rest = part.partition("?")
                literal.append(rest)
            elif isinstance(section[index - 1], _Expression) and not part.startswith("&"):
                return None  # "{?x}y=1" would run into the value of x
            else:
                literal.append(part)
        fixed: dict[str, str] = {}
        for piece in "".join(literal).split("&"):
            if not piece:
                continue
            raw_name, _, raw_value = piece.partition("=")
            name, value = _decode(raw_name), _decode(raw_value)
            if name is None or value is None or "?" in piece or name in names or name in fixed:
                return None
            fixed[name] = value
        return tuple(names), fixed, before

    def _pattern(self, parts: list[Any], query_start: int | None, fragment_start: int, offset: int = 0) -> str:
        out: list[str] = []
        for index, part in enumerate(parts, start=offset):
            if isinstance(part, str):
                out.append(re.escape(part))
                continue
            query_follows = query_start is not None and query_start > index
            fragment_follows = fragment_start > index and fragment_start < len(self._parts)
            first = _OPERATORS[part.operator][0]
            body = f"(?P<{part.group}>{_value_class(part, query_follows, fragment_follows)}*)"
            out.append(f"(?:{re.escape(first)}{body})?" if first else body)
        return "".join(out)


def _opens(part: Any, delimiter: str) -> bool:
    """Whether ``part`` starts the query (``?``) or fragment (``#``) of the URIs the template expands to."""
    if isinstance(part, _Expression):
        return part.operator == delimiter
    return delimiter in part


def _value_class(part: _Expression, query_follows: bool, fragment_follows: bool) -> str:
    """The characters an expression's expansion (after its first character) may hold in a URI."""
    operator = part.operator
    if operator in ("+", "#"):
        stop = ("?" if query_follows and operator == "+" else "") + ("#" if fragment_follows else "")
        return f"[^{re.escape(stop)}]" if stop else "."
    if operator == "/":
        return "[^?#]" if len(part.names) > 1 else "[^/?#]"
    if operator in ("?", "&"):
        return "[^#]"
    return "[^/?#]"


def _read_expression(part: _Expression, text: str, values: Values) -> bool:
    """Split one expression's text as its operator joined it; False when it cannot be this expression."""
    _, separator, named, _, _ = _OPERATORS[part.operator]
    if named:
        for piece in text.split(separator):
            if not piece:
                continue
            raw_name, _, raw_value = piece.partition("=")
            value = _decode(raw_value)
            if raw_name not in part.names or value is None or not _assign(values, raw_name, value):
                return False
        return True
    pieces = text.split(separator) if len(part.names) > 1 else [text]
    if len(pieces) > len(part.names):
        return False
    for name, piece in zip(part.names, pieces, strict=False):
        if not piece:
            continue  # empty and undefined look the same here: absent
        value = _decode(piece)
        if value is None or not _assign(values, name, value):
            return False
    return True


def _assign(values: Values, name: str, value: str) -> bool:
    """Record a value; a variable used twice in a template must have the same value both times."""
    previous = values.setdefault(name, value)
    return previous == value


# -- percent-encoding ---------------------------------------------------------------------------------------------


def _encode(value: str, reserved: bool) -> str:
    """RFC 6570 section 3.2.1: unreserved characters stay; with ``reserved``, so do reserved ones and ``%XX``."""
    allowed = _UNRESERVED_OR_RESERVED if reserved else _UNRESERVED
    if all(char in allowed for char in value):
        return value
    out: list[str] = []
    for index, char in enumerate(value):
        if char in allowed or (reserved and char == "%" and _is_triplet(value, index)):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
    return "".join(out)


def _is_triplet(text: str, index: int) -> bool:
    return index + 2 < len(text) and text[index + 1] in _HEX and text[index + 2] in _HEX


def _decode(text: str) -> str | None:
    """Percent-decoding as UTF-8; None for bytes that are not UTF-8 (no value is made up from them)."""
    if "%" not in text:
        return text
    try:
        return re.sub(_PERCENT_RUN, lambda run: bytes.fromhex(run.group().replace("%", "")).decode("utf-8"), text)
    except UnicodeDecodeError:
        return None


# -- parsing ------------------------------------------------------------------------------------------------------


def _parse(text: str) -> list[Any]:
    """Literals (percent-encoded as the URI will carry them) and expressions, in order."""
    parts: list[Any] = []
    literal: list[str] = []
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char == "{":
            close = text.find("}", index + 1)
            nested = text.find("{", index + 1)
            if close < 0:
                raise _error(text, f"the expression opened at column {index + 1} is never closed with '}}'")
            if 0 <= nested < close:
                raise _error(text, f"'{{' at column {nested + 1} is inside the expression opened at column {index + 1}")
            if literal:
                parts.append("".join(literal))
                literal = []
            operator, names = _parse_expression(text, index + 1, close)
            parts.append(_Expression(operator, names, f"e{len(parts)}"))
            index = close + 1
            continue
        if char == "}":
            raise _error(text, f"'}}' at column {index + 1} closes no expression")
        if char == "%":
            if not _is_triplet(text, index):
                raise _error(text, f"'%' at column {index + 1} must start a percent-encoded byte such as %20")
            literal.append(text[index : index + 3])
            index += 3
            continue
        if char in _NOT_LITERAL or "\x80" <= char <= "\x9f":
            hint = " (percent-encode it as %20)" if char == " " else ""
            raise _error(text, f"{char!r} at column {index + 1} is not allowed in a URI template{hint}")
        # Characters outside US-ASCII (IRI templates) become UTF-8 percent-escapes, as RFC 6570 expands literals.
        literal.append(char if char < "\x80" else _encode(char, reserved=True))
        index += 1
    if literal:
        parts.append("".join(literal))
    return parts


def _parse_expression(text: str, start: int, end: int) -> tuple[str, tuple[str, ...]]:
    """The operator and variable names of the expression ``text[start:end]`` (the part inside the braces)."""
    body = text[start:end]
    if not body:
        raise _error(text, f"empty expression '{{}}' at column {start}")
    operator = body[0] if body[0] in _OPERATORS else ""
    if body[0] in _FUTURE_OPERATORS:
        raise _error(text, f"operator {body[0]!r} at column {start + 1} is reserved by RFC 6570 for future use")
    column = start + len(operator)  # 0-based index of the first variable
    names: list[str] = []
    for spec in body[len(operator) :].split(","):
        names.append(_parse_varspec(text, spec, column))
        column += len(spec) + 1
    return operator, tuple(names)


def _parse_varspec(text: str, spec: str, column: int) -> str:
    """One variable name; ``column`` is the 0-based index of its first character in ``text``."""
    if not spec:
        raise _error(text, f"missing variable name at column {column + 1}")
    index = 0
    previous_dot = True  # a name may not start with '.', end with it, or hold two in a row
    while index < len(spec):
        char = spec[index]
        where = column + index + 1
        if char in _VARCHAR:
            previous_dot = False
        elif char == "%" and _is_triplet(spec, index):
            previous_dot = False
            index += 2
        elif char == "." and not previous_dot:
            previous_dot = True
        elif char == "*":
            raise _error(text, f"the explode modifier '*' at column {where} is RFC 6570 level 4; {_LEVELS}")
        elif char == ":":
            raise _error(text, f"the prefix modifier ':' at column {where} is RFC 6570 level 4; {_LEVELS}")
        else:
            raise _error(text, f"{char!r} at column {where} is not allowed in a variable name (A-Z a-z 0-9 _ .)")
        index += 1
    if previous_dot:
        raise _error(text, f"a variable name cannot end with '.' (column {column + len(spec)})")
    return spec


_LEVELS = "tooldeck supports levels 1-3 (use {+name} for a value that may contain '/')"


def _error(text: str, problem: str) -> RegistrationError:
    return RegistrationError(f"invalid URI template {text!r}: {problem}")
