"""Prometheus metrics (server/metrics.py, transports/http/metrics_route.py): a scrape parsed by prometheus-client's
own parser has the semantic conventions' histograms with their buckets and the operator's series; the endpoint is
for operators only; a deck without metrics imports nothing of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from asgi_client import AsgiClient
from tooldeck import Deck, ToolError
from tooldeck.security.tokens import hash_token
from tooldeck.server.metrics import OPERATION_BUCKETS
from tooldeck.transports.http import HttpApp

OPERATOR = {"authorization": "Bearer ops-key"}
CALLER = {"authorization": "Bearer ci-key"}


def metered_deck(tmp_path: Path) -> Deck:
    deck = Deck("metered")

    @deck.tool(version="1.2.0")
    def echo(text: str) -> str:
        return text

    @deck.tool
    def broken() -> str:
        raise ToolError("it broke")

    guarded_tools(deck)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[authentication.tokens]]\nsubject = "ci"\nsha256 = "{hash_token("ci-key")}"\n'
        f'[[authentication.tokens]]\nsubject = "ops"\nsha256 = "{hash_token("ops-key")}"\nscopes = ["operator"]\n'
        f'[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n'
        '[limits]\nper_principal = "3/minute"\n'
    )
    deck.apply_policy(policy)
    deck.use_metrics()
    return deck


def guarded_tools(deck: Deck) -> None:
    """A level-5 tool with a scope nobody here holds, and a task tool (the metrics and the traces tests share them)."""

    @deck.tool(security_level=5, scopes=["vault:write"])
    def wipe() -> str:
        return "wiped"

    @deck.tool(task="optional")
    async def later() -> str:
        return "done"


async def session_of(http: AsgiClient, headers: dict[str, str]) -> str:
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=headers)  # fmt: skip
    await init.body()
    return init.headers["mcp-session-id"]


async def scrape(http: AsgiClient, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response = await http.request("GET", path="/metrics", headers=headers or OPERATOR, jsonrpc=False)
    body = (await response.body()).decode()
    assert response.status == 200, body
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {family.name: family for family in text_string_to_metric_families(body)}


def samples(family: Any, suffix: str = "") -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for s in family.samples if s.name == family.name + suffix]


async def test_a_scrape_has_the_conventions_histograms_and_the_operators_series(tmp_path: Path) -> None:
    http = AsgiClient(HttpApp(metered_deck(tmp_path)))
    session = await session_of(http, CALLER)
    calls = [("echo", {"text": "hi"}), ("broken", {}), ("wipe", {}), ("echo", {"text": "again"}),
             ("echo", {"text": "over the limit"})]  # fmt: skip
    for n, (name, arguments) in enumerate(calls, 1):
        answer = await http.call(session, n, "tools/call", {"name": name, "arguments": arguments}, headers=CALLER)
        await answer.body()
    refused = await http.post({"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers={"authorization": "Bearer no"})
    await refused.body()
    found = await scrape(http)

    operation = found["mcp_server_operation_duration_seconds"]
    buckets = sorted({float(labels["le"]) for labels, _ in samples(operation, "_bucket")})
    assert buckets == [*OPERATION_BUCKETS, float("inf")]  # the conventions' boundaries
    counts = {(labels["mcp_method_name"], labels["gen_ai_tool_name"], labels["error_type"]): value
              for labels, value in samples(operation, "_count")}  # fmt: skip
    assert counts[("initialize", "", "")] == 1
    assert counts[("tools/call", "echo", "")] == 2
    assert counts[("tools/call", "broken", "tool_error")] == 1
    assert counts[("tools/call", "echo", "tool_error")] == 1  # the rate limit's isError result
    assert counts[("tools/call", "wipe", "-32000")] == 1  # refused: the caller lacks the tool's scope
    assert {labels["mcp_protocol_version"] for labels, _ in samples(operation, "_count")} == {"2025-11-25"}
    assert {labels["network_transport"] for labels, _ in samples(operation, "_count")} == {"tcp"}

    refusals = {(labels["reason"], labels["level"]): value for labels, value in samples(found["tooldeck_refusals"],
                                                                                       "_total")}  # fmt: skip
    assert refusals == {("forbidden", "5"): 1, ("rate_limited", "0"): 1, ("unauthenticated", ""): 1}
    assert samples(found["tooldeck_rate_limited_calls"], "_total") == [({}, 1.0)]
    assert samples(found["tooldeck_audit_records"], "_total") == [({}, 5.0)]  # 5 calls (the 401 is another record)
    assert samples(found["tooldeck_sessions"]) == [({}, 1.0)]
    assert samples(found["tooldeck_requests_in_flight"]) == [({}, 0.0)]
    info = {labels["tool"]: (labels["version"], labels["level"]) for labels, _ in samples(found["tooldeck_tool_info"])}
    assert info["echo"][0] == "1.2.0" and info["wipe"][1] == "5"


async def test_tasks_are_counted_by_the_status_they_moved_to(tmp_path: Path) -> None:
    http = AsgiClient(HttpApp(metered_deck(tmp_path)))
    session = await session_of(http, CALLER)
    created = await http.call(session, 1, "tools/call", {"name": "later", "arguments": {}, "task": {}}, headers=CALLER)
    task_id = (await created.json())["result"]["task"]["taskId"]
    result = await http.call(session, 2, "tasks/result", {"taskId": task_id}, headers=CALLER)
    await result.body()
    tasks = {labels["status"]: value for labels, value in samples((await scrape(http))["tooldeck_tasks"], "_total")}
    assert tasks == {"working": 1.0, "completed": 1.0}


async def test_only_operators_read_the_metrics(tmp_path: Path) -> None:
    http = AsgiClient(HttpApp(metered_deck(tmp_path)))
    for headers, status in (({}, 401), (CALLER, 403), ({"authorization": "Bearer no"}, 401), (OPERATOR, 200)):
        response = await http.request("GET", path="/metrics", headers=headers, jsonrpc=False)
        await response.body()
        assert response.status == status, headers


async def test_without_authentication_only_loopback_clients_read_them() -> None:
    deck = Deck("open")
    deck.use_metrics()
    for client, status in ((("127.0.0.1", 5000), 200), (("192.0.2.1", 5000), 403)):
        http = AsgiClient(HttpApp(deck, allowed_hosts=["*"]), client=client)
        response = await http.request("GET", path="/metrics", jsonrpc=False)
        await response.body()
        assert response.status == status


def test_a_deck_without_metrics_imports_nothing_of_them() -> None:
    code = ("import sys\nfrom tooldeck import Deck\nd = Deck('x')\nd.http_app()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'tooldeck.server.metrics'))))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


async def test_a_2026_call_is_observed_with_its_revision_and_no_session(tmp_path: Path) -> None:
    from eras import modern
    from transports.http.test_eras import headers_for

    http = AsgiClient(HttpApp(metered_deck(tmp_path)))
    message = modern(3, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    answer = await http.post(message, version=None, accept="application/json",
                             headers={**CALLER, **headers_for(message)})  # fmt: skip
    assert answer.status == 200
    await answer.body()
    operation = (await scrape(http))["mcp_server_operation_duration_seconds"]
    assert [(labels["mcp_method_name"], labels["mcp_protocol_version"], value)
            for labels, value in samples(operation, "_count")] == [("tools/call", "2026-07-28", 1.0)]  # fmt: skip
    assert samples((await scrape(http))["tooldeck_sessions"]) == [({}, 0.0)]


async def test_with_a_shared_backend_its_commands_are_timed(tmp_path: Path, redis_url: str) -> None:
    deck = metered_deck(tmp_path)
    deck.use_backends(redis_url)  # after use_metrics: the new engine is watched too
    await deck.open_backends()
    try:
        http = AsgiClient(HttpApp(deck))
        session = await session_of(http, CALLER)
        answer = await http.call(session, 1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}},
                                 headers=CALLER)  # fmt: skip
        await answer.body()
        backend = (await scrape(http))["tooldeck_backend_command_duration_seconds"]
        (count,) = samples(backend, "_count")
        assert count[1] >= 2  # the session's state stored, its mark and the rate limit sent with it
        buckets = [float(labels["le"]) for labels, _ in samples(backend, "_bucket")]
        assert buckets[0] == 0.0005 and buckets[-1] == float("inf")
    finally:
        await deck.aclose()


async def test_with_a_shared_backend_the_bus_deliveries_of_other_processes_are_timed(
    tmp_path: Path, redis_url: str
) -> None:
    import asyncio

    here, there = metered_deck(tmp_path), Deck("elsewhere")
    here.use_backends(redis_url)
    there.use_backends(redis_url)
    await here.open_backends()
    await there.open_backends()
    try:
        heard = asyncio.Event()
        here.bus.subscribe("ping", lambda payload: heard.set())
        await here.bus.ready()
        there.bus.publish("ping", {"n": 1})
        await asyncio.wait_for(heard.wait(), 5)
        bus = (await scrape(AsgiClient(HttpApp(here))))["tooldeck_bus_delivery_seconds"]
        ((_, count),) = samples(bus, "_count")
        assert count == 1.0 and 0.0 <= samples(bus, "_sum")[0][1] < 5.0
    finally:
        await there.aclose()
        await here.aclose()
