"""The tamper-evident audit trail: one record per call (``audit_record``), written by an ``AuditSink`` into a hash
chain, and checked by ``verify``.

Arguments are never written as the client sent them. Each record holds ``arguments`` with every secret value
replaced by ``"[redacted]"`` — a property the tool's inputSchema marks ``writeOnly: true`` or ``format: "password"``
(found through nested objects, arrays, ``$ref`` and ``anyOf``/``oneOf``/``allOf``), or a key at any depth whose name
contains one of ``redact_names``, case-insensitively ("token" redacts ``api_token``, ``X-Token`` and
``max_tokens`` alike) — and ``arguments_digest``, the SHA-256 of those redacted
arguments as canonical JSON (sorted keys). The digest is of the redacted form on purpose: a digest of a password
would let anyone holding the trail test guesses against it.

    {"seq":7,"prev":"9f2c…","time":"2025-06-18T09:30:00.125Z","event":"call","request_id":3,"session":"s-1",
     "principal":"alice","auth":"jwt","issuer":"https://auth.example.com","tool":"deploy","version":"1.2.0","security_level":7,"decision":"allowed",
     "reason":null,"outcome":"ok","duration_ms":12.5,"arguments_digest":"sha256:…",
     "arguments":{"service":"web","token":"[redacted]"}}

The chain, its sinks and ``verify`` live in ``audit_chain``, ``audit_sinks`` (with ``audit_file``) and
``audit_verify``; their public names are re-exported here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from .audit_chain import GENESIS, AuditError, AuditUnavailableError, format_time_bytes, line_hash
from .audit_file import FileAuditSink
from .audit_sinks import FSYNC_MODES, AuditSink, MemoryAuditSink, StderrAuditSink
from .audit_verify import VerifyReport, verify

if TYPE_CHECKING:
    from .principal import Principal

__all__ = [
    "DECISIONS",
    "FSYNC_MODES",
    "GENESIS",
    "OUTCOMES",
    "REDACTED",
    "AuditError",
    "AuditSink",
    "AuditUnavailableError",
    "CallRecords",
    "FileAuditSink",
    "MemoryAuditSink",
    "StderrAuditSink",
    "VerifyReport",
    "arguments_digest",
    "audit_record",
    "canonical_arguments",
    "line_hash",
    "redact",
    "verify",
]

REDACTED = "[redacted]"
DECISIONS = ("allowed", "refused")
OUTCOMES = ("ok", "error", "refused", "cancelled", "timeout", "input_required", "task_created")
_NO_NAMES: frozenset[str] = frozenset()
_CANONICAL = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_COMBINATORS = ("allOf", "anyOf", "oneOf")
_REF_DEPTH = 32  # $ref hops followed from one schema: a schema whose $ref names itself ends here


def audit_record(
    *,
    time: float,
    request_id: str | int | None,
    session: str | None,
    principal: Principal | None,
    tool: str,
    version: str | None,
    security_level: int | None,
    decision: str,
    reason: str | None,
    arguments: dict[str, Any] | bytes | None,
    input_schema: dict[str, Any] | None,
    redact_names: Iterable[str] = (),
    outcome: str,
    duration_ms: float | None,
) -> dict[str, Any]:
    """One call's record, ready for ``AuditSink.write`` (which adds ``seq`` and ``prev``). ``time`` is seconds since
    the epoch; ``principal`` None is an anonymous caller; ``decision`` is the policy's ("allowed" or "refused", with
    its ``reason``); ``outcome`` is how the call ended (one of ``OUTCOMES``: a refused call's is "refused").
    ``arguments`` may come already encoded as canonical JSON (``canonical_arguments``). The record is the one the
    call auditor writes (``CallRecords`` makes both), as a dict."""
    canonical = arguments if type(arguments) is bytes else canonical_arguments(arguments)
    called = _Called(version, security_level, input_schema)
    line = CallRecords(redact_names, _own_level).encode(
        (time, request_id, session, principal, tool, called, decision, reason, outcome, duration_ms, canonical)
    )
    return orjson.loads(b"{" + line[1:])


class _Called:
    """What ``audit_record`` is told of the tool called, in the shape ``CallRecords`` reads it from a tool."""

    __slots__ = ("version", "security_level", "input_schema")

    def __init__(self, version: str | None, security_level: int | None, schema: dict[str, Any] | None) -> None:
        self.version, self.security_level, self.input_schema = version, security_level, schema


def _own_level(called: _Called) -> int | None:
    return called.security_level


_DECIDED = {word: word.encode() for word in DECISIONS}
_ENDED = {word: word.encode() for word in OUTCOMES}


def _refuse_words(decision: str, outcome: str) -> None:
    """Raise ValueError for a decision or outcome a record cannot have (or a refused call that ran)."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be 'allowed' or 'refused', got {decision!r}")
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(map(repr, OUTCOMES))}, got {outcome!r}")
    raise ValueError(f"a refused call did not run: its outcome is 'refused', not {outcome!r}")


