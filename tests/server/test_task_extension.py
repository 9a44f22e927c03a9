"""The tasks extension io.modelcontextprotocol/tasks of 2026-07-28 against the sans-IO session (server/task_extension.py,
server/task_inputs.py): negotiation per request, the CreateTaskResult, tasks/get|update|cancel, questions inside a
task, a tool that asks before its task starts, and the two eras' tasks kept apart. Every message is checked against
the 2026-07-28 schema and the extension's definitions (tests/mcp_schema.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eras import SERVER_INFO_KEY
from server.test_stateless import Driver
from tooldeck import Context, Deck, ToolError
from tooldeck.protocol.errors import InvalidParamsError
from tooldeck.security.principal import Principal
from tooldeck.testing import Client
from tooldeck.testing.results import RequestError

EXT = "io.modelcontextprotocol/tasks"
TASKS = {"extensions": {EXT: {}}}
ASKING = {"elicitation": {}, "sampling": {}, "extensions": {EXT: {}}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
RELEASE = asyncio.Event()  # what `waits` waits for (a fresh one per test: see the fixture)


def task_deck(**options: Any) -> Deck:
    deck = Deck("tasks-ext", version="1.0.0", **options)

    @deck.tool
    def greet(name: str) -> str:
        """Greets at once (never a task)."""
        return f"Hello, {name}!"

    @deck.tool(task="optional")
    async def compute(n: int) -> int:
        """Doubles n (a task when the client can take one)."""
        return 2 * n

    @deck.tool(task="optional")
    async def waits(ctx: Context) -> str:
        """Waits until the test releases it; reports progress and logs meanwhile (a task sends neither)."""
        await ctx.report_progress(1, 2)
        await ctx.info("waiting")
        await RELEASE.wait()
        return "released"

    @deck.tool(task="required")
    async def only_task() -> str:
        """Runs only as a task."""
        return "ran as a task"

    @deck.tool(task="optional")
    async def broken() -> str:
        """Ends with a tool error."""
        raise ToolError("broken on purpose")

    @deck.tool(task="optional")
    async def protocol_fault() -> str:
        """Ends with a JSON-RPC error of its own."""
        raise InvalidParamsError("protocol_fault refuses its input")

    @deck.tool(task="optional")
    async def confirm(ctx: Context) -> str:
        """Asks twice under the same key: the task gives the second question a key of its own."""
        first = await ctx.elicit("First?", NAME_FORM, key="confirm")
        second = await ctx.elicit("Second?", NAME_FORM, key="confirm")
        return f"{(first.content or {}).get('name')} then {(second.content or {}).get('name')}"

    @deck.tool(task="optional")
    async def two_at_once(ctx: Context) -> str:
        """Asks two things at once, then samples."""
        a, b = await asyncio.gather(ctx.elicit("A?", NAME_FORM), ctx.elicit("B?", NAME_FORM))
        reply = await ctx.sample("Say hi", max_tokens=10)
        return f"{(a.content or {}).get('name')}+{(b.content or {}).get('name')}:{reply['content']['text']}"

    @deck.tool(task="required", ask_before_task=True)
    async def named_job(ctx: Context) -> str:
        """Asks a name in its request, then continues as a task."""
        answer = await ctx.elicit("Your name?", NAME_FORM, key="user_name")
        await ctx.continue_as_task()
        return f"job for {(answer.content or {}).get('name')}"

    @deck.tool(task="optional", ask_before_task=True)
    async def maybe_task(quick: bool, ctx: Context) -> str:
        """Becomes a task only when it is not quick."""
        if not quick:
            await ctx.continue_as_task()
        return "quick" if quick else "slow"

    return deck


@pytest.fixture(autouse=True)
def _fresh_release() -> None:
    global RELEASE
    RELEASE = asyncio.Event()


@pytest.fixture
def deck() -> Deck:
    return task_deck()


@pytest.fixture
def driver(deck: Deck) -> Driver:
    return Driver(deck)


class Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> int:
        self.n += 1
        return self.n


async def call(driver: Driver, ids: Ids, name: str, arguments: dict[str, Any] | None = None,
               capabilities: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:  # fmt: skip
    return await driver.request(ids(), "tools/call", {"name": name, "arguments": arguments or {}, **params},
                                capabilities=TASKS if capabilities is None else capabilities)  # fmt: skip


async def finished(deck: Deck, task_id: str) -> None:
    """Wait for the task's work to end (the event its asyncio task is), then one more loop turn for the store."""
    running = deck.task_manager().running.get(task_id)
    if running is not None:
        await asyncio.wait_for(asyncio.shield(running), 10)


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the loop until ``condition`` holds (the work runs on this loop: no time passes, turns do)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def pending(deck: Deck, task_id: str) -> int:
    inputs = deck.task_manager().inputs.get(task_id)
    return 0 if inputs is None else len(inputs.pending)


