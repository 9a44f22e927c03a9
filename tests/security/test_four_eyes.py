"""Four eyes (``[approvals]``): a call of a listed level or tool waits until another person, holding the approver
scope, approves it; denied, it never runs and the caller is told by whom and why; the caller cannot approve their
own call, nor can a principal without the scope; nobody deciding in time refuses it; what the queue shows of the
arguments is redacted as in the audit trail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from asgi_client import AsgiClient
from tooldeck import Deck
from tooldeck.security.principal import Principal
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http import HttpApp

ALICE = {"authorization": "Bearer alice-key"}
BOB = Principal("bob", roles=["ops"])  # holds the approver scope through a role
MALLORY = Principal("mallory")


def four_eyes_deck(tmp_path: Path, extra: str = "") -> tuple[Deck, list[str]]:
    deck = Deck("four-eyes")
    ran: list[str] = []

    @deck.tool(security_level=10, version="3.0.0")
    def deploy(target: str, api_token: str = "") -> str:
        ran.append(target)
        return f"deployed {target}"

    @deck.tool
    def restart(service: str) -> str:  # level 0, listed by name
        ran.append(service)
        return f"restarted {service}"

    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'[[authentication.tokens]]\nsubject = "alice"\nsha256 = "{hash_token("alice-key")}"\nroles = ["ops"]\n'
        '[roles]\nops = ["approver"]\n'
        f'[approvals]\nlevels = [10]\ntools = ["restart"]\ntimeout = 30\n[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n'
        'redact = ["token"]\n' + extra
    )
    deck.apply_policy(policy)
    return deck, ran


async def session_of(http: AsgiClient) -> str:
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=ALICE)  # fmt: skip
    await init.body()
    return init.headers["mcp-session-id"]


async def waiting_call(deck: Deck, name: str, arguments: dict[str, Any]) -> tuple[asyncio.Task[Any], Any]:
    """A call of ``name`` by alice, running, and its entry in the approvals queue once it waits there."""
    http = AsgiClient(HttpApp(deck))
    session = await session_of(http)

    async def call() -> Any:
        response = await http.call(session, 1, "tools/call", {"name": name, "arguments": arguments}, headers=ALICE)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return await response.json()
        async for event in response.events():
            if event.data:
                return event.message
        raise AssertionError("the call's stream ended without its result")

    running = asyncio.ensure_future(call())
    for _ in range(200):
        waiting = await deck.access.approvals.waiting("operator")
        if waiting:
            return running, waiting[0]
        await asyncio.sleep(0.01)
    raise AssertionError("the call never reached the approvals queue")


async def test_another_approver_approves_and_only_then_the_call_runs(tmp_path: Path) -> None:
    deck, ran = four_eyes_deck(tmp_path)
    running, approval = await waiting_call(deck, "deploy", {"target": "prod", "api_token": "s3cret"})
    shown = approval.shown
    assert (shown["tool"], shown["version"], shown["level"], shown["principal"]) == ("deploy", "3.0.0", 10,
                                                                                      "token:alice")  # fmt: skip
    assert shown["arguments"] == {"target": "prod", "api_token": "[redacted]"}  # as the trail shows them
    assert ran == []
    assert await deck.access.decide(approval.id, BOB, True, "change 42") is None
    result = (await running)["result"]
    assert result["structuredContent"] == {"result": "deployed prod"} and ran == ["prod"]
    deck._security.sink.flush()
    (record,) = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    assert (record["decision"], record["outcome"], record["reason"]) == (
        "allowed",
        "ok",
        "approved by token:bob: change 42",
    )
    assert await deck.access.decide(approval.id, BOB, True) is not None  # single use
    assert await deck.access.approvals.waiting("operator") == []


async def test_a_denied_call_never_runs_and_says_who_denied_it_and_why(tmp_path: Path) -> None:
    deck, ran = four_eyes_deck(tmp_path)
    running, approval = await waiting_call(deck, "restart", {"service": "db"})
    assert await deck.access.decide(approval.id, BOB, False, "  not during the freeze ") is None
    result = (await running)["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "tool 'restart' was not run: token:bob denied it: not during the freeze"
    assert ran == []
    deck._security.sink.flush()
    (record,) = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    assert (record["tool"], record["decision"], record["outcome"]) == ("restart", "refused", "refused")
    assert record["reason"] == "tool 'restart' was not run: token:bob denied it: not during the freeze"


async def test_the_caller_and_a_principal_without_the_scope_cannot_decide(tmp_path: Path) -> None:
    deck, ran = four_eyes_deck(tmp_path)
    running, approval = await waiting_call(deck, "deploy", {"target": "prod"})
    alice = Principal("alice", roles=["ops"])  # holds the scope, but it is her own call
    assert await deck.access.decide(approval.id, alice, True) == (
        "a call cannot be approved by its own caller: another approver must decide"
    )
    assert await deck.access.decide(approval.id, MALLORY, True) == "deciding needs the 'approver' scope"
    assert await deck.access.decide(approval.id, None, True) == "deciding needs the 'approver' scope"
    assert (await deck.access.decide("nothing", BOB, True)).startswith("no call with this id is waiting")
    assert ran == [] and not running.done()
    assert await deck.access.decide(approval.id, BOB, True) is None
    await running
    assert ran == ["prod"]


async def test_nobody_deciding_in_time_refuses_the_call(tmp_path: Path) -> None:
    deck, ran = four_eyes_deck(tmp_path, extra="")
    deck.policy.approvals["timeout"] = 0.2
    running, approval = await waiting_call(deck, "deploy", {"target": "prod"})
    result = (await running)["result"]
    assert result["content"][0]["text"] == "tool 'deploy' was not run: no approver decided within 0.2 s"
    assert ran == [] and await deck.access.approvals.waiting("operator") == []
    assert (await deck.access.decide(approval.id, BOB, True)).startswith("no call with this id")


async def test_a_listed_tool_of_level_0_needs_an_authenticated_caller(tmp_path: Path) -> None:
    deck, ran = four_eyes_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    anonymous = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None)  # fmt: skip
    await anonymous.body()
    session = anonymous.headers["mcp-session-id"]
    refused = await http.call(session, 1, "tools/call", {"name": "restart", "arguments": {"service": "db"}})
    assert refused.status == 401 and ran == []


@pytest.mark.parametrize("table", ["levels = [11]", 'levels = ["10"]', 'tools = [""]', "timeout = 0", "who = 1"])
def test_a_wrong_approvals_table_is_refused_with_its_line(tmp_path: Path, table: str) -> None:
    from tooldeck.security.policy import PolicyError, load_policy

    path = tmp_path / "policy.toml"
    path.write_text(f"[approvals]\n{table}\n")
    with pytest.raises(PolicyError, match=r"policy\.toml:2: "):
        load_policy(path)


def migrating_deck(tmp_path: Path) -> tuple[Deck, list[str]]:
    """The four-eyes deck with ``migrate``, a level-10 tool that may run as a task (what it ran in the list)."""
    deck, ran = four_eyes_deck(tmp_path)

    @deck.tool(security_level=10, version="1.0.0", task="optional")
    def migrate(database: str) -> str:
        ran.append(database)
        return f"migrated {database}"

    return deck, ran


async def test_a_task_is_created_at_once_and_waits_for_its_approver_in_the_background(tmp_path: Path) -> None:
    deck, ran = migrating_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await session_of(http)

    async def ask(request_id: int, method: str, params: dict[str, Any]) -> Any:
        response = await http.call(session, request_id, method, params, headers=ALICE)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async for event in response.events():
                if event.data:
                    return event.message
        return await response.json()

    created = (await ask(1, "tools/call", {"name": "migrate", "arguments": {"database": "users"},
                                           "task": {"ttl": 60000}}))["result"]["task"]  # fmt: skip
    assert (created["status"], created["statusMessage"]) == ("working", "Waiting for an approver (four eyes)")
    (approval,) = await deck.access.approvals.waiting("operator")
    assert approval.shown["tool"] == "migrate" and ran == []
    assert await deck.access.decide(approval.id, BOB, True, "planned") is None
    result = (await ask(2, "tasks/result", {"taskId": created["taskId"]}))["result"]
    assert result["structuredContent"] == {"result": "migrated users"} and ran == ["users"]

    created = (await ask(3, "tools/call", {"name": "migrate", "arguments": {"database": "orders"},
                                           "task": {"ttl": 60000}}))["result"]["task"]  # fmt: skip
    (approval,) = await deck.access.approvals.waiting("operator")
    assert await deck.access.decide(approval.id, BOB, False, "not today") is None
    result = (await ask(4, "tasks/result", {"taskId": created["taskId"]}))["result"]
    assert result["isError"] is True and "token:bob denied it: not today" in result["content"][0]["text"]
    status = (await ask(5, "tasks/get", {"taskId": created["taskId"]}))["result"]
    assert status["status"] == "failed" and ran == ["users"]


async def test_a_2026_task_waits_for_its_approver_and_never_runs_when_denied(tmp_path: Path) -> None:
    from eras import modern
    from transports.http.test_eras import headers_for

    deck, ran = migrating_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    tasks = {"extensions": {"io.modelcontextprotocol/tasks": {}}}

    async def ask(request_id: int, method: str, params: dict[str, Any], name: str | None = None) -> Any:
        message = modern(request_id, method, params, capabilities=tasks)
        headers = {**headers_for(message, **({"mcp-name": name} if name else {})), **ALICE}
        return await (await http.post(message, version=None, accept="application/json", headers=headers)).json()

    async def settled(task_id: str) -> Any:
        async with asyncio.timeout(5):
            while (found := (await ask(9, "tasks/get", {"taskId": task_id}, task_id))["result"])["status"] == "working":
                await asyncio.sleep(0)
        return found

    created = (await ask(1, "tools/call", {"name": "migrate", "arguments": {"database": "orders"}}))["result"]
    assert created["resultType"] == "task" and ran == []
    (approval,) = await deck.access.approvals.waiting("operator")
    assert approval.shown["tool"] == "migrate"
    assert await deck.access.decide(approval.id, BOB, False, "not today") is None
    found = await settled(created["taskId"])
    result = found["result"]  # the tasks extension ends a refused run with its isError result
    assert result["isError"] is True and "token:bob denied it: not today" in result["content"][0]["text"]
    assert ran == []  # denied: never run, not even before the decision

    created = (await ask(2, "tools/call", {"name": "migrate", "arguments": {"database": "users"}}))["result"]
    (approval,) = await deck.access.approvals.waiting("operator")
    assert await deck.access.decide(approval.id, BOB, True, "planned") is None
    found = await settled(created["taskId"])
    assert found["result"]["structuredContent"] == {"result": "migrated users"} and ran == ["users"]
