"""Rate limits exact across the fleet: 32 concurrent clients of one principal, each sending its calls round the
three processes, against a limit of L per hour — the processes take from one bucket in Redis, so exactly the burst
is admitted (L, or the policy's ``burst``; what refills during the test is less than one call), however the calls
are spread."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fleet.cluster import TOKENS, RoundRobin, Tally, fleet, policy

CLIENTS = 32
CALLS = 4  # by each client: 128 in all, well over the limit


@pytest.mark.parametrize(("limit", "burst", "admitted"), [(30, None, 30), (30, 45, 45)])
def test_a_limit_admits_exactly_its_burst_across_three_processes(
    redis_url: str, tmp_path: Path, limit: int, burst: int | None, admitted: int
) -> None:
    text = policy(tmp_path / "audit.jsonl", per_principal=f"{limit}/hour", burst=burst)
    with fleet(tmp_path, redis_url, policy_text=text) as running:
        tally = Tally()
        clients = [RoundRobin(running.urls, TOKENS["alice"], tally, name=f"c{i}", start=i) for i in range(CLIENTS)]
        for client in clients:
            client.initialize()
        go = threading.Barrier(CLIENTS)
        accepted: list[str] = []  # "tag@node" of each call admitted
        refused: list[str] = []  # the text of each refusal
        failures: list[str] = []
        lock = threading.Lock()

        def calls(client: RoundRobin) -> None:
            try:
                go.wait(30)
                for n in range(CALLS):
                    result = client.call("echo", {"tag": f"{client.name}.{n}"})
                    with lock:
                        (refused if result["isError"] else accepted).append(result["content"][0]["text"])
            except Exception as exc:
                failures.append(f"{client.name}: {exc!r}")

        threads = [threading.Thread(target=calls, args=(client,)) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for client in clients:
            client.close()
    assert failures == []
    nodes = {text.rsplit("@", 1)[1] for text in accepted}
    print(f"\nrate limit {limit}/hour, burst {burst or limit}: {len(accepted)} admitted (by {sorted(nodes)}), "
          f"{len(refused)} refused, of {CLIENTS * CALLS}")  # fmt: skip
    assert len(accepted) == admitted and len(refused) == CLIENTS * CALLS - admitted
    assert nodes == {"n1", "n2", "n3"}  # admitted by every process: one bucket, not three
    assert all("rate limit" in text.lower() for text in refused), refused[:3]
