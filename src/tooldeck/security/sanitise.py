"""The output sanitiser: what a tool (or a resource, a prompt) hands the client is made safe to show. Its text is
cleaned (``security/text.py``: escape sequences, controls, invisible characters, lone CRs; JSON text string by
string); links and binary blocks are checked; tool results have a size cap (``security/oversize.py``).

What is cleaned, by channel:

- results: a CallToolResult's content blocks and ``structuredContent``, a ReadResourceResult's ``contents``, a
  GetPromptResult's ``messages`` and ``description`` (``sanitise_result``);
- listings: the titles and descriptions of tools, prompts, resources and templates, and of their schemas
  (``sanitise_listing_text``);
- what a running tool sends besides its result (``sanitise_message``): log notifications (``data``, its strings and
  object keys at any depth, and ``logger``), progress messages, its questions to the user (an elicitation's
  ``message``, and the titles, descriptions and enum labels of its ``requestedSchema``; a URL's unsafe characters
  percent-encoded) and to the client's model (a sampling request's messages, system prompt and tools). In a 2025
  session these are notifications and requests on the session; in a 2026-07-28 request the logs and progress go on
  the request's stream and the questions in its input-required result: the same params either way.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Callable, Collection
from typing import Any

import orjson

from ..protocol.paths import preview
from .oversize import limit, too_large_result, truncate_result
from .text import _UNSAFE, ERROR_CHARS, clean_error, clean_json, clean_string, clean_text, may_need_cleaning

__all__ = ["ALLOWED_SCHEMES", "ERROR_CHARS", "clean_error", "clean_json", "clean_string", "clean_text",
           "sanitise_block", "sanitise_listing_text", "sanitise_message", "sanitise_result", "too_large_result",
           "truncate_result"]  # fmt: skip

ALLOWED_SCHEMES = frozenset({"https", "http", "file"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
# RFC 6838 type/subtype, with RFC 2045 parameters.
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MIME = re.compile(rf"({_NAME})/{_NAME}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|\"[^\"\\\r\n]*\"))*")
_MAX_NESTING = 256  # deeper than orjson will encode: such a result fails at the transport anyway


# --- results ------------------------------------------------------------------------------------------------------


def sanitise_result(
    result: dict[str, Any],
    *,
    max_bytes: int | None = None,
    oversize: str = "truncate",
    schemes: Collection[str] | Callable[[], Collection[str]] = ALLOWED_SCHEMES,
) -> dict[str, Any]:
    """A result with its text cleaned and its blocks checked: a CallToolResult (``content``, ``structuredContent``),
    a ReadResourceResult (``contents``), a GetPromptResult (``messages``, ``description``) or a CompleteResult
    (``completion.values``).

    Texts are cleaned with ``clean_string`` (JSON text string by string: the text block of a structured result
    still parses, to the cleaned ``structuredContent``). A resource link whose URI scheme is not in ``schemes``
    (lower case), an image or audio block whose data is not base64 or whose ``mimeType`` is not an ``image/*`` /
    ``audio/*`` MIME type, and a blob that is not base64 become text blocks that say what was removed and why. A
    CallToolResult that encodes to more than ``max_bytes`` is cut (``oversize="truncate"``) or replaced by an
    isError result (``"error"``): see ``security/oversize.py``.

    Returns ``result`` itself when nothing changed; otherwise a new dict (``result`` is never modified). ``schemes``
    may be a function that gives them, called only for a result that has links to check.
    """
    if oversize not in ("truncate", "error"):
        raise ValueError(f"oversize: expected 'truncate' or 'error', got {oversize!r}")
    return sanitise(result, max_bytes, oversize, schemes)


def sanitise(result: dict[str, Any], max_bytes: int | None, oversize: str,
             schemes: Collection[str] | Callable[[], Collection[str]]) -> dict[str, Any]:  # fmt: skip
    """``sanitise_result`` for arguments already checked (``oversize`` is "truncate" or "error"): what the
    pipeline's sanitiser step calls, positionally, on every result."""
    out = result
    content = result.get("content")
    if type(content) is list:
        for block in content:  # (three times as fast as all() over a generator, on every result)
            if type(block) is not dict or block.get("type") != "text":
                break
        else:
            # Text only (nothing to check but the text): one encoding of the whole result and one byte search
            # tell whether anything needs cleaning; the encoding's length is the size the limit checks.
            try:
                encoded = orjson.dumps(result)
            except TypeError:
                encoded = None  # not JSON (a lone surrogate, say): the long way, which says what is wrong
            # Plain ASCII with no escape and no DEL (most results) asks no more (may_need_cleaning's first test).
            if encoded is not None and (
                (encoded.isascii() and 0x5C not in encoded and 0x7F not in encoded) or not may_need_cleaning(encoded)
            ):
                return result if max_bytes is None else limit(result, max_bytes, oversize, len(encoded))
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
            out = limit(out, max_bytes, oversize)
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
        out = _clean_members(out, ("description",), clean_string)
        return out
    completion = result.get("completion")
    if type(completion) is dict and type(completion.get("values")) is list:  # a CompleteResult: a completer's words
        values = completion["values"]
        cleaned = [clean_text(value) if type(value) is str else value for value in values]
        if any(new is not old for new, old in zip(cleaned, values, strict=True)):
            out = {**out, "completion": {**completion, "values": cleaned}}
    return out


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
        return _clean_members(block, ("text",), clean_string)
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
        new = _clean_members(resource, ("text",), clean_string)
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
    return _clean_members(item, ("text",), clean_string)


def _clean_members(
    item: dict[str, Any], keys: tuple[str, ...], clean: Callable[[str], str] = clean_text
) -> dict[str, Any]:
    """``item`` with the strings under ``keys`` cleaned by ``clean``; the same object when none changed."""
    out = item
    for key in keys:
        value = item.get(key)
        if type(value) is str:
            new = clean(value)
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


# --- what a running tool sends besides its result -----------------------------------------------------------------


def sanitise_message(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The params of a notification or request a running tool sends (``notifications/message``,
    ``notifications/progress``, ``elicitation/create``, ``sampling/createMessage``) with what the user or the model
    reads cleaned (see the module docstring); other methods, and params with nothing to clean, are returned
    themselves. ``params`` is never modified."""
    if method == "notifications/message":
        data = params.get("data")
        new = clean_string(data) if type(data) is str else _clean_data(data)
        out = params if new is data else {**params, "data": new}
        return out if "logger" not in params else _clean_members(out, ("logger",))
    if method == "notifications/progress":
        return params if "message" not in params else _clean_members(params, ("message",), clean_string)
    if method == "elicitation/create":
        return _elicitation(params)
    if method == "sampling/createMessage":
        return _sampling(params)
    return params


def _clean_data(data: Any) -> Any:
    """A log notification's ``data`` other than a string: an object or array walked only when its encoding shows
    something to clean (one C encoding and a few C scans, against a walk in Python)."""
    if type(data) is dict or type(data) is list:
        try:
            if not may_need_cleaning(orjson.dumps(data)):
                return data
        except TypeError:  # not JSON (a lone surrogate, an object orjson cannot encode): walk it
            pass
        return clean_json(data)
    return data


def _elicitation(params: dict[str, Any]) -> dict[str, Any]:
    """An elicitation's message, its form's labels (values the answer is checked against stay) and its URL."""
    out = _clean_members(params, ("message",), clean_string)
    schema = params.get("requestedSchema")
    if type(schema) is dict:
        new = _clean_schema(schema, 0)
        if new is not schema:
            out = {**out, "requestedSchema": new}
    url = params.get("url")
    if type(url) is str and _URL_UNSAFE.search(url) is not None:  # percent-encoded, as a browser would send it
        out = {**out, "url": _URL_UNSAFE.sub(_percent_encoded, url)}
    return out


_URL_UNSAFE = re.compile(f"{_UNSAFE.pattern}|\\s")


def _percent_encoded(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match[0].encode("utf-8", "surrogatepass"))


def _sampling(params: dict[str, Any]) -> dict[str, Any]:
    """A sampling request's messages (each content block, or list of them), system prompt and tools."""
    out = _clean_members(params, ("systemPrompt",), clean_string)
    messages = params.get("messages")
    if type(messages) is list:
        new = _list(messages, _sampling_message)
        if new is not messages:
            out = {**out, "messages": new}
    tools = params.get("tools")
    if type(tools) is list:
        new = _list(tools, lambda tool: sanitise_listing_text(tool) if type(tool) is dict else tool)
        if new is not tools:
            out = {**out, "tools": new}
    return out


def _sampling_message(message: Any) -> Any:
    if type(message) is not dict:
        return message
    content = message.get("content")
    if type(content) is list:
        new = _list(content, sanitise_block, ALLOWED_SCHEMES)
    elif type(content) is dict:
        new = sanitise_block(content)
    else:
        return message
    return message if new is content else {**message, "content": new}


# --- listings -------------------------------------------------------------------------------------------------------

_SCHEMA_TEXT = ("title", "description")
_SCHEMA_DATA = frozenset({"const", "enum", "default", "examples"})  # values the tool compares: never changed
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def sanitise_listing_text(item: dict[str, Any]) -> dict[str, Any]:
    """A tool, prompt, resource or resource template as listed (wire form), with the words it shows a person or a
    model cleaned: ``title``, ``description``, ``annotations.title``, every ``title``/``description`` keyword (and
    ``enumNames`` label) in its ``inputSchema``/``outputSchema``, and its prompt arguments' ``title``/``description``. The same object
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
        elif key == "enumNames" and type(value) is list:  # the labels a form shows for the enum's values
            new = _list(value, lambda name: clean_text(name) if type(name) is str else name)
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
