"""The audit trail of a fleet whose process dies: a call it answered has its record, a task-augmented call too."""

from __future__ import annotations

from pathlib import Path

from fleet.cluster import TOKENS, RoundRobin, Tally, fleet


def test_a_task_call_answered_by_a_process_killed_before_the_task_ended_has_its_record(
    redis_url: str, tmp_path: Path
) -> None:
    with fleet(tmp_path, redis_url) as running:
        client = RoundRobin([running.url("n1")], TOKENS["alice"], Tally())
        try:
            client.initialize()
            request_id = client.next_id()
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "job", "arguments": {"tag": "t", "seconds": 60}, "task": {}}}  # fmt: skip
            reply = client.post(message)
            assert reply is not None and reply["result"]["task"]["status"] == "working"
            running.kill("n1")
        finally:
            client.close()
        records = running.audit_records()
        assert [r for r in records if (r.get("session"), r.get("request_id")) == (client.session, request_id)]
