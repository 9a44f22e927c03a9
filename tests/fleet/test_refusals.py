"""What one identity is given on one process is refused on every other: a level-8 confirmation answered through
one process and replayed through another, a 2026-07-28 request state spent on one process and replayed on
another, and another identity's session and task, asked for on each process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import orjson

from asking import accept, code_in, retry
from eras import modern
from fleet.cluster import NODES, TOKENS, RoundRobin, Tally, fleet
from transports.http.test_eras import headers_for

ELICIT = {"elicitation": {}}


def shown_code(params: dict[str, Any]) -> str:
    found = re.search(r"enter the code (\d{6})", params["message"])
    assert found is not None, params["message"]
    return found.group(1)


def test_a_confirmation_replayed_through_another_process_is_refused(redis_url: str, tmp_path: Path) -> None:
    codes: list[str] = []

    def first_code_always(params: dict[str, Any]) -> dict[str, Any]:
        codes.append(shown_code(params))
        return {"action": "accept", "content": {"code": codes[0]}}

    with fleet(tmp_path, redis_url) as running:
        client = RoundRobin(running.urls, TOKENS["alice"], Tally(), answers={"elicitation/create": first_code_always})
        try:
            client.initialize(ELICIT)
            # asked on one process, answered through the next
            assert client.call("launch", {"tag": "x"})["content"][0]["text"] == "launched x"
            again = client.call("launch", {"tag": "x"})  # the same call, its question answered with the old code
        finally:
            client.close()
        assert len(codes) == 2 and codes[0] != codes[1]
        assert again["isError"] is True
        assert (
            again["content"][0]["text"] == "tool 'launch' was not run: the confirmation code does not match this call"
        )
        assert running.run_counts()[("launch", "x")] != []
        assert len(running.run_counts()[("launch", "x")]) == 1


def post_modern(http: httpx.Client, url: str, message: dict[str, Any], token: str) -> httpx.Response:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": f"Bearer {token}", **headers_for(message)}  # fmt: skip
    return http.post(url, content=orjson.dumps(message), headers=headers)


def test_a_request_state_spent_on_one_process_is_refused_on_another(redis_url: str, tmp_path: Path) -> None:
    with fleet(tmp_path, redis_url) as running, httpx.Client(timeout=30) as http:
        n1, n2, n3 = running.urls
        first = modern(1, "tools/call", {"name": "launch", "arguments": {"tag": "y"}}, capabilities=ELICIT)
        asked = post_modern(http, n1, first, TOKENS["alice"])
        interim = asked.json()["result"]
        assert interim["resultType"] == "input_required", interim
        confirmed = retry(2, first, interim, {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)
        done = post_modern(http, n2, confirmed, TOKENS["alice"])
        assert done.json()["result"]["structuredContent"] == {"result": "launched y"}, done.text
        replayed = post_modern(http, n3, {**confirmed, "id": 3}, TOKENS["alice"])
        assert replayed.status_code == 400 and "used already" in replayed.json()["error"]["message"], replayed.text
        bob = post_modern(http, n1, {**confirmed, "id": 4}, TOKENS["bob"])  # another identity: not its state
        assert bob.status_code == 400, bob.text
        assert len(running.run_counts()[("launch", "y")]) == 1


def test_another_identitys_session_and_task_are_refused_on_every_process(redis_url: str, tmp_path: Path) -> None:
    with fleet(tmp_path, redis_url) as running:
        alice = RoundRobin(running.urls, TOKENS["alice"], Tally(), name="alice")
        bob = RoundRobin(running.urls, TOKENS["bob"], Tally(), name="bob")
        try:
            alice.initialize()
            created = alice.result("tools/call", {"name": "job", "arguments": {"tag": "z", "seconds": 30},
                                                  "task": {"ttl": 60_000}})  # fmt: skip
            task_id = created["task"]["taskId"]
            bob.initialize()
            for turn, _ in enumerate(NODES):
                # bob's token on alice's session: 403, on each process
                intruder = RoundRobin(running.urls, TOKENS["bob"], Tally(), name=f"intruder{turn}", start=turn)
                intruder.session = alice.session
                message = {"jsonrpc": "2.0", "id": f"i{turn}", "method": "tools/list"}
                with intruder._send(message) as (_, response):
                    (refusal,) = list(intruder._messages(response))  # a JSON-RPC error body, schema-checked
                    assert response.status_code == 403 and "error" in refusal, refusal
                intruder.close()
                # alice's task, from bob's own session: not found, whatever bob asks
                for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                    bob.turn = turn
                    reply = bob.request(method, {"taskId": task_id})
                    assert "error" in reply, (method, reply)
                    assert "not found" in reply["error"]["message"].lower(), (method, reply)
                bob.turn = turn
                listed = bob.result("tasks/list")
                assert task_id not in [task["taskId"] for task in listed["tasks"]]
            alice.turn = 0
            assert alice.result("tasks/get", {"taskId": task_id})["status"] == "working"  # untouched
            assert alice.result("tasks/cancel", {"taskId": task_id})["status"] == "cancelled"
        finally:
            alice.close()
            bob.close()
