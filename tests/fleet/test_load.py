"""Three real ``tooldeck serve --http`` processes on one Redis under the load of 32 clients (``load.py``), each client
sending every request of its session to the next process; one process is SIGKILLed mid-load.

What must hold: every request not in flight on the killed process is answered; no session is ever "not found"; every
task ends — taken over (an idempotent tool's run again) or ``failed`` saying that its process stopped — within the
lease plus a grace; no task runs twice unless its tool is idempotent; every answered call has its audit record and
every process's trail verifies. The counts are printed (``-s``) and kept in ``report.json`` in the test's directory.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from fleet.cluster import NODES, STOPPED, Fleet, fleet
from fleet.load import Load

LEASE = 3.0  # the task lease of the fleet's processes
GRACE = 6.0  # besides the lease: a renewal round, the takeover, a rerun of TASK_SECONDS and a client's poll


@pytest.mark.slow
def test_32_clients_round_robin_over_three_processes_and_one_killed_mid_load(redis_url: str, tmp_path: Path) -> None:
    with fleet(tmp_path, redis_url, lease=LEASE) as running:
        load = Load(running.urls)
        try:
            load.start()
            load.wait_for_operations(150)
            victim = running.urls[1]
            in_flight = len(load.seen.tasks)
            running.kill("n2")
            killed_at = time.monotonic()  # dead by now: what was sent before this may have been in flight there
            load.wait_for_operations(sum(load.seen.operations.values()) + 150)
            while time.monotonic() < killed_at + LEASE + GRACE:  # the load goes on while the takeover happens
                time.sleep(0.1)  # a poll interval
            load.stop()
            load.sessions_alive()  # no session ended: each still answers on every live process
        finally:
            load.close()
        report = judge(running, load, victim, killed_at)
        report["tasks created before the kill"] = in_flight
        print_report("SIGKILL mid-load", report, tmp_path)


def judge(running: Fleet, load: Load, victim: str | None, killed_at: float | None,
          restarted: frozenset[str] = frozenset()) -> dict[str, Any]:  # fmt: skip
    """Assert what must hold after a load during which ``victim`` (if any) was killed at ``killed_at`` and the
    processes at ``restarted`` were stopped (SIGTERM) and started again; returns the counts."""
    seen, tally = load.seen, load.seen.tally
    assert seen.errors == [], "\n".join(seen.errors[:30])
    assert tally.not_found == [], tally.not_found[:10]
    for lost in tally.lost:  # only what was in flight on the killed process, sent before it was killed
        assert victim is not None and killed_at is not None, lost
        assert lost.url == victim and lost.started <= killed_at, (lost, lost.url, lost.started, killed_at)

    runs = running.run_counts()
    taken_over, failed, twice = 0, 0, 0
    for task in seen.tasks:
        nodes = runs.get((task.tool, task.tag), [])
        assert task.status in ("completed", "failed"), (task, nodes)
        on_victim = task.url == victim or task.url in restarted  # its process stopped: it may be taken over
        if len(nodes) > 1:
            assert task.tool == "redo" and on_victim and len(nodes) == 2, (task, nodes)  # idempotent: once more
            twice += 1
        if task.status == "failed":
            assert on_victim and task.message == STOPPED, (task, nodes)
            # an idempotent task runs once more elsewhere; if that process stops too (a rolling restart stops each
            # in turn), it ends failed: never a third run
            assert task.tool == "job" or (restarted and len(nodes) == 2), (task, nodes)
            failed += 1
        if on_victim and (task.status == "failed" or len(nodes) > 1):
            taken_over += 1
            if task.url == victim:
                assert killed_at is not None and task.ended is not None
                assert task.ended <= killed_at + LEASE + GRACE, (task, task.ended - killed_at)
    # list_changed made on one process reached GET streams held by others (a few coalesce: added and removed again
    # within one turn of a loop is no change, so a waiting client may miss one and is not failed for it)
    assert seen.notified.get("notifications/prompts/list_changed", 0) > 0, seen.missed
    cancelled = {tag for what, tag in runs if what == "nap-cancelled"}
    assert set(seen.cancelled) <= cancelled  # each cancellation reached the process running the call

    records = running.audit_records()
    audited = {(r.get("session"), str(r.get("request_id"))) for r in records if r.get("event") == "call"}
    # A task-augmented call is recorded as it is answered (outcome task_created), so one created on a process that
    # stopped before the task ended has its record too.
    unaudited = [call for call in seen.calls if (call[0], call[1]) not in audited]
    assert unaudited == [], "\n".join(
        f"{call[1]} {call[2]} on {'the killed process' if call[3] == victim else call[3]}, "
        f"answered {call[4] - (killed_at or 0):.3f}s after the kill"
        for call in unaudited
    )
    reran = {str(r.get("request_id")) for r in records if str(r.get("request_id")).startswith("takeover-")}
    for task in seen.tasks:  # a run taken over is recorded by the process that ran it
        if len(runs.get((task.tool, task.tag), [])) > 1:
            assert f"takeover-{task.task_id}" in reran, task
    for node in NODES:
        log = running.log(node)
        errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
        first = log.find(errors[0]) if errors else 0
        assert errors == [], f"{node}: " + log[first : first + 4000]  # the first error, its traceback whole
    verified = running.verify_audit()
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert len(running.audit_trails()) == 3

    report = load.report()
    report.update({"tasks taken over": taken_over, "tasks failed (process stopped)": failed,
                   "tasks run twice (idempotent)": twice, "audit records": len(records)})  # fmt: skip
    report["lost"] = len(tally.lost)
    return report


def print_report(title: str, report: dict[str, Any], directory: Path) -> None:
    print(f"\nfleet load, {title}:", orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    (directory / "report.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