# --- negotiation -----------------------------------------------------------------------------------------------------


async def test_discover_offers_the_extension_and_no_legacy_tasks_capability(driver: Driver) -> None:
    result = (await driver.request(1, "server/discover"))["result"]
    assert result["capabilities"]["extensions"] == {EXT: {}}
    assert "tasks" not in result["capabilities"]


async def test_a_deck_without_task_tools_offers_no_extension_and_no_task_methods() -> None:
    plain = Deck("plain")
    plain.add_tool(lambda: "x", name="x")
    driver = Driver(plain)
    assert (await driver.request(1, "server/discover"))["result"]["capabilities"]["extensions"] == {}
    refused = await driver.request(2, "tasks/get", {"taskId": "abc"}, capabilities=TASKS)
    assert refused["error"]["code"] == -32601


async def test_a_task_tool_is_a_plain_call_for_a_request_without_the_extension(driver: Driver) -> None:
    ids = Ids()
    answer = await call(driver, ids, "compute", {"n": 21}, capabilities={})
    assert answer["result"]["content"] == [{"type": "text", "text": "42"}]
    assert answer["result"]["resultType"] == "complete" and "taskId" not in answer["result"]


async def test_a_task_required_tool_without_the_extension_is_32021_naming_it(driver: Driver) -> None:
    refused = await call(Driver(task_deck()), Ids(), "only_task", capabilities={"elicitation": {}})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    assert EXT in refused["error"]["message"]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_without_the_extension_are_32021(driver: Driver, method: str) -> None:
    params = {"taskId": "gate-test", **({"inputResponses": {}} if method == "tasks/update" else {})}
    refused = await driver.request(1, method, params, capabilities={"elicitation": {}})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"]["requiredCapabilities"] == {"extensions": {EXT: {}}}


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
async def test_the_removed_task_methods_are_32601(driver: Driver, method: str) -> None:
    refused = await driver.request(1, method, {"taskId": "x"} if method == "tasks/result" else {}, capabilities=TASKS)
    assert refused["error"]["code"] == -32601


