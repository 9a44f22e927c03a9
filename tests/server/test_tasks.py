"""Task-augmented tools/call and the tasks/* methods, over the in-process transport and over HTTP."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from asgi_client import AsgiClient
from helpers import all_pages, client, poll_until_cancelled
from mcp_schema import check
from tooldeck import Context, Deck, ToolError
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal
from tooldeck.transports.http import HttpApp

RELATED = "io.modelcontextprotocol/related-task"


def make_deck(**options: Any) -> tuple[Deck, dict[str, Any]]:
    deck = Deck("tasks", **options)
    gate: dict[str, Any] = {"release": None, "running": None, "stopped": None}

    @deck.tool(task="optional", immediate_response="Working on it.")
    async def crunch(n: int, ctx: Context) -> int:
        for i in range(n):
            await ctx.report_progress(i + 1, n)
            await asyncio.sleep(0.001)
        return n * 2

    @deck.tool(task="required")
    async def held(ctx: Context) -> str:
        if gate["running"] is not None:
            gate["running"].set()
        try:
            await gate["release"].wait()
        except asyncio.CancelledError:
            if gate["stopped"] is not None:
                gate["stopped"].set()
            raise
        return "released"

    @deck.tool(task="optional")
    def fails() -> str:
        raise ToolError("nothing to crunch")

    @deck.tool(task="optional")
    async def asks(ctx: Context) -> str:
        answer = await ctx.elicit("ok?", {"type": "object", "properties": {"yes": {"type": "boolean"}}})
        return answer.action

    @deck.tool
    def plain() -> str:
        return "plain"

    return deck, gate


async def create(c: Any, name: str, arguments: dict[str, Any] | None = None, **task: Any) -> dict[str, Any]:
    result = await c.request("tools/call", {"name": name, "arguments": arguments or {}, "task": task})
    check("2025-11-25", "CreateTaskResult", result)  # the ServerResult union does not list it: checked directly
    return result


async def test_capabilities_and_tool_execution_field() -> None:
    deck, _ = make_deck()
    async with client(deck) as c:
        assert c.initialize_result["capabilities"]["tasks"] == {  # type: ignore[index]
            "cancel": {}, "requests": {"tools": {"call": {}}}, "list": {}}  # fmt: skip
        tools = {t["name"]: t for t in await c.list_tools()}
        assert tools["crunch"]["execution"] == {"taskSupport": "optional"}
        assert tools["held"]["execution"] == {"taskSupport": "required"}
        assert "execution" not in tools["plain"]


async def test_a_task_runs_in_the_background_and_its_result_is_the_original() -> None:
    deck, _ = make_deck()
    async with client(deck) as c:
        created = await create(c, "crunch", {"n": 3}, ttl=60_000)
        task = created["task"]
        assert task["status"] == "working" and task["ttl"] == 60_000 and task["pollInterval"] == 50
        assert created["_meta"] == {"io.modelcontextprotocol/model-immediate-response": "Working on it."}
        result = await c.request("tasks/result", {"taskId": task["taskId"]})
        assert result["structuredContent"] == {"result": 6}
        assert result["_meta"] == {RELATED: {"taskId": task["taskId"]}}
        done = await c.request("tasks/get", {"taskId": task["taskId"]})
        assert done["status"] == "completed" and done["createdAt"] == task["createdAt"]
        statuses = [n["params"]["status"] for n in c.notifications if n["method"] == "notifications/tasks/status"]
        assert statuses == ["completed"]


async def test_progress_keeps_the_original_token() -> None:
    deck, _ = make_deck()
    async with client(deck) as c:
        params = {"name": "crunch", "arguments": {"n": 2}, "task": {}, "_meta": {"progressToken": "p"}}
        task = (await c.request("tools/call", params))["task"]
        await c.request("tasks/result", {"taskId": task["taskId"]})
        progress = [n["params"] for n in c.notifications if n["method"] == "notifications/progress"]
        assert [(p["progressToken"], p["progress"]) for p in progress] == [("p", 1), ("p", 2)]


async def test_tool_error_makes_the_task_failed_with_a_status_message() -> None:
    deck, _ = make_deck()
    async with client(deck) as c:
        task = (await create(c, "fails"))["task"]
        result = await c.request("tasks/result", {"taskId": task["taskId"]})
        assert result["isError"] is True
        got = await c.request("tasks/get", {"taskId": task["taskId"]})
        assert got["status"] == "failed" and got["statusMessage"] == "nothing to crunch"


async def test_task_support_rules() -> None:
    deck, gate = make_deck()
    gate["release"] = asyncio.Event()
    async with client(deck) as c:
        response = await c.request_raw("tools/call", {"name": "plain", "arguments": {}, "task": {}})
        assert response["error"]["code"] == -32601
        response = await c.request_raw("tools/call", {"name": "held", "arguments": {}})
        assert response["error"]["code"] == -32601 and "must be called as a task" in response["error"]["message"]
        for bad in ({"ttl": -1}, {"ttl": 1.5}, [], "x"):
            response = await c.request_raw("tools/call", {"name": "crunch", "arguments": {"n": 1}, "task": bad})
            assert response["error"]["code"] == -32602
        gate["release"].set()


async def test_a_task_field_is_ignored_when_tasks_were_not_declared() -> None:
    deck = Deck("no-tasks")

    @deck.tool
    def hello() -> str:
        return "hi"

    async with client(deck) as c:
        assert "tasks" not in c.initialize_result["capabilities"]  # type: ignore[index]
        result = await c.request("tools/call", {"name": "hello", "arguments": {}, "task": {"ttl": 5}})
        assert result["structuredContent"] == {"result": "hi"}
        response = await c.request_raw("tasks/get", {"taskId": "x"})
        assert response["error"]["code"] == -32601


async def test_cancel_sets_cancelled_before_answering_and_stops_the_work() -> None:
    deck, gate = make_deck()
    gate["release"], gate["running"], gate["stopped"] = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with client(deck) as c:
        task = (await create(c, "held"))["task"]
        await asyncio.wait_for(gate["running"].wait(), 5)
        waiting = asyncio.ensure_future(c.request("tasks/result", {"taskId": task["taskId"]}))
        cancelled = await c.request("tasks/cancel", {"taskId": task["taskId"]})
        assert cancelled["status"] == "cancelled"
        result = await asyncio.wait_for(waiting, 5)
        assert result["isError"] is True and result["_meta"] == {RELATED: {"taskId": task["taskId"]}}
        again = await c.request_raw("tasks/cancel", {"taskId": task["taskId"]})
        assert again["error"]["code"] == -32602 and "already cancelled" in again["error"]["message"]
        await asyncio.wait_for(gate["stopped"].wait(), 5)  # the work got CancelledError
        assert (await c.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "cancelled"  # terminal stays


async def test_cancel_reaches_a_sync_tool_polling_its_context() -> None:
    deck = Deck("tasks")
    started, stopped = threading.Event(), threading.Event()

    @deck.tool(task="optional")
    def grind(ctx: Context) -> str:  # a sync tool polls: cancelling its task cannot interrupt the worker thread
        return poll_until_cancelled(ctx, started, stopped, seconds=5)

    async with client(deck) as c:
        task = (await create(c, "grind"))["task"]
        assert await asyncio.to_thread(started.wait, 5)
        assert (await c.request("tasks/cancel", {"taskId": task["taskId"]}))["status"] == "cancelled"
        assert await asyncio.to_thread(stopped.wait, 5)  # the worker thread saw ctx.is_cancelled


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
async def test_unknown_task_ids_are_32602(method: str) -> None:
    deck, _ = make_deck()
    async with client(deck) as c:
        response = await c.request_raw(method, {"taskId": "no-such-task"})
        assert response["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
        response = await c.request_raw(method, {"taskId": 5})
        assert response["error"]["code"] == -32602


async def test_expired_tasks_are_gone() -> None:
    deck, _ = make_deck()
    now = [1_000_000.0]
    deck.task_manager().clock = lambda: now[0]  # the manager's clock is injected: time moves when the test says
    async with client(deck) as c:
        task = (await create(c, "crunch", {"n": 1}, ttl=2_000))["task"]
        await c.request("tasks/result", {"taskId": task["taskId"]})
        now[0] = 1_000_001.999
        assert (await c.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "completed"
        now[0] = 1_000_002.0  # created + ttl: expired from this instant on
        for method in ("tasks/get", "tasks/result"):
            response = await c.request_raw(method, {"taskId": task["taskId"]})
            assert response["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_ttl_is_capped_and_reported() -> None:
    deck, _ = make_deck(max_task_ttl=10.0)
    async with client(deck) as c:
        task = (await create(c, "crunch", {"n": 1}, ttl=999_999_999))["task"]
        assert task["ttl"] == 10_000


async def test_list_paginates_and_the_cap_per_requestor_is_enforced() -> None:
    deck, gate = make_deck(page_size=2, max_tasks_per_requestor=3)
    gate["release"] = asyncio.Event()
    async with client(deck) as c:
        ids = [(await create(c, "held"))["task"]["taskId"] for _ in range(3)]
        response = await c.request_raw("tools/call", {"name": "held", "arguments": {}, "task": {}})
        assert response["error"] == {"code": -32000, "message": "Too many active tasks: the limit is 3 per requestor"}
        assert [t["taskId"] for t in await all_pages(c, "tasks/list", "tasks")] == ids
        bad = await c.request_raw("tasks/list", {"cursor": "garbage"})
        assert bad["error"]["code"] == -32602
        gate["release"].set()


async def test_input_required_while_the_tool_elicits() -> None:
    deck, _ = make_deck()
    async with client(deck, capabilities={"elicitation": {}}) as c:
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        asked: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def elicit(params: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
            asked.put_nowait(params)
            return answer

        c.on_request("elicitation/create", elicit)
        task = (await create(c, "asks"))["task"]
        params = await asyncio.wait_for(asked.get(), 5)
        assert params["_meta"] == {RELATED: {"taskId": task["taskId"]}}
        assert (await c.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "input_required"
        answer.set_result({"action": "accept", "content": {"yes": True}})
        result = await c.request("tasks/result", {"taskId": task["taskId"]})
        assert result["structuredContent"] == {"result": "accept"}
        statuses = [n["params"]["status"] for n in c.notifications if n["method"] == "notifications/tasks/status"]
        assert statuses == ["input_required", "working", "completed"]


async def test_any_session_holding_the_id_may_use_an_unbound_task() -> None:
    deck, _ = make_deck()
    async with client(deck) as first:
        task = (await create(first, "crunch", {"n": 1}))["task"]
    async with client(deck) as second:  # a reconnect: the id is the key
        result = await second.request("tasks/result", {"taskId": task["taskId"]})
        assert result["structuredContent"] == {"result": 2}


@pytest.mark.parametrize(
    "other",
    [Principal("bob"), None, Principal("alice", method="jwt", issuer="https://id.example")],
    ids=["another-principal", "anonymous", "the-same-subject-by-another-method"],
)
async def test_tasks_bound_to_a_principal_are_invisible_to_others(other: Principal | None) -> None:
    deck, _ = make_deck()
    async with client(deck) as alice:
        alice.session.principal = Principal("alice")
        task = (await create(alice, "crunch", {"n": 1}))["task"]
        await alice.request("tasks/result", {"taskId": task["taskId"]})
        async with client(deck) as intruder:
            intruder.session.principal = other
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                response = await intruder.request_raw(method, {"taskId": task["taskId"]})
                assert response["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
            assert (await intruder.request("tasks/list", {}))["tasks"] == []
        assert [t["taskId"] for t in (await alice.request("tasks/list", {}))["tasks"]] == [task["taskId"]]


@pytest.mark.slow
async def test_a_thousand_concurrent_tasks_lose_no_result() -> None:
    deck, _ = make_deck(max_tasks_per_requestor=2000)
    async with client(deck) as c:
        c.checker.check_every(50)  # type: ignore[attr-defined]
        created = await asyncio.gather(*(c.request("tools/call", {"name": "crunch", "arguments": {"n": 1},
                                                                  "task": {}}) for _ in range(1000)))  # fmt: skip
        results = await asyncio.gather(*(c.request("tasks/result", {"taskId": t["task"]["taskId"]}) for t in created))
        assert [r["structuredContent"] for r in results] == [{"result": 2}] * 1000


async def test_over_http_tasks_list_is_not_offered_and_results_cross_sessions() -> None:
    deck, _ = make_deck()
    app = HttpApp(deck)
    http = AsgiClient(app)
    session = await http.initialize()
    call = await http.call(session, 1, "tools/call", {"name": "crunch", "arguments": {"n": 2}, "task": {}})
    created = await call.json()
    check("2025-11-25", "CreateTaskResult", created["result"])
    task_id = created["result"]["task"]["taskId"]
    listing = await http.call(session, 2, "tasks/list", {})
    assert (await listing.json())["error"]["code"] == -32601
    other = await http.initialize()  # another session (a reconnect) with the id
    result = await (await http.call(other, 3, "tasks/result", {"taskId": task_id})).json()
    assert result["result"]["structuredContent"] == {"result": 4}
    await app.aclose()


async def test_over_http_a_tasks_notifications_arrive_on_the_get_stream() -> None:
    deck, _ = make_deck()
    app = HttpApp(deck)
    http = AsgiClient(app)
    session = await http.initialize()
    stream = await http.request("GET", headers={"accept": "text/event-stream", "mcp-session-id": session})
    events = stream.events()
    assert (await events.__anext__()).data == ""  # priming
    params = {"name": "crunch", "arguments": {"n": 2}, "task": {}, "_meta": {"progressToken": "tok"}}
    created = await (await http.call(session, 1, "tools/call", params)).json()
    assert created["result"]["task"]["status"] == "working"
    methods = []
    while "notifications/tasks/status" not in methods:
        message = (await events.__anext__()).message
        methods.append(message["method"])
        if message["method"] == "notifications/progress":
            assert message["params"]["progressToken"] == "tok"
    assert methods.count("notifications/progress") == 2
    await stream.close()
    await app.aclose()


async def test_a_task_is_authorized_before_it_is_created() -> None:
    # The task's work runs as an admitted call: the authorize step runs once, before the task exists, and a refusal
    # is the call's answer (no task is made, nothing runs).
    deck = Deck("guarded-tasks")
    ran: list[str] = []

    @deck.tool(task="optional", security_level=5, scopes=["batch:run"])
    def batch() -> str:
        ran.append("batch")
        return "done"

    deck.use_policy(Policy({}))
    async with client(deck) as c:
        for principal in (None, Principal("bob")):
            c.session.principal = principal
            reply = await c.request_raw("tools/call", {"name": "batch", "arguments": {}, "task": {}})
            assert reply["error"]["code"] == -32000, reply
            assert (await c.request("tasks/list", {}))["tasks"] == []
        c.session.principal = Principal("bob", scopes={"batch:run"})
        task = (await create(c, "batch"))["task"]
        assert (await c.request("tasks/result", {"taskId": task["taskId"]}))["structuredContent"] == {"result": "done"}
    assert ran == ["batch"]
