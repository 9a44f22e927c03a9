"""security/audit.py and its parts: the record builder and its redaction, the sinks (one suite for all three), the
file sink's thread, rotation and reopening, and ``verify``'s verdicts on edited, removed, moved and cut-short records.
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tooldeck.security.audit import (
    GENESIS,
    REDACTED,
    AuditError,
    FileAuditSink,
    MemoryAuditSink,
    StderrAuditSink,
    arguments_digest,
    audit_record,
    line_hash,
    redact,
    verify,
)
from tooldeck.security.principal import Principal

T0 = 1750239000.125  # 2025-06-18T09:30:00.125Z


def record(n: int = 0, **changes: Any) -> dict[str, Any]:
    built = audit_record(
        time=T0 + n,
        request_id=n,
        session="s-1",
        principal=Principal("alice", method="jwt"),
        tool="deploy",
        version="1.2.0",
        security_level=7,
        decision="allowed",
        reason=None,
        arguments={"service": f"web-{n}", "token": "hunter2"},
        input_schema={"type": "object", "properties": {"token": {"type": "string", "writeOnly": True}}},
        outcome="ok",
        duration_ms=12.5,
    )
    return {**built, **changes}


# --- the record -------------------------------------------------------------------------------------------------


def test_an_allowed_call_record() -> None:
    assert record(0) == {
        "time": "2025-06-18T09:30:00.125Z",
        "event": "call",
        "request_id": 0,
        "session": "s-1",
        "principal": "alice",
        "auth": "jwt",
        "tool": "deploy",
        "version": "1.2.0",
        "security_level": 7,
        "decision": "allowed",
        "reason": None,
        "outcome": "ok",
        "duration_ms": 12.5,
        "arguments_digest": arguments_digest({"service": "web-0", "token": REDACTED}),
        "arguments": {"service": "web-0", "token": REDACTED},
    }


def test_a_refused_call_record_of_an_anonymous_caller() -> None:
    built = audit_record(
        time=T0,
        request_id="r-9",
        session=None,
        principal=None,
        tool="drop_table",
        version=None,
        security_level=9,
        decision="refused",
        reason="security level 9 needs scope admin",
        arguments={"table": "users"},
        input_schema=None,
        outcome="refused",
        duration_ms=None,
    )
    assert built["principal"] is built["auth"] is built["duration_ms"] is None
    assert (built["decision"], built["reason"], built["outcome"]) == (
        "refused",
        "security level 9 needs scope admin",
        "refused",
    )
    assert built["arguments"] == {"table": "users"}
    expected = "sha256:" + hashlib.sha256(b'{"table":"users"}').hexdigest()
    assert built["arguments_digest"] == expected


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"decision": "maybe"}, "decision must be 'allowed' or 'refused', got 'maybe'"),
        (
            {"outcome": "fine"},
            "outcome must be one of 'ok', 'error', 'refused', 'cancelled', 'timeout', 'input_required', 'task_created', got 'fine'",
        ),
        ({"decision": "refused", "outcome": "ok"}, "a refused call did not run: its outcome is 'refused', not 'ok'"),
    ],
)
def test_the_builder_refuses_words_it_does_not_know(changes: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = dict(
        time=T0, request_id=1, session=None, principal=None, tool="t", version=None, security_level=None,
        decision="allowed", reason=None, arguments={}, input_schema=None, outcome="ok", duration_ms=1.0,
    )  # fmt: skip
    with pytest.raises(ValueError) as caught:
        audit_record(**{**arguments, **changes})
    assert str(caught.value) == message


def test_the_digest_is_of_the_redacted_arguments_in_canonical_form() -> None:
    schema = {"properties": {"password": {"type": "string", "format": "password"}}}
    one = audit_record(**{**_base(), "arguments": {"user": "a", "password": "x"}, "input_schema": schema})
    other = audit_record(**{**_base(), "arguments": {"password": "y", "user": "a"}, "input_schema": schema})
    assert one["arguments_digest"] == other["arguments_digest"]  # neither the secret nor the key order shows
    assert one["arguments"] == {"user": "a", "password": REDACTED}


def _base() -> dict[str, Any]:
    return dict(time=T0, request_id=1, session=None, principal=None, tool="t", version=None, security_level=None,
                decision="allowed", reason=None, outcome="ok", duration_ms=1.0)  # fmt: skip


SECRET = {"type": "string", "writeOnly": True}
PASSWORD = {"type": "string", "format": "password"}


@pytest.mark.parametrize(
    ("schema", "names", "value", "expected"),
    [
        pytest.param({"properties": {"k": SECRET}}, (), {"k": "s", "n": 1}, {"k": REDACTED, "n": 1}, id="writeOnly"),
        pytest.param({"properties": {"p": PASSWORD}}, (), {"p": "s"}, {"p": REDACTED}, id="format-password"),
        pytest.param(
            {"properties": {"db": {"type": "object", "properties": {"auth": {"properties": {"pw": PASSWORD}}}}}},
            (),
            {"db": {"host": "h", "auth": {"pw": "s", "user": "u"}}},
            {"db": {"host": "h", "auth": {"pw": REDACTED, "user": "u"}}},
            id="nested-objects",
        ),
        pytest.param(
            {"properties": {"keys": {"type": "array", "items": {"properties": {"secret": SECRET}}}}},
            (),
            {"keys": [{"id": 1, "secret": "a"}, {"id": 2, "secret": "b"}]},
            {"keys": [{"id": 1, "secret": REDACTED}, {"id": 2, "secret": REDACTED}]},
            id="array-items",
        ),
        pytest.param(
            {"properties": {"pair": {"prefixItems": [{"type": "string"}, PASSWORD]}}},
            (),
            {"pair": ["user", "pw"]},
            {"pair": ["user", REDACTED]},
            id="prefixItems",
        ),
        pytest.param(
            {"properties": {"login": {"$ref": "#/$defs/Login"}}, "$defs": {"Login": {"properties": {"pw": SECRET}}}},
            (),
            {"login": {"name": "n", "pw": "s"}},
            {"login": {"name": "n", "pw": REDACTED}},
            id="ref-to-defs",
        ),
        pytest.param(
            {
                "properties": {"login": {"anyOf": [{"$ref": "#/$defs/L"}, {"type": "null"}]}},
                "$defs": {"L": {"properties": {"pw": SECRET}}},
            },
            (),
            {"login": {"pw": "s"}},
            {"login": {"pw": REDACTED}},
            id="optional-model",
        ),
        pytest.param(
            {"properties": {"env": {"type": "object", "additionalProperties": SECRET}}},
            (),
            {"env": {"A": "1", "B": "2"}},
            {"env": {"A": REDACTED, "B": REDACTED}},
            id="additionalProperties",
        ),
        pytest.param(
            {
                "properties": {"node": {"$ref": "#/$defs/Node"}},
                "$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}, "key": SECRET}}},
            },
            (),
            {"node": {"key": "a", "next": {"key": "b", "next": {"key": "c"}}}},
            {"node": {"key": REDACTED, "next": {"key": REDACTED, "next": {"key": REDACTED}}}},
            id="recursive-ref",
        ),
        pytest.param(
            None,
            ("api_key", "Authorization"),
            {"API_KEY": "s", "headers": [{"authorization": "Bearer x", "accept": "*/*"}], "q": {"Api_Key": {"a": 1}}},
            {
                "API_KEY": REDACTED,
                "headers": [{"authorization": REDACTED, "accept": "*/*"}],
                "q": {"Api_Key": REDACTED},
            },
            id="names-at-any-depth-any-case",
        ),
        pytest.param(
            None,
            ("token",),
            {"api_token": "s", "X-Token": "s", "TOKEN": "s", "tok": "t", "auth": {"refresh_token": "s", "n": 1}},
            {
                "api_token": REDACTED,
                "X-Token": REDACTED,
                "TOKEN": REDACTED,
                "tok": "t",
                "auth": {"refresh_token": REDACTED, "n": 1},
            },
            id="names-contained-in-a-key",
        ),
        pytest.param(
            None,
            ("Secret", "key"),
            {"client_SECRET": "s", "monkey": "m", "k_e_y": "k", "ke": "k"},
            {"client_SECRET": REDACTED, "monkey": REDACTED, "k_e_y": "k", "ke": "k"},
            id="any-entry-any-case",
        ),
        pytest.param(
            {"properties": {"self": {"$ref": "#/properties/self"}}},
            (),
            {"self": {"a": 1}},
            {"self": {"a": 1}},
            id="ref-loop",
        ),
    ],
)
def test_redaction(schema: Any, names: tuple[str, ...], value: Any, expected: Any) -> None:
    before = orjson.dumps(value)
    assert redact(value, schema, names) == expected
    assert orjson.dumps(value) == before  # a copy: the call's own arguments are untouched


# --- every sink ---------------------------------------------------------------------------------------------------

SinkFactory = Callable[[Path], tuple[Any, Callable[[], list[bytes]]]]


def memory_sink(tmp_path: Path) -> tuple[Any, Callable[[], list[bytes]]]:
    sink = MemoryAuditSink()
    return sink, lambda: sink.lines


def stderr_sink(tmp_path: Path) -> tuple[Any, Callable[[], list[bytes]]]:
    stream = io.StringIO()
    return StderrAuditSink(stream), lambda: stream.getvalue().encode().splitlines()


def file_sink(tmp_path: Path) -> tuple[Any, Callable[[], list[bytes]]]:
    path = tmp_path / "audit.jsonl"
    return FileAuditSink(path), lambda: path.read_bytes().splitlines()


@pytest.fixture(params=[memory_sink, stderr_sink, file_sink])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Callable[[], list[bytes]]]]:
    made = request.param(tmp_path)
    yield made
    made[0].close()


def test_every_sink_writes_a_hash_chain(sink: tuple[Any, Callable[[], list[bytes]]], tmp_path: Path) -> None:
    audit, lines = sink
    for n in range(5):
        audit.write(record(n))
    audit.flush()
    written = lines()
    assert [orjson.loads(line)["seq"] for line in written] == [0, 1, 2, 3, 4]
    prevs = [orjson.loads(line)["prev"] for line in written]
    assert prevs == [GENESIS, *(line_hash(line) for line in written[:-1])]
    assert orjson.loads(written[3]) == {"seq": 3, "prev": prevs[3], **record(3)}
    assert audit.head == (4, line_hash(written[-1]))
    (tmp_path / "copy.jsonl").write_bytes(b"".join(line + b"\n" for line in written))
    assert verify([tmp_path / "copy.jsonl"]).to_json() == {
        "ok": True, "records": 5, "files": 1, "problem": None, "breaks": [], "first_seq": 0, "head": audit.head[1],
        "torn": None,
    }  # fmt: skip


async def test_on_a_loop_every_sink_has_a_record_written_once_what_write_returns_is_done(
    sink: tuple[Any, Callable[[], list[bytes]]],
) -> None:
    audit, lines = sink
    assert (audit.problem, audit.admit()) == (None, None)  # a sink that can write admits calls
    written = audit.write(record(0))
    if written is not None:  # the memory sink writes at once; the others with the loop turn's batch
        await written
    assert [orjson.loads(line)["request_id"] for line in lines()] == [0]


def test_every_sink_refuses_records_after_close(sink: tuple[Any, Callable[[], list[bytes]]]) -> None:
    audit, _ = sink
    audit.close()
    audit.close()  # twice is harmless
    with pytest.raises(AuditError, match="the audit sink is closed"):
        audit.write(record())


def test_arguments_given_as_canonical_json_make_the_same_record() -> None:
    from tooldeck.security.audit import canonical_arguments

    schema = {"type": "object", "properties": {"token": {"type": "string", "writeOnly": True}}}
    for arguments, input_schema, names in [
        ({"b": [1, {"y": 2, "x": 1}], "a": "é\u2028"}, None, ()),
        ({"user": "a", "token": "s3cret"}, schema, ()),
        ({"user": "a", "Password": "p"}, None, ("password",)),
    ]:
        as_dict = {**_base(), "arguments": arguments, "input_schema": input_schema, "redact_names": names}
        as_bytes = {**as_dict, "arguments": canonical_arguments(arguments)}
        one, other = MemoryAuditSink(), MemoryAuditSink()
        one.write(audit_record(**as_dict))
        other.write(audit_record(**as_bytes))
        assert one.records == other.records
        assert b"s3cret" not in other.lines[0] and b'"p"' not in other.lines[0]


class _Item:
    def __init__(self, version: str | None, level: int | None, schema: dict[str, Any] | None) -> None:
        self.version, self.security_level, self.input_schema = version, level, schema


def test_call_records_keep_a_sessions_shared_part_only_for_the_same_principal_and_tool() -> None:
    """The part of a record a session repeats is kept per (session, principal, tool) by identity: another principal
    object, or another tool object of the same name (a new version, say), gets its own."""
    from tooldeck.security.audit import CallRecords

    secret = {"type": "object", "properties": {"token": {"type": "string", "writeOnly": True}}}
    old, new = _Item("1.0.0", 3, None), _Item("2.0.0", 5, secret)
    records, sink = CallRecords((), lambda item: item.security_level), MemoryAuditSink()
    calls = [(ALICE, old), (ALICE, old), (BOB, old), (ALICE, new)]
    for principal, item in calls:
        facts = (T0, 1, "s-1", principal, "deploy", item, "allowed", None, "ok", 1.0, b'{"token":"t"}')
        sink.write(functools.partial(records.encode, facts))
    shown = [(r["principal"], r["auth"], r["version"], r["security_level"], r["arguments"]) for r in sink.records]
    assert shown == [
        ("alice", "jwt", "1.0.0", 3, {"token": "t"}),
        ("alice", "jwt", "1.0.0", 3, {"token": "t"}),
        ("bob", "token", "1.0.0", 3, {"token": "t"}),
        ("alice", "jwt", "2.0.0", 5, {"token": REDACTED}),  # the new version's schema marks the token secret
    ]
    assert verify_lines(sink.lines)


ALICE, BOB = Principal("alice", method="jwt"), Principal("bob")


def verify_lines(lines: list[bytes]) -> bool:
    prev = GENESIS
    for line in lines:
        if orjson.loads(line)["prev"] != prev:
            return False
        prev = line_hash(line)
    return True


def test_call_records_refuse_words_they_do_not_know() -> None:
    from tooldeck.security.audit import CallRecords

    records = CallRecords((), lambda item: 0)
    with pytest.raises(ValueError, match="a refused call did not run: its outcome is 'refused', not 'ok'"):
        records.encode((T0, 1, None, None, "t", None, "refused", "no", "ok", 1.0, b"{}"))