async def test_the_legacy_task_param_neither_errs_nor_makes_a_task(driver: Driver) -> None:
    answer = await call(driver, Ids(), "greet", {"name": "Ada"}, task={"ttl": 60000})
    assert answer["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]


# --- the lifecycle ---------------------------------------------------------------------------------------------------


async def test_a_task_tool_answers_with_a_flat_create_task_result_that_tasks_get_finds_at_once(
    deck: Deck, driver: Driver
) -> None:
    ids = Ids()
    created = (await call(driver, ids, "waits"))["result"]
    assert created["resultType"] == "task" and created["status"] == "working"
    assert set(created) == {"resultType", "taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs",
                            "_meta"}  # fmt: skip
    assert created["ttlMs"] == 3_600_000 and created["_meta"][SERVER_INFO_KEY]["name"] == "tasks-ext"
    got = (await driver.request(ids(), "tasks/get", {"taskId": created["taskId"]}, capabilities=TASKS))["result"]
    assert (got["taskId"], got["status"], got["resultType"]) == (created["taskId"], "working", "complete")
    assert "result" not in got and "inputRequests" not in got
    RELEASE.set()
    await finished(deck, created["taskId"])
    done = (await driver.request(ids(), "tasks/get", {"taskId": created["taskId"]}, capabilities=TASKS))["result"]
    assert done["status"] == "completed" and "pollIntervalMs" not in done
    assert done["result"]["content"] == [{"type": "text", "text": "released"}]
    assert done["result"]["resultType"] == "complete"
    # Progress and logs of a task have no channel in the extension: nothing but responses reached the client.
    assert [m for m in driver.out if "method" in m] == []


async def test_a_tool_error_completes_the_task_and_a_json_rpc_error_fails_it(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    for name, status in (("broken", "completed"), ("protocol_fault", "failed")):
        task_id = (await call(driver, ids, name))["result"]["taskId"]
        await finished(deck, task_id)
        got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]
        assert got["status"] == status
        if status == "completed":
            assert got["result"]["isError"] is True
            assert got["result"]["content"][0]["text"] == "broken on purpose"
        else:
            assert got["error"] == {"code": -32602, "message": "protocol_fault refuses its input"}
            assert got["statusMessage"] == "protocol_fault refuses its input" and "result" not in got


async def test_a_tools_protocol_error_is_its_json_rpc_error_in_a_plain_call_too(driver: Driver) -> None:
    refused = await call(driver, Ids(), "protocol_fault", capabilities={})
    assert refused["error"] == {"code": -32602, "message": "protocol_fault refuses its input"}


async def test_cancel_acknowledges_a_running_and_a_finished_task_alike(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    task_id = (await call(driver, ids, "waits"))["result"]["taskId"]
    ack = (await driver.request(ids(), "tasks/cancel", {"taskId": task_id}, capabilities=TASKS))["result"]
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]
    assert got["status"] == "cancelled"
    await until(lambda: task_id not in deck.task_manager().running)  # the work was stopped
    again = (await driver.request(ids(), "tasks/cancel", {"taskId": task_id}, capabilities=TASKS))["result"]
    assert again["resultType"] == "complete" and "status" not in again


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_an_unknown_task_is_32602(driver: Driver, method: str) -> None:
    params = {"taskId": "no-such-task", **({"inputResponses": {}} if method == "tasks/update" else {})}
    refused = await driver.request(1, method, params, capabilities=TASKS)
    assert refused["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_a_malformed_task_request_is_32602_naming_the_field(driver: Driver) -> None:
    refused = await driver.request(1, "tasks/get", {"taskId": 7}, capabilities=TASKS)
    assert refused["error"]["code"] == -32602 and '"taskId"' in refused["error"]["message"]
    task_id = (await call(driver, Ids(), "waits"))["result"]["taskId"]
    refused = await driver.request(9, "tasks/update", {"taskId": task_id, "inputResponses": [1]}, capabilities=TASKS)
    assert refused["error"]["code"] == -32602 and '"inputResponses"' in refused["error"]["message"]
    RELEASE.set()


# --- questions inside a task -----------------------------------------------------------------------------------------


async def test_a_task_waits_in_input_required_until_tasks_update_answers_each_question(
    deck: Deck, driver: Driver
) -> None:
    ids = Ids()
    task_id = (await call(driver, ids, "two_at_once", capabilities=ASKING))["result"]["taskId"]
    await until(lambda: pending(deck, task_id) == 2)
    got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=ASKING))["result"]
    assert got["status"] == "input_required" and list(got["inputRequests"]) == ["input-1", "input-2"]
    assert got["inputRequests"]["input-1"]["method"] == "elicitation/create"
    # An unknown key is ignored; a malformed answer to a waiting one refuses the update and delivers nothing.
    bad = {"input-1": {"action": "accept", "content": {"name": "Ada"}}, "input-2": {"action": "maybe"}}
    refused = await driver.request(ids(), "tasks/update", {"taskId": task_id, "inputResponses": bad},
                                   capabilities=ASKING)  # fmt: skip
    assert refused["error"]["code"] == -32602 and "inputResponses.input-2" in refused["error"]["message"]
    partial = {"input-1": {"action": "accept", "content": {"name": "Ada"}}, "never-asked": {"x": 1}}
    ack = await driver.request(ids(), "tasks/update", {"taskId": task_id, "inputResponses": partial},
                               capabilities=ASKING)  # fmt: skip
    assert ack["result"]["resultType"] == "complete"
    got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=ASKING))["result"]
    assert got["status"] == "input_required" and list(got["inputRequests"]) == ["input-2"]
    await driver.request(ids(), "tasks/update", capabilities=ASKING,
                         params={"taskId": task_id, "inputResponses": {"input-2": {"action": "accept",
                                                                                   "content": {"name": "Bo"}}}})  # fmt: skip
    await until(lambda: pending(deck, task_id) == 1)
    got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=ASKING))["result"]
    assert list(got["inputRequests"]) == ["input-3"]  # the sampling question: a key never used before
    assert got["inputRequests"]["input-3"]["method"] == "sampling/createMessage"
    sampled = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    await driver.request(ids(), "tasks/update", {"taskId": task_id, "inputResponses": {"input-3": sampled}},
                         capabilities=ASKING)  # fmt: skip
    await finished(deck, task_id)
    done = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=ASKING))["result"]
    assert done["result"]["content"][0]["text"] == "Ada+Bo:hi"


