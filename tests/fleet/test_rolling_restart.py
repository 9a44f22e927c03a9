"""A rolling restart under load, as a new release is deployed: each of the three processes is sent SIGTERM, waited
for, and started again (the same node id, so it goes on with its audit trail), one at a time, while 32 round-robin
clients go on. No session ends, no request that reached a live process is lost (a stopping process finishes what
it has; a client that cannot connect sends the request to the next process, as a balancer does), and no task is
lost: each ends, on its process or — if its process stopped first — taken over by another."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.cluster import NODES, fleet
from fleet.load import Load
from fleet.test_load import GRACE, LEASE, judge, print_report


@pytest.mark.slow
def test_a_rolling_restart_under_load_ends_no_session_and_loses_nothing(redis_url: str, tmp_path: Path) -> None:
    with fleet(tmp_path, redis_url, lease=LEASE) as running:
        load = Load(running.urls)
        restarted_at = 0.0
        try:
            load.start()
            load.wait_for_operations(60)
            for node in NODES:
                assert running.stop(node) == 0, running.log(node)[-3000:]
                running.start(node)
                restarted_at = time.monotonic()
                load.wait_for_operations(sum(load.seen.operations.values()) + 60)
            while time.monotonic() < restarted_at + LEASE + GRACE:  # the last tasks taken over under load
                time.sleep(0.1)  # a poll interval
            load.stop()
            load.sessions_alive()
        finally:
            load.close()
        report = judge(running, load, None, None, restarted=frozenset(running.urls))
        print_report("rolling restart (SIGTERM, start again, one process at a time)", report, tmp_path)
