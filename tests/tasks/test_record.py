"""The task record, its status machine, its wire form (checked against the official schema) and task ids."""

from __future__ import annotations

import itertools
import os
import re

import orjson
import pytest

from mcp_schema import check
from samples import ALLOWED_MOVES, T0
from tooldeck.tasks import STATUSES, TERMINAL, TaskRecord, can_move, new_task_id
from tooldeck.tasks.record import iso_utc


def test_statuses_are_the_spec_enum() -> None:
    assert STATUSES == ("working", "input_required", "completed", "failed", "cancelled")
    assert frozenset({"completed", "failed", "cancelled"}) == TERMINAL


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATUSES, STATUSES)))
def test_can_move(old: str, new: str) -> None:
    assert can_move(old, new) is ((old, new) in ALLOWED_MOVES)


@pytest.mark.parametrize(("old", "new"), [("unknown", "working"), ("working", "unknown"), ("", "")])
def test_can_move_refuses_what_is_not_a_status(old: str, new: str) -> None:
    assert can_move(old, new) is False


def test_task_ids_are_url_safe_unique_and_carry_128_bits() -> None:
    ids = {new_task_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    for task_id in itertools.islice(ids, 100):
        assert re.fullmatch(r"[0-9a-f]{32}", task_id), task_id  # 32 hex digits = 16 random bytes


def test_defaults_start_working_and_unbound() -> None:
    record = TaskRecord(task_id="t", tool="add", created_at=T0)
    assert record.status == "working"
    assert record.updated_at == T0
    assert record.owner is None
    assert record.status_message is record.ttl_ms is record.poll_interval_ms is record.result is record.error is None
    assert not record.is_terminal
    assert record.expires_at is None
    assert not record.is_expired(T0 + 10**9)


def test_records_compare_by_value_and_repr_shows_what_is_set() -> None:
    a = TaskRecord(task_id="t", tool="add", created_at=T0, owner="alice")
    assert a == TaskRecord(task_id="t", tool="add", created_at=T0, owner="alice")
    assert a != TaskRecord(task_id="t", tool="add", created_at=T0, owner="bob")
    assert (
        repr(a)
        == f"TaskRecord(task_id='t', owner='alice', status='working', created_at={T0!r}, updated_at={T0!r}, tool='add', "
        "attempts=1)"
    )


def test_the_constructor_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        TaskRecord("t", "add", T0)  # type: ignore[misc]


@pytest.mark.parametrize("status", STATUSES)
def test_is_terminal(status: str) -> None:
    assert TaskRecord(task_id="t", tool="x", created_at=T0, status=status).is_terminal is (status in TERMINAL)


def test_expiry_starts_the_instant_the_ttl_has_run_out() -> None:
    record = TaskRecord(task_id="t", tool="x", created_at=T0, ttl_ms=1500)
    assert record.expires_at == T0 + 1.5
    assert not record.is_expired(T0 + 1.499)
    assert record.is_expired(T0 + 1.5)
    assert TaskRecord(task_id="t", tool="x", created_at=T0, ttl_ms=0).is_expired(T0)


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        (T0, "2025-11-25T10:30:00.000Z"),
        (T0 + 0.123, "2025-11-25T10:30:00.123Z"),
        (T0 + 0.0014, "2025-11-25T10:30:00.001Z"),
        (T0 + 59.9996, "2025-11-25T10:31:00.000Z"),  # rounds to the millisecond, carrying into the seconds
        (0.0, "1970-01-01T00:00:00.000Z"),
        (951782400.5, "2000-02-29T00:00:00.500Z"),
    ],
)
def test_iso_utc(epoch: float, text: str) -> None:
    assert iso_utc(epoch) == text


def test_wire_form_of_a_minimal_task() -> None:
    record = TaskRecord(task_id="abc", tool="add", created_at=T0)
    wire = record.to_wire()
    assert wire == {
        "taskId": "abc",
        "status": "working",
        "createdAt": "2025-11-25T10:30:00.000Z",
        "lastUpdatedAt": "2025-11-25T10:30:00.000Z",
        "ttl": None,
    }
    check("2025-11-25", "Task", wire)


def test_wire_form_of_a_full_task_carries_no_internal_fields() -> None:
    record = TaskRecord(
        task_id="abc",
        tool="add",
        owner="alice",
        status="failed",
        status_message="boom",
        created_at=T0 + 0.25,
        updated_at=T0 + 61.5,
        ttl_ms=60_000,
        poll_interval_ms=500,
        result={"content": [{"type": "text", "text": "boom"}], "isError": True},
        error=None,
    )
    wire = record.to_wire()
    assert wire == {
        "taskId": "abc",
        "status": "failed",
        "statusMessage": "boom",
        "createdAt": "2025-11-25T10:30:00.250Z",
        "lastUpdatedAt": "2025-11-25T10:31:01.500Z",
        "ttl": 60000,
        "pollInterval": 500,
    }
    check("2025-11-25", "Task", wire)


@pytest.mark.parametrize("status", STATUSES)
def test_every_status_is_a_valid_wire_task(status: str) -> None:
    record = TaskRecord(task_id=new_task_id(), tool="x", created_at=T0, status=status, status_message="m", ttl_ms=0)
    check("2025-11-25", "Task", record.to_wire())


def test_the_json_form_reads_back_as_the_same_record() -> None:
    full = TaskRecord(task_id="t1", tool="add", owner="alice", status="failed", status_message="boom",
                      created_at=T0 + 0.123456, updated_at=T0 + 1 / 3, ttl_ms=60_000, poll_interval_ms=250,
                      result={"content": [], "isError": True}, error={"code": -32603, "message": "x"}, node="n1",
                      lease_until=T0 + 30, attempts=2, arguments={"n": [1, None]})  # fmt: skip
    minimal = TaskRecord(task_id="t2", tool="add", created_at=T0)
    for record in (full, minimal):
        assert TaskRecord.from_dict(orjson.loads(orjson.dumps(record.to_dict()))) == record
    assert minimal.to_dict() == {"task_id": "t2", "status": "working", "created_at": T0, "updated_at": T0,
                                 "tool": "add", "attempts": 1}  # fmt: skip


def test_a_forked_child_never_hands_out_the_parents_next_ids() -> None:
    new_task_id()  # the parent's pool of random bytes is filled now
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first ids, then leave without running the parent's clean-up
        os.write(write_end, " ".join(new_task_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child_ids = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    assert len(child_ids) == 3
    assert child_ids.isdisjoint(new_task_id() for _ in range(3))
