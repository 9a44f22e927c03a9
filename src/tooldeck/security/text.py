"""Clean text: what a terminal or a model would read differently from a person is taken out of a string, of JSON
text (so that parsing it gives clean strings) and of every string in a JSON value.

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
  the known way to smuggle instructions past a reader to a model); characters that show nothing: the soft hyphen
  U+00AD, the combining grapheme joiner U+034F, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the Khmer
  inherent vowels U+17B4, U+17B5, the Mongolian vowel separator U+180E, the invisible operators U+2061-U+2064, the
  deprecated format characters U+206A-U+206F, the shorthand format controls U+1BCA0-U+1BCA3 and the musical
  formatting characters U+1D173-U+1D17A. Lone surrogates become U+FFFD.
- A lone CR (one not before a LF: the cursor goes back and the next text overwrites the line) and the line and
  paragraph separators U+2028, U+2029 become LF, so every line stays visible. A CRLF stays.
- ZWJ (U+200D) is kept where it joins an emoji (the character before it is an emoji, U+FE0F or a skin tone, the
  one after it an emoji: woman ZWJ laptop, white flag U+FE0F ZWJ rainbow) and removed everywhere else. Tags are
  likewise kept in the one place they are text: a subdivision flag (U+1F3F4, two to seven tag letters or digits,
  U+E007F: the flag of Scotland).

The output has no ESC and none of the characters above (outside those two emoji forms and CRLF), and cleaning it
again changes nothing. Text with nothing to remove is returned as the same object, after ``isprintable()`` and
``isascii()`` (printable text that is not ASCII: seven finds for the printable fillers; text with line breaks: a
byte ``translate`` and two counts if it is ASCII, one regex search if not).

JSON text (a structured result's text block, a dict a tool returned, JSON a tool wrote itself) escapes controls as
``\\u001b``: ``clean_string`` reads such text as JSON and cleans each string in it as decoded, so a client that
parses the text gets clean strings, and the text stays valid JSON (cleaning it as plain text could cut a sequence
across a closing quote).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

ERROR_CHARS = 4096

# Emoji a ZWJ may follow or precede (the Extended_Pictographic blocks, roughly; a near miss only drops one ZWJ).
_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935\u2b05-\u2b55"
    "\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_TAG_TEXT = "\U000e0030-\U000e0039\U000e0061-\U000e007a"  # tag digits and lower-case tag letters
# Fillers that str.isprintable() accepts (Mn, Lo): the only characters removed from text that passes it (_has_hidden
# looks for each by name).
_PRINTABLE_HIDDEN = "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
# The characters that are removed wherever they are. All but _PRINTABLE_HIDDEN are Cc, Cf or Cs characters.
_DROPPED = (
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u2064"
    f"\u2066-\u206f\ufeff\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f{_PRINTABLE_HIDDEN}"
)
_SEPARATORS = "\u2028\u2029"  # Zl, Zp: not printable either
# What makes a string need cleaning: a character removed, a ZWJ (kept only in an emoji), a separator, a surrogate,
# a lone CR.
_UNSAFE = re.compile(f"[{_DROPPED}\u200d{_SEPARATORS}\ud800-\udfff]|\r(?!\n)")
_LONE_CR = re.compile("\r(?!\n)")
_LINE_BREAK = re.compile(f"\r(?!\n)|[{_SEPARATORS}]")
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
_PLAIN_ASCII = bytes([9, 10, 13, *range(0x20, 0x7F)])
_MAX_NESTING = 256  # deeper than orjson will encode: such a value fails at the transport anyway


def clean_text(text: str) -> str:
    """``text`` without escape sequences, controls and invisible characters (see the module docstring)."""
    if text.isprintable():  # stops at the first newline, so this costs little when it fails
        if text.isascii() or not _has_hidden(text):  # isascii() is a flag, not a scan
            return text
    elif text.isascii():  # C loops: copy the bytes, delete the plain ones; count CRs and CRLFs
        if not text.encode("ascii").translate(None, _PLAIN_ASCII) and (
            "\r" not in text or text.count("\r") == text.count("\r\n")
        ):
            return text
    elif _UNSAFE.search(text) is None:
        return text
    out = _SEQUENCE.sub(r"\g<keep>", text)
    if "\r" in out or "\u2028" in out or "\u2029" in out:  # after the removals: a CR they left before a LF stays
        out = _LINE_BREAK.sub("\n", out)
    if _SURROGATE.search(out) is not None:
        out = _SURROGATE.sub("\ufffd", out)
    return out


def _has_hidden(text: str) -> bool:
    """Whether printable ``text`` holds one of the fillers str.isprintable() accepts: seven C searches cost a third
    of one regex search on short text, and far less on long text."""
    return ("\u034f" in text or "\u115f" in text or "\u1160" in text or "\u17b4" in text or "\u17b5" in text
            or "\u3164" in text or "\uffa0" in text)  # fmt: skip


def clean_error(message: str, limit: int = ERROR_CHARS) -> str:
    """An error message fit to show: cleaned, and cut to ``limit`` characters with "…"."""
    message = clean_text(message)
    return message if len(message) <= limit else message[: limit - 1].rstrip("\u200d") + "…"


# --- JSON text -----------------------------------------------------------------------------------------------------

# In text: an escape that may stand for something clean_text changes (\b, \f, a lone \r, any \uXXXX).
_JSON_ESCAPE = re.compile(r"\\[bfru]")
_JSON_WHITESPACE = " \t\n\r"
# A string token of (valid) JSON text.
_STRING_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_JSON = object()


def clean_string(text: str) -> str:
    """``clean_text`` for a string that may be JSON text: a JSON document is cleaned string by string (keys too),
    as decoded, so it stays valid JSON and parsing it gives clean strings; anything else is ``clean_text(text)``.
    The same object when nothing changed."""
    if text.isascii() and "\\" not in text and text.isprintable():  # the common case, without a call
        return text
    cleaned = clean_text(text)
    if cleaned is text and ("\\" not in text or _JSON_ESCAPE.search(text) is None):
        return text  # nothing to remove, and no escape that could decode to something to remove
    start = text.lstrip(_JSON_WHITESPACE)[:1]
    if start and start in '{["' and _decode(text) is not _NOT_JSON:
        new = _clean_json_text(text)
        return text if new == text else new  # a false alarm: an escape that stood for nothing removed
    return cleaned


def _decode(text: str) -> Any:
    """The JSON value of ``text``, as a lenient client reads it (lone surrogates, NaN), or _NOT_JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)  # what orjson refuses and JavaScript's JSON.parse takes: a lone \ud800
        except (ValueError, RecursionError):
            return _NOT_JSON


