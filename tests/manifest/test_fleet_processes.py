"""The tool manager across real processes: three ``tooldeck serve --http --backend redis://...`` on one Redis; an
upgrade made on one and a rollback made on another are listed by every process within a second."""

from __future__ import annotations

import time
from contextlib import ExitStack
from itertools import count

from http_client import HttpClient, serve_http

DECK = "tests/manifest/decks/fleet_manager.py"
WITHIN = 1.0
V1 = ["calculator.add", "calculator.subtract"]
V2 = ["calculator.add", "calculator.subtract", "calculator.multiply"]
ids = count(1)


def calculator_tools(http: HttpClient, session: str) -> list[str]:
    with http.stream({"jsonrpc": "2.0", "id": next(ids), "method": "tools/list"}, session=session) as listed:
        (reply,) = list(listed.messages())
    return [tool["name"] for tool in reply["result"]["tools"] if tool["name"].startswith("calculator.")]


def call(http: HttpClient, session: str, name: str) -> str:
    message = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": {"name": name, "arguments": {}}}
    with http.stream(message, session=session) as called:
        (reply,) = list(called.messages())
    assert reply["result"]["isError"] is False, reply
    return str(reply["result"]["content"][0]["text"])


def seconds_until_all_list(processes: list[tuple[HttpClient, str]], expected: list[str], since: float) -> float:
    """Seconds from ``since`` until every process lists ``expected``; each is asked again until it does (there is
    no event to wait on across processes), and after ``WITHIN`` seconds the test fails with what each lists."""
    waiting = list(processes)
    while waiting:
        waiting = [(http, session) for http, session in waiting if calculator_tools(http, session) != expected]
        if waiting and time.monotonic() - since > WITHIN:
            raise AssertionError(f"after {WITHIN} s, {len(waiting)} process(es) still list another version")
        if waiting:
            time.sleep(0.01)  # a poll interval, not a wait for something to happen
    return time.monotonic() - since


def test_an_upgrade_and_a_rollback_are_listed_by_every_process_within_a_second(redis_url: str) -> None:
    with ExitStack() as stack:
        urls = [stack.enter_context(serve_http(DECK, "--backend", redis_url)) for _ in range(3)]
        clients = [stack.enter_context(HttpClient(url)) for url in urls]
        processes = [(http, http.initialize()) for http in clients]
        assert [calculator_tools(http, session) for http, session in processes] == [V1, V1, V1]
        first, _, third = processes
        said = call(*first, "upgrade")
        started = time.monotonic()
        assert said == "tool definition calculator: upgraded 1.0.0 -> 1.1.0 (minor: capability 'multiply' added)"
        assert seconds_until_all_list(processes, V2, started) < WITHIN
        said = call(*third, "rollback")  # on another process than the upgrade's
        started = time.monotonic()
        assert said == "tool definition calculator: rolled back 1.1.0 -> 1.0.0"
        assert seconds_until_all_list(processes, V1, started) < WITHIN
