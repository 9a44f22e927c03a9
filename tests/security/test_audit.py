"""security/audit.py and its parts: the record builder and its redaction, the sinks (one suite for all three), the
file sink's thread, rotation and reopening, and ``verify``'s verdicts on edited, removed, moved and cut-short records.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import random
import threading
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
            "outcome must be one of 'ok', 'error', 'refused', 'cancelled', 'timeout', 'input_required', got 'fine'",
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
    }  # fmt: skip


def test_every_sink_refuses_records_after_close(sink: tuple[Any, Callable[[], list[bytes]]]) -> None:
    audit, _ = sink
    audit.close()
    audit.close()  # twice is harmless
    with pytest.raises(AuditError, match="the audit sink is closed"):
        audit.write(record())


# --- the file sink ------------------------------------------------------------------------------------------------


class GatedFileSink(FileAuditSink):
    """A file sink whose writer thread, on its first round, notes its thread and waits for ``released``."""

    def __init__(self, path: Path) -> None:
        self.reached = threading.Event()
        self.released = threading.Event()
        self.writer: threading.Thread | None = None
        super().__init__(path)

    def _emit(self, lines: list[bytes]) -> None:
        if self.writer is None:
            self.writer = threading.current_thread()
            self.reached.set()
            assert self.released.wait(10)
        super()._emit(lines)


def test_the_file_sink_writes_off_the_callers_thread_and_flush_waits(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = GatedFileSink(path)
    audit.write(record(0))
    audit._wake.set()  # start the writer's round now rather than at its next tick
    assert audit.reached.wait(10)  # the writer thread is now stuck writing the first record
    for n in range(1, 200):
        audit.write(record(n))  # write() only stamps and queues the line: it returns while the writer is stuck
    assert audit.writer is not None and audit.writer is not threading.current_thread()
    assert path.read_bytes() == b""
    assert audit.head[0] == 199  # the chain has moved on already
    audit.released.set()
    audit.flush()
    lines = path.read_bytes().splitlines()
    assert len(lines) == 200 and [orjson.loads(line)["seq"] for line in lines] == list(range(200))
    audit.close()


def test_close_drains_the_queue(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    for n in range(300):
        audit.write(record(n))
    audit.close()
    assert len(path.read_bytes().splitlines()) == 300
    assert not audit._thread.is_alive()


def test_rotation_keeps_the_chain_across_files(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(MemoryAuditSink()._chain.encode(record(0))) + 1
    audit = FileAuditSink(path, max_bytes=3 * size + 10, backups=10)
    for n in range(10):
        audit.write(record(n))
    audit.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    assert [len(p.read_bytes().splitlines()) for p in (tmp_path / n for n in names)] == [1, 3, 3, 3]
    older, newer = (tmp_path / "audit.jsonl.1").read_bytes().splitlines(), path.read_bytes().splitlines()
    assert orjson.loads(newer[0])["prev"] == line_hash(older[-1])
    shuffled = [tmp_path / n for n in names]
    random.Random(4).shuffle(shuffled)
    report = verify(shuffled)
    assert (report.ok, report.records, report.files, report.problem) == (True, 10, 4, None)


def test_rotation_deletes_past_backups_and_the_rest_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    size = len(MemoryAuditSink()._chain.encode(record(0))) + 1
    audit = FileAuditSink(path, max_bytes=2 * size + 10, backups=2)
    for n in range(10):
        audit.write(record(n))
    audit.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    report = verify([path, f"{path}.2", f"{path}.1"])
    assert (report.ok, report.records, report.first_seq) == (True, 6, 4)


def test_reopening_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for run in ([0, 1, 2], [3, 4], [5, 6, 7]):
        audit = FileAuditSink(path)
        for n in run:
            audit.write(record(n))
        audit.close()
    assert [orjson.loads(line)["seq"] for line in path.read_bytes().splitlines()] == list(range(8))
    assert verify([path]).ok


def test_reopening_an_emptied_file_after_rotation_continues_from_the_backup(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    audit.write(record(0, arguments={"big": "x" * 200_000}))  # longer than one block read back
    audit.write(record(1, arguments={"big": "y" * 200_000}))
    audit.close()
    os.replace(path, f"{path}.1")
    path.write_bytes(b"")  # rotated, then the process stopped before writing
    audit = FileAuditSink(path, max_bytes=10**7)
    audit.write(record(2))
    audit.close()
    assert orjson.loads(path.read_bytes())["seq"] == 2
    assert verify([path, f"{path}.1"]).records == 3


def test_reopening_after_a_cut_short_write_records_a_chain_break(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    for n in range(3):
        audit.write(record(n))
    audit.close()
    data = path.read_bytes()
    path.write_bytes(data[:-40])
    lost = data[data.rindex(b"\n", 0, len(data) - 1) + 1 : -40]
    assert verify([path]).problem == f"{path}:3: truncated last line"

    audit = FileAuditSink(path, max_bytes=1)  # the break goes into this file, next to the line it names
    audit.write(record(3))  # and this record, past max_bytes, into a new one
    audit.close()
    lines = Path(f"{path}.1").read_bytes().splitlines()
    assert len(lines) == 4
    assert lines[2] == lost
    chain_break = orjson.loads(lines[3])
    assert chain_break == {
        "seq": 2, "prev": line_hash(lines[1]), "time": chain_break["time"], "event": "chain-break",
        "reason": "truncated last line", "line": 3, "lost_bytes": len(lost),
        "lost_sha256": hashlib.sha256(lost).hexdigest(),
    }  # fmt: skip
    report = verify([path, f"{path}.1"])
    message = (
        f"{path}.1:3: truncated record ({len(lost)} bytes) left by an interrupted write; "
        "the chain goes on from a chain-break record at line 4"
    )
    assert (report.ok, report.problem) == (False, message)
    report = verify([path, f"{path}.1"], allow_breaks=True)
    assert (report.ok, report.records, report.breaks) == (True, 4, [message])


def test_a_file_that_is_not_a_trail_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text("hello\n")
    with pytest.raises(AuditError, match=r"audit.jsonl: the last complete line is not an audit record"):
        FileAuditSink(path)


@pytest.mark.parametrize("mode", ["never", "each", "interval"])
def test_fsync_modes(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced = threading.Event()
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.set(), real(fd)))
    audit = FileAuditSink(tmp_path / "audit.jsonl", fsync=mode, fsync_interval=0.01)
    audit.write(record())
    if mode != "never":
        assert synced.wait(10)  # "each" after the batch, "interval" when the writer's idle time-out runs out
    audit.flush()
    assert synced.is_set() == (mode != "never")
    audit.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fsync": "always"}, "fsync must be one of 'never', 'each', 'interval', got 'always'"),
        ({"fsync_interval": 0}, "fsync_interval must be a positive number of seconds, got 0"),
        ({"max_bytes": 0}, "max_bytes must be a positive number of bytes (or None: never rotate), got 0"),
        ({"max_bytes": 100, "backups": 0}, "backups must be at least 1 when max_bytes is set"),
    ],
)
def test_bad_file_sink_options_are_refused(options: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        FileAuditSink(tmp_path / "audit.jsonl", **options)
    assert str(caught.value).startswith(message)
    assert not (tmp_path / "audit.jsonl").exists()


def test_a_write_failure_is_raised_by_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    audit = FileAuditSink(tmp_path / "audit.jsonl")

    def full(lines: list[bytes]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit, "_emit", full)
    audit.write(record())
    with pytest.raises(AuditError, match=r"could not be written: \[Errno 28\] No space left on device"):
        audit.flush()
    audit.close()


# --- verify -------------------------------------------------------------------------------------------------------


@pytest.fixture
def trail(tmp_path: Path) -> Path:
    sink = MemoryAuditSink()
    for n in range(6):
        sink.write(record(n))
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in sink.lines))
    return path


def rewrite(path: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in change(path.read_bytes().splitlines())))


def edit(lines: list[bytes], index: int, **changes: Any) -> list[bytes]:
    document = orjson.loads(lines[index])
    document.update(changes)
    return [*lines[:index], orjson.dumps(document), *lines[index + 1 :]]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda ls: edit(ls, 2, outcome="error"),
            "3: record was edited (its hash does not match the next record's prev)",
        ),
        (lambda ls: edit(ls, 0, prev="1" * 64), "1: record was edited (the first record's prev is not 00000000...)"),
        (lambda ls: [*ls[:3], *ls[4:]], "4: record 3 is missing (seq jumps from 2 to 4)"),
        (lambda ls: [*ls[:1], *ls[4:]], "2: records 1-3 are missing (seq jumps from 0 to 4)"),
        (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], "2: records out of order (seq 2 follows seq 0)"),
        (lambda ls: [*ls[:4], ls[3], *ls[4:]], "5: records out of order (seq 3 follows seq 3)"),
        (lambda ls: [*ls[:2], b"{not json", *ls[3:]], "3: not JSON"),
        (lambda ls: [*ls[:2], b'{"hello": 1}', *ls[3:]], "3: not an audit record (no integer seq and string prev)"),
    ],
    ids=["edited", "first-edited", "deleted", "three-deleted", "reordered", "duplicated", "not-json", "not-a-record"],
)
def test_verify_names_the_first_problem(
    trail: Path, change: Callable[[list[bytes]], list[bytes]], problem: str
) -> None:
    rewrite(trail, change)
    report = verify([trail])
    assert (report.ok, report.problem) == (False, f"{trail}:{problem}")


def test_verify_finds_a_truncated_tail(trail: Path) -> None:
    trail.write_bytes(trail.read_bytes()[:-1])  # a last line without its newline is cut short
    assert verify([trail]).problem == f"{trail}:6: truncated last line"


def test_an_edit_of_the_last_record_needs_the_expected_head(trail: Path) -> None:
    lines = trail.read_bytes().splitlines()
    middle, head = line_hash(lines[3]), line_hash(lines[-1])
    assert verify([trail], expect_head=head.upper()).ok
    assert verify([trail], expect_head=middle).ok  # the trail grew after the head was copied
    rewrite(trail, lambda ls: edit(ls, 5, outcome="error"))
    assert verify([trail]).ok  # what a hash chain alone cannot see
    assert verify([trail], expect_head=middle).ok  # nor a head copied before the edited record
    assert verify([trail], expect_head=head).problem == (
        f"{trail}:6: no record has the expected head {head}: the record it was copied from was edited or removed, "
        "or these are not the files it was copied from"
    )


def test_verify_of_nothing_and_of_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert verify([tmp_path / "empty.jsonl"]).to_json() == {
        "ok": True, "records": 0, "files": 1, "problem": None, "breaks": [], "first_seq": None, "head": None,
    }  # fmt: skip
    with pytest.raises(AuditError, match=r"missing.jsonl: cannot read: No such file or directory"):
        verify([tmp_path / "missing.jsonl"])


async def test_on_an_event_loop_records_are_encoded_together_after_the_call_and_flush_takes_them(
    tmp_path: Path,
) -> None:
    import asyncio

    from tooldeck.security import audit_sinks

    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    made: list[int] = []

    def later(n: int) -> Any:
        def make() -> dict[str, Any]:
            made.append(n)
            return record(n)

        return make

    for n in range(5):
        audit.write(later(n))
    assert made == [] and audit.head == (-1, GENESIS)  # queued: the loop answers the calls first
    await asyncio.sleep(audit_sinks.ENCODE_DELAY * 3)
    assert made == [0, 1, 2, 3, 4] and audit.head[0] == 4  # one round made them all, in order
    audit.write(later(5))
    audit.write(record(6))
    audit.flush()  # encodes what is queued at once, and waits for the file
    assert made == [0, 1, 2, 3, 4, 5]
    assert [orjson.loads(line)["seq"] for line in path.read_bytes().splitlines()] == list(range(7))
    audit.write(record(7))
    audit.close()  # so does close
    report = verify([str(path)])
    assert (report.ok, report.records) == (True, 8)


def test_a_record_that_cannot_be_made_is_logged_and_the_others_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> dict[str, Any]:
        raise ValueError("no such record")

    path = tmp_path / "audit.jsonl"
    audit = FileAuditSink(path)
    audit.write(record(0))
    audit.write(broken)
    audit.write(record(1))
    audit.close()
    assert [orjson.loads(line)["request_id"] for line in path.read_bytes().splitlines()] == [0, 1]
    assert "a record could not be made: ValueError('no such record')" in caplog.text


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