class CallRecords:
    """Call records encoded straight to the bytes ``Chain.encode`` takes (``audit_record`` has them as a dict), without
    building a dict and encoding it.

    A session's calls repeat most of a record — session, principal, tool, version, level, whether anything needs
    redacting — so that part is encoded once per (session, principal, tool) and kept (a bounded cache).
    ``facts`` is ``(time, request_id, session, principal, tool, item, decision, reason, outcome, duration_ms,
    arguments[, trace_id])``: ``tool`` the name recorded, ``item`` what was called (its ``version`` and
    ``input_schema``), ``arguments`` canonical JSON (``canonical_arguments``), and ``trace_id`` the call's trace (32
    hex digits) when it ran inside an OpenTelemetry span."""

    _LIMIT = 4096  # sessions x principals x tools whose shared part is kept

    def __init__(self, redact_names: Iterable[str], level_of: Any) -> None:
        self.redact_names = tuple(redact_names)
        self.level_of = level_of
        self._shared: dict[tuple[Any, ...], tuple[Any, Any, bytes, bool]] = {}

    def encode(self, facts: tuple[Any, ...]) -> bytes:
        now, request_id, session, principal, tool, item, decision, reason, outcome, duration, arguments, *traced = facts
        if decision not in _DECIDED or outcome not in _ENDED or (decision == "refused" and outcome != "refused"):
            _refuse_words(decision, outcome)
        key = (session, id(principal), tool, id(item))
        known = self._shared.get(key)
        if known is None or known[0] is not principal or known[1] is not item:
            known = self._shared_part(key, session, principal, tool, item)
        schema = getattr(item, "input_schema", None)
        if type(arguments) is not bytes or known[3]:  # something may be secret: the dict path redacts it
            if type(arguments) is bytes:
                arguments = orjson.loads(arguments)
            arguments = orjson.dumps(redact(arguments or {}, schema, self.redact_names), default=repr,
                                     option=_CANONICAL)  # fmt: skip
        return b',"time":"%s","event":"call","request_id":%s,%s,"decision":"%s","reason":%s,"outcome":"%s",' \
               b'"duration_ms":%s,"arguments_digest":"sha256:%s","arguments":%s%s}' % (
            format_time_bytes(now), orjson.dumps(request_id, default=repr), known[2], _DECIDED[decision],
            b"null" if reason is None else orjson.dumps(reason), _ENDED[outcome],
            b"null" if duration is None else b"%.3f" % duration, hashlib.sha256(arguments).hexdigest().encode(),
            arguments, b',"trace_id":"%s"' % traced[0].encode() if traced and traced[0] else b"")  # fmt: skip

    def _shared_part(self, key: tuple[Any, ...], session: Any, principal: Any, tool: str, item: Any) -> Any:
        members = {
            "session": session,
            "principal": principal.subject if principal is not None else None,
            "auth": principal.method if principal is not None else None,
            **({"issuer": principal.issuer} if getattr(principal, "issuer", None) is not None else {}),
            "tool": tool,
            "version": getattr(item, "version", None),
            "security_level": self.level_of(item) if item is not None else None,  # None: no such tool
        }
        encoded = orjson.dumps(members, default=repr)[1:-1]
        if len(self._shared) >= self._LIMIT:
            self._shared.clear()
        known = self._shared[key] = (
            principal,
            item,
            encoded,
            _may_redact(getattr(item, "input_schema", None), self.redact_names),
        )
        return known


def canonical_arguments(arguments: Any) -> bytes:
    """``arguments`` as canonical JSON (sorted keys, no spaces): what ``arguments_digest`` hashes."""
    return orjson.dumps(arguments or {}, default=repr, option=_CANONICAL)


