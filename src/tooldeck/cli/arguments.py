"""The client commands' words: where the server is (TARGET, ``--url`` or ``-- command``), which tool, prompt or URI,
and the arguments (``key=value`` converted through the tool's inputSchema, ``key:=<json>``, or one JSON object).

The grammar has no ambiguity because an argument always shows itself: it contains ``=`` (``key=value``,
``key:=json``) or starts with ``{`` (a JSON object; ``[`` too, to be refused with a reason); a TARGET, a tool name
or a prompt name never does. Of the other words, the last is the tool (prompt, URI) and the one before it, if any,
the TARGET.
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import TargetError


def is_argument(token: str) -> bool:
    return "=" in token or token.lstrip().startswith(("{", "["))  # "[": a JSON array, refused with a reason


def split_arguments(words: list[str]) -> tuple[list[str], list[str]]:
    """``words`` as (names, argument tokens). Arguments come after the names: a name after one is a mistake."""
    names: list[str] = []
    arguments: list[str] = []
    for word in words:
        if is_argument(word):
            arguments.append(word)
        elif arguments:
            raise TargetError(
                f"{word!r} comes after the arguments: give TARGET and the name first, then key=value arguments"
            )
        else:
            names.append(word)
    return names, arguments


# --- tool arguments -------------------------------------------------------------------------------------------


def tool_arguments(tokens: list[str], tool: dict[str, Any]) -> dict[str, Any]:
    """The arguments object for ``tool`` from ``key=value``, ``key:=<json>`` and JSON object tokens, in order (a later
    key wins). ``key=value`` is converted to the type the inputSchema gives the parameter."""
    schema = tool.get("inputSchema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True if not properties else None)
    arguments: dict[str, Any] = {}
    for token in tokens:
        if not ("=" in token and not token.lstrip().startswith(("{", "["))):
            arguments.update(_json_object(token))
            continue
        key, raw, value = _split(token)
        if key in properties:
            prop = properties[key]
        elif extra is True or isinstance(extra, dict):
            prop = extra if isinstance(extra, dict) else {}
        else:
            known = ", ".join(properties) or "none"
            raise TargetError(f"{tool['name']} has no parameter {key!r} (parameters: {known})")
        arguments[key] = _json(key, value) if raw else convert(key, value, prop, schema)
    return arguments


def prompt_arguments(tokens: list[str], prompt: dict[str, Any]) -> dict[str, str]:
    """The arguments of ``prompt`` (strings, as prompts/get takes them) from the same tokens."""
    names = [a["name"] for a in prompt.get("arguments") or ()]
    arguments: dict[str, Any] = {}
    for token in tokens:
        if "=" in token and not token.lstrip().startswith(("{", "[")):
            key, raw, value = _split(token)
            given: dict[str, Any] = {key: _json(key, value) if raw else value}
        else:
            given = _json_object(token)
        for key, value in given.items():
            if key not in names:
                raise TargetError(
                    f"prompt {prompt['name']} has no argument {key!r} (arguments: {', '.join(names) or 'none'})"
                )
            if not isinstance(value, str):
                raise TargetError(f"{key}: prompt arguments are strings; write {key}=... rather than JSON")
        arguments.update(given)
    return arguments


def _split(token: str) -> tuple[str, bool, str]:
    """``key=value`` -> (key, False, value); ``key:=json`` -> (key, True, json)."""
    key, _, value = token.partition("=")
    raw = key.endswith(":")
    key = key[:-1] if raw else key
    if not key:
        raise TargetError(f"{token!r}: an argument needs a name, like x=3 or x:=[1, 2]")
    return key, raw, value


def _json(key: str, text: str) -> Any:
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise TargetError(f"{key}:={text}: not valid JSON ({exc}); quote strings, like {key}:='\"text\"'") from None


def _json_object(token: str) -> dict[str, Any]:
    import orjson

    try:
        value = orjson.loads(token)
    except orjson.JSONDecodeError as exc:
        raise TargetError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise TargetError("arguments must be a JSON object, like '{\"a\": 1}', or key=value words")
    return value


# --- converting key=value -------------------------------------------------------------------------------------

_ORDER = ("null", "boolean", "integer", "number", "array", "object", "string")


def convert(key: str, text: str, prop: dict[str, Any], root: dict[str, Any]) -> Any:
    """``text`` as the JSON value ``prop`` asks for: numbers and integers parsed, true/false, arrays and objects
    read as JSON, strings as they are. A union tries each of its types, the string last."""
    prop = _resolve(prop, root)
    if "const" in prop or "enum" in prop:
        choices = [prop["const"]] if "const" in prop else list(prop["enum"])
        for choice in choices:
            if choice == text or (not isinstance(choice, str) and _attempt(text, _type_of(choice)) == (True, choice)):
                return choice
        wanted = " | ".join(str(c) if isinstance(c, str) else _dumps(c) for c in choices)
        raise TargetError(f"{key}={text}: {key} is one of {wanted}")
    kinds = _kinds(prop, root)
    if not kinds:  # no type given: a JSON value if the text is one, else the text
        ok, value = _attempt(text, "json")
        return value if ok else text
    for kind in sorted(kinds, key=lambda k: _ORDER.index(k) if k in _ORDER else len(_ORDER)):
        ok, value = _attempt(text, kind)
        if ok:
            return value
    wanted = " or ".join(_WANTED.get(k, k) for k in kinds)
    raise TargetError(f"{key}={text}: {key} takes {wanted}")


_WANTED = {
    "integer": "an integer, like 3",
    "number": "a number, like 2.5",
    "boolean": "true or false",
    "array": "a JSON array, like '[1, 2]'",
    "object": "a JSON object, like '{\"a\": 1}'",
    "null": "null",
}


def _kinds(prop: dict[str, Any], root: dict[str, Any]) -> list[str]:
    kind = prop.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    kinds: list[str] = []
    for alternative in (*prop.get("anyOf", ()), *prop.get("oneOf", ())):
        if isinstance(alternative, dict):
            resolved = _resolve(alternative, root)
            if not (found := _kinds(resolved, root)) and ("enum" in resolved or "const" in resolved):
                found = ["json", "string"]
            kinds.extend(k for k in found if k not in kinds)
    return kinds


def _resolve(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A local ``$ref`` (``#/$defs/X``) followed, a few levels deep at most."""
    for _ in range(8):
        ref = prop.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return prop
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return prop
        prop = target
    return prop


def _attempt(text: str, kind: str) -> tuple[bool, Any]:
    import orjson

    if kind == "string":
        return True, text
    if kind == "boolean":
        lowered = text.strip().lower()
        return (lowered in ("true", "false")), lowered == "true"
    if kind == "null":
        return text.strip() == "null", None
    if kind == "integer":
        try:
            return True, int(text.strip().replace("_", ""))
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return False, None
        return (number.is_integer(), int(number)) if number == number and abs(number) != float("inf") else (False, None)
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, None
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool), value
    if kind == "array":
        return isinstance(value, list), value
    if kind == "object":
        return isinstance(value, dict), value
    return True, value  # "json": any JSON value


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "json"


def _dumps(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