def _clean_json_text(text: str) -> str:
    """Valid JSON ``text`` with each string token that needs it replaced by its cleaned value's encoding; a lone CR
    between tokens (JSON whitespace) becomes a LF. Nothing else changes: formatting and number spellings stay."""
    out: list[str] = []
    last = 0
    for match in _STRING_TOKEN.finditer(text):
        gap = text[last : match.start()]
        out.append(_LONE_CR.sub("\n", gap) if "\r" in gap else gap)
        token = match[0]
        value = _decode(token) if "\\" in token else token[1:-1]  # no escape: the token's inside is its value
        cleaned = clean_string(value)
        out.append(token if cleaned is value else orjson.dumps(cleaned).decode())
        last = match.end()
    tail = text[last:]
    out.append(_LONE_CR.sub("\n", tail) if "\r" in tail else tail)
    return "".join(out)


def clean_json(value: Any, _depth: int = 0) -> Any:
    """A JSON value with every string cleaned by ``clean_string``, object keys included; the same object when
    nothing changed."""
    if type(value) is str:
        return clean_string(value)
    if _depth > _MAX_NESTING:
        return value
    if isinstance(value, dict):
        changed = None
        for key, item in value.items():
            new_key = clean_string(key) if type(key) is str else key
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


# --- the fast pre-check of encoded JSON ----------------------------------------------------------------------------

# In a value encoded by orjson (UTF-8, controls escaped), what may begin something clean_string changes: DEL, or the
# lead byte of a C1 control or U+00AD (C2), of U+061C (D8), of U+2000-U+2FFF (E2), of U+F000-U+FFFF (EF) or of the
# tags (F3); the lead byte of a filler elsewhere (U+034F: CD; U+115F, U+1160, U+17B4, U+17B5, U+180E: E1; U+3164:
# E3; the shorthand and musical ones: F0) followed by the filler's next bytes; an escaped C0 control (\u00XX, \b,
# \f, a \r not before \n), or a string holding an escape of its own (\\u, \\r: JSON text inside a string). None
# of these: nothing in the value needs cleaning. A false alarm only sends the value the long way round. One
# translate finds the lead bytes (Latin, Greek, Cyrillic, CJK ideographs and Hangul syllables have none).
_NOT_LEAD = bytes(byte for byte in range(256) if byte not in b"\x7f\xc2\xd8\xe2\xef\xf3\xcd\xe1\xe3\xf0")
_OTHER_STARTS = (  # a lead byte, and the first bytes of the fillers under it (F0: of the two blocks that hold them)
    (0xCD, (b"\xcd\x8f",)),
    (0xE1, (b"\xe1\x85\x9f", b"\xe1\x85\xa0", b"\xe1\x9e\xb4", b"\xe1\x9e\xb5", b"\xe1\xa0\x8e")),
    (0xE3, (b"\xe3\x85\xa4",)),
    (0xF0, (b"\xf0\x9b\xb2", b"\xf0\x9d\x85")),
)
_ESCAPED = re.compile(rb"\\[bfu]|\\r(?!\\n)")


def may_need_cleaning(encoded: bytes) -> bool:
    """Whether JSON that orjson encoded may hold something ``clean_json`` would change (see above): a few C loops."""
    if encoded.isascii() and 0x5C not in encoded and 0x7F not in encoded:  # ints: a memchr (bytes: a raised error)
        return False  # plain ASCII with no escape and no DEL (most results): three C loops, no copy
    leads = encoded.translate(None, _NOT_LEAD)  # the lead bytes above, in order
    if leads:
        if 0xC2 in leads or 0xE2 in leads or 0xEF in leads or 0x7F in leads or 0xD8 in leads or 0xF3 in leads:
            return True  # (an int: a memchr each)
        for lead, starts in _OTHER_STARTS:  # only the others: is one of them a filler's? (about 1 ns a byte)
            if lead in leads:
                for start in starts:
                    if start in encoded:
                        return True
    return 0x5C in encoded and _ESCAPED.search(encoded) is not None