def arguments_digest(arguments: Any) -> str:
    """``sha256:`` and the hex digest of ``arguments`` as canonical JSON (sorted keys, no spaces)."""
    return _digest(orjson.dumps(arguments, default=repr, option=_CANONICAL))


def _digest(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def redact(value: Any, schema: dict[str, Any] | None, names: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with every secret replaced by ``REDACTED``: values whose schema (in ``schema``, a tool's
    inputSchema) says ``writeOnly: true`` or ``format: "password"``, and values under a key whose name contains one
    of ``names`` (any depth, any case). The walk follows the value, so a recursive schema costs no more than the
    value's size."""
    if not _may_redact(schema, names):
        return value  # nothing can be secret: no copy, no walk (the common case)
    lowered = tuple(name.lower() for name in names)
    return _redact(value, [schema] if schema else [], schema or {}, lowered)


def _secret_name(key: Any, names: tuple[str, ...]) -> bool:
    """Whether ``key`` contains one of ``names`` (lower case), in any case."""
    if not isinstance(key, str) or not names:
        return False
    key = key.lower()
    return any(name in key for name in names)


def _may_redact(schema: dict[str, Any] | None, names: Iterable[str]) -> bool:
    """Whether anything could be secret: names to redact, or a schema that marks a value secret."""
    return bool(names) or (schema is not None and bool(schema) and _marks_secrets(schema))


_marked: dict[int, tuple[Any, bool]] = {}  # id(schema) -> (schema, whether it marks anything secret)


def _marks_secrets(schema: dict[str, Any]) -> bool:
    """Whether anything in ``schema`` is ``writeOnly`` or ``format: "password"`` (found once per schema)."""
    known = _marked.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    todo: list[Any] = [schema]
    found = False
    while todo and not found:
        node = todo.pop()
        if isinstance(node, dict):
            found = node.get("writeOnly") is True or node.get("format") == "password"
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    if len(_marked) > 10_000:
        _marked.clear()
    _marked[id(schema)] = (schema, found)
    return found


def _redact(value: Any, schemas: list[Any], root: dict[str, Any], names: tuple[str, ...]) -> Any:
    schemas = _expand(schemas, root)
    if any(schema.get("writeOnly") is True or schema.get("format") == "password" for schema in schemas):
        return REDACTED
    if isinstance(value, dict):
        return {
            key: REDACTED if _secret_name(key, names) else _redact(item, _property_schemas(schemas, key), root, names)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact(item, _item_schemas(schemas, index), root, names) for index, item in enumerate(value)]
    return value


def _expand(schemas: list[Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """``schemas`` and every schema they take in through ``$ref`` and the combinators, each once."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    todo = [(schema, 0) for schema in schemas]
    while todo:
        schema, hops = todo.pop()
        if not isinstance(schema, dict) or id(schema) in seen:
            continue
        seen.add(id(schema))
        found.append(schema)
        ref = schema.get("$ref")
        if isinstance(ref, str) and hops < _REF_DEPTH:
            todo.append((_resolve(ref, root), hops + 1))
        for word in _COMBINATORS:
            branches = schema.get(word)
            if isinstance(branches, list):
                todo.extend((branch, hops) for branch in branches)
    return found


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    """The schema a local ``$ref`` ("#/$defs/Name") points at, or None (a remote or broken reference)."""
    if not ref.startswith("#"):
        return None
    target: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def _property_schemas(schemas: list[dict[str, Any]], key: Any) -> list[Any]:
    found = []
    for schema in schemas:
        properties = schema.get("properties")
        if isinstance(properties, dict) and key in properties:
            found.append(properties[key])
            continue
        patterns = schema.get("patternProperties")
        matched = [
            sub for pattern, sub in (patterns.items() if isinstance(patterns, dict) else ()) if _matches(pattern, key)
        ]
        found.extend(matched)
        if not matched and isinstance(schema.get("additionalProperties"), dict):
            found.append(schema["additionalProperties"])
    return found


def _item_schemas(schemas: list[dict[str, Any]], index: int) -> list[Any]:
    found = []
    for schema in schemas:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(prefix, list) and index < len(prefix):
            found.append(prefix[index])
        elif isinstance(items, list):  # the older tuple form
            found.append(items[index] if index < len(items) else schema.get("additionalItems"))
        elif items is not None:
            found.append(items)
    return found


def _matches(pattern: str, key: Any) -> bool:
    try:
        return isinstance(key, str) and re.search(pattern, key) is not None
    except re.error:
        return False