async def test_a_key_the_tool_asks_under_twice_is_never_reused(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    task_id = (await call(driver, ids, "confirm", capabilities=ASKING))["result"]["taskId"]
    keys = []
    for name in ("Ada", "Bo"):
        await until(lambda: pending(deck, task_id) == 1)
        got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=ASKING))["result"]
        (key,) = got["inputRequests"]
        keys.append(key)
        answer = {key: {"action": "accept", "content": {"name": name}}}
        await driver.request(ids(), "tasks/update", {"taskId": task_id, "inputResponses": answer},
                             capabilities=ASKING)  # fmt: skip
        await until(lambda: pending(deck, task_id) == 0)
    await finished(deck, task_id)
    assert keys == ["confirm", "confirm-2"]


async def test_a_question_the_request_did_not_declare_fails_the_task_with_32021(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    task_id = (await call(driver, ids, "confirm", capabilities=TASKS))["result"]["taskId"]
    await finished(deck, task_id)
    got = (await driver.request(ids(), "tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]
    assert got["status"] == "failed" and got["error"]["code"] == -32021


# --- a tool that asks before its task ---------------------------------------------------------------------------------


async def test_ask_before_task_gathers_input_in_rounds_then_continues_as_a_task(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    caps = {"elicitation": {}, "extensions": {EXT: {}}}
    first = (await call(driver, ids, "named_job", capabilities=caps))["result"]
    assert first["resultType"] == "input_required" and "taskId" not in first
    assert list(first["inputRequests"]) == ["user_name"]
    answers = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
    second = (await call(driver, ids, "named_job", capabilities=caps, inputResponses=answers,
                         requestState=first["requestState"]))["result"]  # fmt: skip
    assert second["resultType"] == "task" and "requestState" not in second and "inputRequests" not in second
    await finished(deck, second["taskId"])
    done = (await driver.request(ids(), "tasks/get", {"taskId": second["taskId"]}, capabilities=caps))["result"]
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "job for Alice")


async def test_ask_before_task_that_never_continues_as_a_task_answers_in_its_request(
    deck: Deck, driver: Driver
) -> None:
    ids = Ids()
    quick = (await call(driver, ids, "maybe_task", {"quick": True}))["result"]
    assert (quick["resultType"], quick["content"][0]["text"]) == ("complete", "quick")
    slow = (await call(driver, ids, "maybe_task", {"quick": False}))["result"]
    assert slow["resultType"] == "task"
    await finished(deck, slow["taskId"])
    # Without the extension the same tool just runs in its request: continue_as_task does nothing there.
    plain = (await call(driver, ids, "maybe_task", {"quick": False}, capabilities={}))["result"]
    assert plain["content"][0]["text"] == "slow"


# --- eras and principals apart ---------------------------------------------------------------------------------------


async def test_each_eras_methods_reach_only_their_own_eras_tasks(deck: Deck, driver: Driver) -> None:
    ids = Ids()
    modern_id = (await call(driver, ids, "compute", {"n": 1}))["result"]["taskId"]
    await finished(deck, modern_id)
    async with Client(deck) as client:
        legacy_id = (await client.start_task("compute", {"n": 2})).task_id
        with pytest.raises(RequestError, match="Task not found"):
            await client.get_task(modern_id)
        await client.task_result(legacy_id)
        refused = await driver.request(ids(), "tasks/get", {"taskId": legacy_id}, capabilities=TASKS)
        assert refused["error"]["code"] == -32602
        found = await driver.request(ids(), "tasks/get", {"taskId": modern_id}, capabilities=TASKS)
        assert found["result"]["status"] == "completed"


async def test_another_principals_task_is_as_unknown_as_none() -> None:
    deck = task_deck()
    ada = Driver(deck, principal=Principal("ada"))
    bo = Driver(deck, principal=Principal("bo"))
    task_id = (await call(ada, Ids(), "compute", {"n": 1}))["result"]["taskId"]
    await finished(deck, task_id)
    for method in ("tasks/get", "tasks/cancel"):
        refused = await bo.request(5, method, {"taskId": task_id}, capabilities=TASKS)
        assert refused["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert (await ada.request(6, "tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]["status"] == (
        "completed"
    )


async def test_a_finished_task_outlives_its_process_in_the_sqlite_store(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'tasks.sqlite3'}"
    first = task_deck(task_store=store)
    driver = Driver(first)
    task_id = (await call(driver, Ids(), "compute", {"n": 5}))["result"]["taskId"]
    await finished(first, task_id)
    await first.task_manager().aclose()
    second = task_deck(task_store=store)
    got = (await Driver(second).request(1, "tasks/get", {"taskId": task_id}, capabilities=TASKS))["result"]
    assert got["status"] == "completed" and got["result"]["structuredContent"] == {"result": 10}
    await second.task_manager().aclose()


# --- notifications/tasks on a listen stream ----------------------------------------------------------------------------


async def test_a_listen_stream_with_task_ids_carries_each_tasks_state_and_its_changes(deck: Deck) -> None:
    from server.test_subscriptions import ACK, SUB, cancel, listen, next_messages

    ids = Ids()
    driver = Driver(deck, principal=Principal("ada"))
    task_id = (await call(driver, ids, "waits"))["result"]["taskId"]
    other = Driver(deck, principal=Principal("bo"))
    foreign = (await call(other, Ids(), "waits"))["result"]["taskId"]
    start = len(driver.out)
    await listen(driver, "L", {"taskIds": [task_id, foreign, "no-such-task"]}, capabilities=TASKS)
    sent = await next_messages(driver, start, 2)
    assert sent[0]["method"] == ACK and sent[0]["params"]["notifications"] == {"taskIds": [task_id]}
    assert sent[1]["method"] == "notifications/tasks"
    assert (sent[1]["params"]["taskId"], sent[1]["params"]["status"]) == (task_id, "working")
    assert sent[1]["params"]["_meta"] == {SUB: "L"} and "resultType" not in sent[1]["params"]
    RELEASE.set()
    await finished(deck, task_id)
    await finished(deck, foreign)
    done = (await next_messages(driver, start, 3))[2]
    assert done["params"]["status"] == "completed"
    assert done["params"]["result"]["content"] == [{"type": "text", "text": "released"}]
    assert len(driver.out) == start + 3  # nothing about another principal's task
    cancel(driver, "L")


async def test_task_ids_in_a_listen_filter_need_the_extension_and_must_be_strings(driver: Driver) -> None:
    refused = await driver.request(1, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={})
    assert refused["error"]["code"] == -32021
    assert refused["error"]["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    refused = await driver.request(2, "subscriptions/listen", {"notifications": {"taskIds": [1]}}, capabilities=TASKS)
    assert refused["error"]["code"] == -32602 and "taskIds" in refused["error"]["message"]
