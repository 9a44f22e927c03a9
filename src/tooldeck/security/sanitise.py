"""The output sanitiser: text a tool (or a resource, a prompt) hands back to the client is stripped of what a
terminal or a model would read differently from a person: escape sequences, control characters, bidi and
zero-width formatting, and invisible Unicode tags; links and binary blocks are checked; results have a size cap.

What ``clean_text`` removes, and how:

- CSI (``ESC [`` or 0x9B, parameters 0x30-0x3F, intermediates 0x20-0x2F, a final byte 0x40-0x7E): the whole
  sequence. Without its final byte, what was read as parameters goes (at the end of the string: all of it).
- OSC (``ESC ]`` or 0x9D) up to BEL or ST (``ESC \\`` or 0x9C): the whole sequence, so an OSC 8 hyperlink loses its
  target and keeps the visible text between its two sequences. DCS, SOS, PM, APC (``ESC P/X/^/_``, 0x90/0x98/
  0x9E/0x9F) up to ST. A string sequence without its terminator goes to the end of the text (or to the next ESC,
  which then starts a sequence of its own): half a sequence is never passed on.
- Any other ``ESC``: with its intermediates and final byte (``ESC ( B``, ``ESC 7``, ``ESC \\``).
- C0 controls except tab, LF and CR; DEL; C1 controls 0x80-0x9F; bidi embeddings, overrides, isolates and marks
  (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C); zero-width characters (U+200B, U+200C, U+2060, U+FEFF);
  the interlinear annotation characters U+FFF9-U+FFFB; Unicode tags U+E0000-U+E007F (they spell invisible ASCII,
  the known way to smuggle instructions past a reader to a model). Lone surrogates become U+FFFD.
- ZWJ (U+200D) is kept where it joins an emoji (the character before it is an emoji, U+FE0F or a skin tone, the
  one after it an emoji: woman ZWJ laptop, white flag U+FE0F ZWJ rainbow) and removed everywhere else. Tags are
  likewise kept in the one place they are text: a subdivision flag (U+1F3F4, two to seven tag letters or digits,
  U+E007F: the flag of Scotland).

The output has no ESC and none of the characters above (outside those two emoji forms), and cleaning it again
changes nothing. Text with nothing to remove is returned as the same object, after ``isprintable()`` (and, for
text with line breaks, a byte ``translate`` if it is ASCII, one regex search if not).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Collection
from typing import Any

import orjson

from ..protocol.paths import preview

ALLOWED_SCHEMES = frozenset({"https", "http", "file"})
ERROR_CHARS = 4096

# Emoji a ZWJ may follow or precede (the Extended_Pictographic blocks, roughly; a near miss only drops one ZWJ).
_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935\u2b05-\u2b55"
    "\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_TAG_TEXT = "\U000e0030-\U000e0039\U000e0061-\U000e007a"  # tag digits and lower-case tag letters
# The characters that are removed wherever they are, and those ("unsafe") that make a string need cleaning. Every
# one is a Cc, Cf or Cs character, so text for which str.isprintable() is true (a fast C loop) has none of them.
_DROPPED = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b\u200c\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f"
)
_UNSAFE = re.compile(f"[{_DROPPED}\u200d\ud800-\udfff]")
_SEQUENCE = re.compile(
    f"(?P<keep>\U0001f3f4[{_TAG_TEXT}]{{2,7}}\U000e007f)"  # a subdivision flag
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # any other escape sequence, or a lone ESC
    f"|\u200d(?![{_EMOJI}])|(?<![{_EMOJI}\ufe0f])\u200d"  # a ZWJ that joins no emoji
    f"|[{_DROPPED}]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# In a result encoded by orjson (UTF-8, controls escaped), what may begin something clean_text removes: DEL, or the
# lead byte of a C1 control (C2), of U+061C (D8), of U+2000-U+2FFF (E2), of U+F000-U+FFFF (EF) or of the tags (F3);
# or an escaped C0 control (\u00XX, \b, \f; an escaped backslash before b or f is a false alarm). Neither: nothing
# in the result needs cleaning. A false alarm only sends the result the long way round.
_NOT_LEAD = bytes(byte for byte in range(256) if byte not in b"\x7f\xc2\xd8\xe2\xef\xf3")
_ESCAPED_CONTROL = re.compile(rb"\\u00|\\[bf]")


def _may_need_cleaning(encoded: bytes) -> bool:
    if encoded.translate(None, _NOT_LEAD):  # a C loop: what is left are the lead bytes above
        return True
    return b"\\" in encoded and _ESCAPED_CONTROL.search(encoded) is not None


_PLAIN_ASCII = bytes([9, 10, 13, *range(0x20, 0x7F)])
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# RFC 6838 type/subtype, with RFC 2045 parameters.
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MIME = re.compile(rf"({_NAME})/{_NAME}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|\"[^\"\\\r\n]*\"))*")
_MAX_NESTING = 256  # deeper than orjson will encode: such a result fails at the transport anyway


def clean_text(text: str) -> str:
    """``text`` without escape sequences, controls and invisible formatting (see the module docstring)."""
    if text.isprintable():  # stops at the first newline, so this costs little when it fails
        return text
    if text.isascii():  # a flag, not a scan; then two C loops: copy the bytes, delete the plain ones
        if not text.encode("ascii").translate(None, _PLAIN_ASCII):
            return text
    elif _UNSAFE.search(text) is None:
        return text
    out = _SEQUENCE.sub(r"\g<keep>", text)
    if _SURROGATE.search(out) is not None:
        out = _SURROGATE.sub("\ufffd", out)
    return out


def clean_error(message: str, limit: int = ERROR_CHARS) -> str:
    """An error message fit to show: cleaned, and cut to ``limit`` characters with "…"."""
    message = clean_text(message)
    return message if len(message) <= limit else message[: limit - 1].rstrip("\u200d") + "…"


def clean_json(value: Any, _depth: int = 0) -> Any:
    """A JSON value with every string cleaned, object keys included; the same object when nothing changed."""
    if type(value) is str:
        return clean_text(value)
    if _depth > _MAX_NESTING:
        return value
    if isinstance(value, dict):
        changed = None
        for key, item in value.items():
            new_key = clean_text(key) if type(key) is str else key
            new_item = clean_json(item, _depth + 1)
            if changed is None and (new_key is not key or new_item is not item):
                changed = {}
                for k, v in value.items():  # the members before this one, unchanged
                    if k is key:
                        break
                    changed[k] = v
            if changed is not None:
                changed[new_key] = new_item
        return value if changed is None else changed
    if isinstance(value, list):
        for index, item in enumerate(value):
            new_item = clean_json(item, _depth + 1)
            if new_item is not item:
                return [*value[:index], new_item, *(clean_json(v, _depth + 1) for v in value[index + 1 :])]
        return value
    return value


# --- results ------------------------------------------------------------------------------------------------------


def sanitise_result(
    result: dict[str, Any],
    *,
    max_bytes: int | None = None,
    oversize: str = "truncate",
    schemes: Collection[str] | Callable[[], Collection[str]] = ALLOWED_SCHEMES,
) -> dict[str, Any]:
    """A result with its text cleaned and its blocks checked: a CallToolResult (``content``, ``structuredContent``),
    a ReadResourceResult (``contents``) or a GetPromptResult (``messages``, ``description``).

    A resource link whose URI scheme is not in ``schemes`` (lower case), an image or audio block whose data is not
    base64 or whose ``mimeType`` is not an ``image/*`` / ``audio/*`` MIME type, and a blob that is not base64 become
    text blocks that say what was removed and why. A CallToolResult that encodes to more than ``max_bytes`` is cut
    (``oversize="truncate"``, see ``truncate_result``) or replaced by an isError result (``"error"``).

    Returns ``result`` itself when nothing changed; otherwise a new dict (``result`` is never modified). ``schemes``
    may be a function that gives them, called only for a result that has links to check.
    """
    if oversize not in ("truncate", "error"):
        raise ValueError(f"oversize: expected 'truncate' or 'error', got {oversize!r}")
    out = result
    content = result.get("content")
    if type(content) is list:
        if _text_only(content):
            # Text only (nothing to check but the text): one encoding of the whole result and one byte search
            # tell whether anything needs cleaning; the encoding's length is the size the limit checks.
            try:
                encoded = orjson.dumps(result)
            except TypeError:
                encoded = None  # not JSON (a lone surrogate, say): the long way, which says what is wrong
            if encoded is not None and not _may_need_cleaning(encoded):
                if max_bytes is None or len(encoded) <= max_bytes:
                    return result
                return too_large_result(len(encoded), max_bytes) if oversize == "error" else truncate_result(
                    result, len(encoded), max_bytes)  # fmt: skip
        if callable(schemes):
            schemes = schemes()
        new = _blocks(content, schemes)
        if new is not content:
            out = {**out, "content": new}
        structured = result.get("structuredContent")
        if structured is not None:
            new = clean_json(structured)
            if new is not structured:
                out = {**out, "structuredContent": new}
        if max_bytes is not None:
            out = _limit(out, max_bytes, oversize)
        return out
    contents = result.get("contents")
    if type(contents) is list:
        new = _list(contents, _resource_contents)
        if new is not contents:
            out = {**out, "contents": new}
    messages = result.get("messages")
    if type(messages) is list:
        if callable(schemes):
            schemes = schemes()
        new = _list(messages, _message, schemes)
        if new is not messages:
            out = {**out, "messages": new}
        out = _clean_members(out, ("description",))
    return out


def _text_only(blocks: list[Any]) -> bool:
    for block in blocks:  # noqa: SIM110 - three times as fast as all() over a generator, on every result
        if type(block) is not dict or block.get("type") != "text":
            return False
    return True


def _list(items: list[Any], sanitise: Any, *args: Any) -> list[Any]:
    """``[sanitise(item, *args) for item in items]``, or ``items`` itself if that changes nothing."""
    for index, item in enumerate(items):
        new = sanitise(item, *args)
        if new is not item:
            return [*items[:index], new, *(sanitise(item, *args) for item in items[index + 1 :])]
    return items


def _blocks(blocks: list[Any], schemes: Collection[str]) -> list[Any]:
    return _list(blocks, sanitise_block, schemes)


def _message(message: Any, schemes: Collection[str]) -> Any:
    if type(message) is not dict or type(message.get("content")) is not dict:
        return message
    content = sanitise_block(message["content"], schemes)
    return message if content is message["content"] else {**message, "content": content}


def sanitise_block(block: Any, schemes: Collection[str] = ALLOWED_SCHEMES) -> Any:
    """One content block, cleaned or replaced by a text block saying why it was removed; the same object if fine."""
    if type(block) is not dict:
        return block
    kind = block.get("type")
    if kind == "text":
        return _clean_members(block, ("text",))
    if kind == "image" or kind == "audio":
        problem = _binary_problem(block.get("data"), "data") or _mime_problem(block.get("mimeType"), kind)
        return block if problem is None else _removed(block, kind, problem)
    if kind == "resource_link":
        problem = _link_problem(block.get("uri"), schemes)
        if problem is not None:
            return _removed(block, "link", problem)
        return _clean_members(block, ("name", "title", "description"))
    if kind == "resource" and type(block.get("resource")) is dict:
        resource = block["resource"]
        problem = _uri_problem(resource.get("uri"))
        if problem is None and "blob" in resource:
            problem = _binary_problem(resource["blob"], "blob")
        if problem is not None:
            return _removed(block, "resource", problem)
        new = _clean_members(resource, ("text",))
        return block if new is resource else {**block, "resource": new}
    return block


def _resource_contents(item: Any) -> Any:
    """One item of a ReadResourceResult's ``contents``: text cleaned; a blob that is not base64 replaced."""
    if type(item) is not dict:
        return item
    if "blob" in item:
        problem = _binary_problem(item["blob"], "blob")
        if problem is not None:
            return {"uri": item.get("uri"), "text": f"[resource removed: {problem}]"}
        return item
    return _clean_members(item, ("text",))


def _clean_members(item: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out = item
    for key in keys:
        value = item.get(key)
        if type(value) is str:
            new = clean_text(value)
            if new is not value:
                if out is item:
                    out = dict(item)
                out[key] = new
    return out


def _removed(block: dict[str, Any], what: str, problem: str) -> dict[str, Any]:
    """The text block that stands for a removed one; it keeps the annotations (who the content was meant for)."""
    text: dict[str, Any] = {"type": "text", "text": f"[{what} removed: {problem}]"}
    if type(block.get("annotations")) is dict:
        text["annotations"] = block["annotations"]
    return text


def _binary_problem(data: Any, name: str) -> str | None:
    if type(data) is not str:
        return f"{name} is not a base64 string"
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: a character outside ASCII
        return f"{name} is not valid base64 ({exc})"
    return None


def _mime_problem(mime_type: Any, family: str) -> str | None:
    if type(mime_type) is not str:
        return f"mimeType is not a string but {type(mime_type).__name__}"
    match = _MIME.fullmatch(mime_type)
    if match is None:
        return f"mimeType {clean_text(preview(mime_type))} is not a valid MIME type"  # a control shows as \u001b
    if match[1].lower() != family:
        return f"mimeType {preview(mime_type)} is not an {family}/* type"
    return None


def _uri_problem(uri: Any) -> str | None:
    if type(uri) is not str:
        return "the URI is not a string"
    if _UNSAFE.search(uri) is not None:
        return "the URI holds control or invisible formatting characters"
    return None


def _link_problem(uri: Any, schemes: Collection[str]) -> str | None:
    problem = _uri_problem(uri)
    if problem is not None:
        return problem
    match = _SCHEME.match(uri)
    if match is None:
        return f"{preview(uri)} is not an absolute URI"
    scheme = match[1].lower()
    if scheme not in schemes:
        return f"scheme {scheme!r} is not allowed"
    return None


# --- size -----------------------------------------------------------------------------------------------------------


def _limit(result: dict[str, Any], max_bytes: int, oversize: str) -> dict[str, Any]:
    try:
        size = len(orjson.dumps(result))
    except TypeError:  # not JSON at all: the transport reports that, not the size check
        return result
    if size <= max_bytes:
        return result
    if oversize == "error":
        return too_large_result(size, max_bytes)
    return truncate_result(result, size, max_bytes)


def too_large_result(size: int, max_bytes: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"Tool result too large: {size:,} bytes (limit {max_bytes:,})"}],
            "isError": True}  # fmt: skip


def truncate_result(result: dict[str, Any], size: int, max_bytes: int) -> dict[str, Any]:
    """``result`` (``size`` bytes encoded) cut to fit ``max_bytes``: the longest run of its content blocks from the
    start that fits, the last text block in it cut short, then a block "[truncated: ...]". structuredContent is
    kept if it fits beside that notice; if not, it is dropped, the notice says so and the result becomes an isError
    result (a client would otherwise hold it against the tool's outputSchema). If not even that fits, the result
    is ``too_large_result``."""
    notice = f"[truncated: the result was {size:,} bytes, the limit is {max_bytes:,}]"
    skeleton = {**result, "content": [{"type": "text", "text": notice}]}
    room = max_bytes - len(orjson.dumps(skeleton))
    if room < 0 and "structuredContent" in result:
        notice = notice[:-1] + "; structuredContent was dropped]"
        skeleton = {key: value for key, value in result.items() if key != "structuredContent"}
        skeleton["content"] = [{"type": "text", "text": notice}]
        skeleton["isError"] = True
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
    """``block`` with the longest prefix of its text that encodes (with the comma after it) to ``room`` bytes."""
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
    return {**block, "text": text[:low].rstrip("\u200d")} if low else None


# --- listings -------------------------------------------------------------------------------------------------------

_SCHEMA_TEXT = ("title", "description")
_SCHEMA_DATA = frozenset({"const", "enum", "default", "examples"})  # values the tool compares: never changed
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def sanitise_listing_text(item: dict[str, Any]) -> dict[str, Any]:
    """A tool, prompt, resource or resource template as listed (wire form), with the words it shows a person or a
    model cleaned: ``title``, ``description``, ``annotations.title``, every ``title``/``description`` keyword in
    its ``inputSchema``/``outputSchema``, and its prompt arguments' ``title``/``description``. The same object
    when all are clean; names, URIs and schema values (``enum``, ``const``, ``default``, ``examples``) are left as
    they are (they are identifiers the caller must send back unchanged)."""
    new: Any
    out = _clean_members(item, _SCHEMA_TEXT)
    annotations = item.get("annotations")
    if type(annotations) is dict:
        new = _clean_members(annotations, ("title",))
        if new is not annotations:
            out = {**out, "annotations": new}
    for key in ("inputSchema", "outputSchema"):
        schema = item.get(key)
        if type(schema) is dict:
            new = _clean_schema(schema, 0)
            if new is not schema:
                out = {**out, key: new}
    arguments = item.get("arguments")
    if type(arguments) is list:
        new = _list(arguments, lambda a: _clean_members(a, _SCHEMA_TEXT) if type(a) is dict else a)
        if new is not arguments:
            out = {**out, "arguments": new}
    return out


def _clean_schema(schema: Any, depth: int) -> Any:
    """A JSON Schema (or a list of them) with its ``title``/``description`` keywords cleaned, wherever they are."""
    if depth > _MAX_NESTING:
        return schema
    if type(schema) is list:
        return _list(schema, _clean_schema, depth + 1)
    if type(schema) is not dict:
        return schema
    out = schema
    for key, value in schema.items():
        new: Any
        if key in _SCHEMA_DATA:
            continue
        if type(value) is str:
            new = clean_text(value) if key in _SCHEMA_TEXT else value
        elif key in _SCHEMA_MAPS and type(value) is dict:  # names -> subschemas: a property may be called "enum"
            new = value
            for name, sub in value.items():
                cleaned = _clean_schema(sub, depth + 1)
                if cleaned is not sub:
                    new = dict(value) if new is value else new
                    new[name] = cleaned
        else:
            new = _clean_schema(value, depth + 1)
        if new is not value:
            out = dict(schema) if out is schema else out
            out[key] = new
    return out
