"""The blocking testing client (``with Client(deck)``), in plain synchronous tests: what it returns, what it raises,
the deck's requests answered by callbacks, tasks, resources, prompts, notifications, and its own shutdown."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from mcp_schema import WireChecker
from tooldeck import Deck, ElicitResult
from tooldeck.security.principal import Principal
from tooldeck.testing import (
    Client,
    Elicitation,
    LogMessage,
    Progress,
    RequestError,
    SamplingRequest,
    SyncClient,
    ToolCallError,
)


def test_a_call_gives_data_text_content_and_the_progress_and_logs_it_caused(
    deck: Deck, schema_checked: list[WireChecker]
) -> None:
    with Client(deck) as client:
        assert isinstance(client, SyncClient)
        assert client.server_info == {"name": "features", "version": "2.0.0"}
        assert client.instructions == "Use it in tests."
        added = client.call_tool("add", {"a": 2, "b": 3})
        assert (added.data, added.text, added.is_error, added.progress, added.logs) == (5, "5", False, [], [])
        assert added.raw == {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5},
                             "isError": False}  # fmt: skip
        result = client.call_tool("forecast", {"city": "Oslo"})
    assert result.data == {"city": "Oslo", "celsius": 21.5}
    assert result.content == [{"type": "text", "text": '{"city":"Oslo","celsius":21.5}'}]
    assert result.progress == [Progress(1, 2, "looking"), Progress(2, 2, "done")]
    assert result.logs == [LogMessage("info", "forecast for Oslo")]  # debug is below the deck's default level
    assert client.logs == result.logs
    # Every message the deck sent was checked: initialize's result, two results, two progress, one log line.
    assert [c.count for c in schema_checked] == [6]


def test_log_level_asks_for_more_and_progress_false_sends_no_token(deck: Deck) -> None:
    seen: list[Progress] = []
    with Client(deck, log_level="debug") as client:
        result = client.call_tool("forecast", {"city": "Oslo"}, progress=seen.append)
        quiet = client.call_tool("forecast", {"city": "Bergen"}, progress=False)
    assert [(log.level, log.data) for log in result.logs] == [("debug", "a detail"), ("info", "forecast for Oslo")]
    assert seen == result.progress and len(seen) == 2
    assert quiet.progress == [] and len(quiet.logs) == 2
    assert [n["method"] for n in client.notifications].count("notifications/progress") == 2


def test_an_is_error_result_raises_tool_call_error_with_its_text_unless_asked_not_to(deck: Deck) -> None:
    with Client(deck) as client:
        with pytest.raises(ToolCallError, match=r"^tool 'refuse' reported an error: refused: no reason$") as caught:
            client.call_tool("refuse", {"reason": "no reason"})
        assert caught.value.result.is_error
        result = client.call_tool("refuse", {"reason": "again"}, raise_on_error=False)
        assert (result.is_error, result.text, result.data) == (True, "refused: again", None)
        with pytest.raises(ToolCallError, match=r"\$: missing required property 'b'"):
            client.call_tool("add", {"a": 1})


def test_the_deck_s_exceptions_reach_the_test_as_the_deck_reports_them(deck: Deck) -> None:
    masked = r"Tool 'crash' failed with an internal error \(ref [0-9a-f]+\)"
    with Client(deck) as client, pytest.raises(ToolCallError, match=masked):
        client.call_tool("crash")
    deck.options.mask_errors = False
    with Client(deck) as client, pytest.raises(ToolCallError, match="KeyError: 'secret detail'"):
        client.call_tool("crash")


def test_a_protocol_error_raises_request_error_with_code_and_message(deck: Deck) -> None:
    with Client(deck) as client:
        with pytest.raises(RequestError, match=r"^tools/call failed: -32602 Unknown tool: nope$") as caught:
            client.call_tool("nope")
        assert (caught.value.code, caught.value.message, caught.value.method) == (-32602, "Unknown tool: nope",
                                                                                  "tools/call")  # fmt: skip
        with pytest.raises(RequestError) as unknown:
            client.read_resource("config://missing")
        assert (unknown.value.code, unknown.value.data) == (-32002, {"uri": "config://missing"})
        with pytest.raises(RequestError, match="-32601"):
            client.request("no/such/method")


def test_elicitation_answers_from_a_callback_accept_decline_cancel(deck: Deck) -> None:
    asked: list[Elicitation] = []

    def nights(question: Elicitation) -> dict[str, Any]:
        asked.append(question)
        return {"nights": 3}

    with Client(deck, elicitation=nights, sampling=lambda request: "Hotel Bristol") as client:
        assert client.call_tool("book", {"city": "Oslo"}).data == "3 nights at Hotel Bristol (tooldeck.testing)"
    (question,) = asked
    assert (question.message, question.mode, question.url) == ("How many nights in Oslo?", "form", None)
    assert question.schema is not None and question.schema["required"] == ["nights"]
    for answer, said in [("decline", "Booking: decline."), (ElicitResult("cancel"), "Booking: cancel.")]:
        with Client(deck, elicitation=lambda question, answer=answer: answer) as client:
            assert client.call_tool("book", {"city": "Oslo"}).data == said


def test_without_a_callback_the_capability_is_not_declared(deck: Deck) -> None:
    with Client(deck) as client, pytest.raises(ToolCallError, match="does not support elicitation"):
        client.call_tool("book", {"city": "Oslo"})


def test_a_failing_callback_fails_the_test_at_the_call_with_its_own_exception(deck: Deck) -> None:
    def wrong(question: Elicitation) -> dict[str, Any]:
        assert question.message == "something else", "the deck asked the wrong question"
        return {}

    with Client(deck, elicitation=wrong) as client:
        with pytest.raises(AssertionError, match="the deck asked the wrong question"):
            client.call_tool("book", {"city": "Oslo"})
        assert client.call_tool("add", {"a": 1, "b": 1}).data == 2  # reported once, the session goes on
    bad = Client(deck, elicitation=lambda question: 42)  # type: ignore[arg-type,return-value]
    with (
        bad as client,
        pytest.raises(TypeError, match=r"the elicitation callback returned 42: return the content dict"),
    ):
        client.call_tool("book", {"city": "Oslo"})


def test_a_callback_can_refuse_with_a_json_rpc_error(deck: Deck) -> None:
    def refuse(request: SamplingRequest) -> str:
        raise RequestError(-1, "User rejected sampling request")

    client = Client(deck, elicitation=lambda q: {"nights": 1}, sampling=refuse)
    with client as open_client, pytest.raises(ToolCallError, match="User rejected sampling request"):
        open_client.call_tool("book", {"city": "Oslo"})


def test_sampling_sees_the_request_and_may_answer_with_a_whole_result(deck: Deck) -> None:
    requests: list[SamplingRequest] = []

    def model(request: SamplingRequest) -> dict[str, Any]:
        requests.append(request)
        return {"content": {"type": "text", "text": "Grand"}, "model": "fake-1", "stopReason": "endTurn"}

    with Client(deck, elicitation=lambda q: {"nights": 2}, sampling=model) as client:
        assert client.call_tool("book", {"city": "Oslo"}).data == "2 nights at Grand (fake-1)"
    (request,) = requests
    assert (request.text, request.max_tokens, request.system_prompt) == ("Suggest a hotel in Oslo", 50, "Be brief.")


def test_a_callback_that_calls_its_own_sync_client_gets_a_clear_error(deck: Deck) -> None:
    clients: list[SyncClient] = []

    def reentrant(question: Elicitation) -> dict[str, Any]:
        clients[0].list_tools()
        return {"nights": 1}

    with Client(deck, elicitation=reentrant) as client:
        clients.append(client)
        with pytest.raises(RuntimeError, match="a callback called the sync testing client it runs on"):
            client.call_tool("book", {"city": "Oslo"})


def test_tasks_run_to_their_result_and_can_be_listed_got_and_cancelled(deck: Deck, signals: Any) -> None:
    with Client(deck) as client:
        result = client.call_tool("render", {"scene": "intro"}, task=True, ttl=60_000)
        assert result.data == "video of intro"
        assert result.task is not None and (result.task.status, result.task.ttl) == ("working", 60_000)
        assert result.progress == [Progress(1, 1, "rendered")]
        assert result.logs == [LogMessage("info", "rendering intro")]
        assert client.get_task(result.task.task_id).status == "completed"

        started = client.start_task("hang")
        assert client.get_task(started.task_id).status == "working"
        assert started.task_id in [task.task_id for task in client.list_tasks()]
        assert client.cancel_task(started.task_id).status == "cancelled"
        assert signals.cancelled.wait(5)
        with pytest.raises(ToolCallError, match="Cancelled by the client"):
            client.task_result(started.task_id)
        with pytest.raises(RequestError, match=r"-32601"):
            client.call_tool("add", {"a": 1, "b": 2}, task=True)  # a tool that does not allow tasks


def test_resources_and_templates(deck: Deck) -> None:
    with Client(deck) as client:
        assert [r["uri"] for r in client.list_resources()] == ["config://app", "data://logo"]
        (template,) = client.list_resource_templates()
        assert template["uriTemplate"] == "users://{user_id}/profile"
        config = client.read_resource("config://app")
        assert (config.text, config.blob) == ('{"theme":"dark"}', None)
        assert config.contents[0]["mimeType"] == "application/json"
        assert client.read_resource("data://logo").blob == b"\x89PNG"
        assert client.read_resource("users://ada/profile").text == "profile of ada"
        assert client.complete("user_id", "a", resource="users://{user_id}/profile").values == ["ada", "alan"]


def test_prompts_and_completion(deck: Deck) -> None:
    with Client(deck) as client:
        (prompt,) = client.list_prompts()
        assert (prompt["name"], prompt["description"]) == ("review", "Ask for a code review.")
        got = client.get_prompt("review", {"code": "x = 1", "language": "go"})
        assert got.text == "Review this go code:\nx = 1"
        assert got.messages[0]["role"] == "user"
        with pytest.raises(RequestError, match="-32602"):
            client.get_prompt("review")  # code is required
        done = client.complete("language", "r", prompt="review")
        assert (done.values, done.has_more) == (["rust"], False)
        with pytest.raises(TypeError, match="exactly one of prompt=<name> or resource=<uri template>"):
            client.complete("language", "r")


def test_list_changed_from_the_test_s_thread_reaches_the_client(deck: Deck) -> None:
    with Client(deck) as client:
        deck.add_tool(lambda: "hi", name="greet")  # from this thread, not the client's loop
        client.wait_for_notification("notifications/tools/list_changed")
        assert "greet" in [tool["name"] for tool in client.list_tools()]
        with pytest.raises(TimeoutError, match=r"no notifications/tools/list_changed within 0.05 s"):
            client.wait_for_notification("notifications/tools/list_changed", timeout=0.05)
        deck.remove_prompt("review")  # announced before the resources change, in a burst or not
        deck.remove_resource("data://logo")
        client.wait_for_notification("notifications/resources/list_changed")
        client.wait_for_notification("notifications/prompts/list_changed", timeout=5)  # came first, not waited for


def test_a_request_that_outlives_the_timeout_is_cancelled_and_raises(deck: Deck, signals: Any) -> None:
    with Client(deck, timeout=0.2) as client:
        with pytest.raises(TimeoutError, match=r"tools/call got no answer within 0.2 s \(the request was cancelled"):
            client.call_tool("hang")
        assert signals.cancelled.wait(5)  # the deck was told, and stopped the call
        assert client.call_tool("add", {"a": 1, "b": 1}).data == 2


def test_the_principal_is_the_local_one_unless_given(deck: Deck) -> None:
    seen: list[Any] = []
    deck.policies.append(lambda request, call: seen.append(request.principal))
    ada = Principal("ada", scopes=["weather:read"])
    for principal in (ada, None):
        with Client(deck, principal=principal) as client:
            client.call_tool("add", {"a": 1, "b": 1})
    with Client(deck) as client:
        client.call_tool("add", {"a": 1, "b": 1})
    assert seen[:2] == [ada, None]
    assert seen[2] is deck.local_principal() and seen[2] is not None


def test_exit_stops_the_loop_thread_and_cancels_what_still_runs(deck: Deck, signals: Any) -> None:
    before = {t for t in threading.enumerate() if t.name == "tooldeck.testing"}
    with Client(deck) as client:
        client.start_task("hang")
        assert len({t for t in threading.enumerate() if t.name == "tooldeck.testing"} - before) == 1
    assert signals.cancelled.is_set()  # set before exit returned: nothing left running
    assert {t for t in threading.enumerate() if t.name == "tooldeck.testing"} == before
    with pytest.raises(RuntimeError, match=r"the client is closed: use it inside `with Client\(deck\) as client:`"):
        client.list_tools()


def test_a_deck_serves_one_client_after_another_and_two_at_once(deck: Deck) -> None:
    for _ in range(2):  # each on a loop of its own: the deck's services restart with the next client
        with Client(deck) as client:
            assert client.call_tool("render", {"scene": "a"}, task=True).data == "video of a"
    with Client(deck) as first, Client(deck) as second:
        assert first.call_tool("render", {"scene": "b"}, task=True).data == "video of b"
        assert second.call_tool("render", {"scene": "c"}, task=True).data == "video of c"


def test_a_client_opens_once() -> None:
    client = Client(Deck("once"))
    with client, pytest.raises(RuntimeError, match="already open"):
        client.__enter__()


def test_import_tooldeck_does_not_import_the_testing_client() -> None:
    code = "import sys, tooldeck; print('tooldeck.testing' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"


def test_the_schema_check_sees_what_the_client_receives(deck: Deck, schema_checked: list[WireChecker]) -> None:
    with Client(deck) as client:
        planted = {"jsonrpc": "2.0", "method": "notifications/made_up"}
        client._loop.call_soon_threadsafe(client._client.wire._from_server, planted)  # arrives before the exit
    (checker,) = schema_checked
    assert [str(v.violation) for v in checker.violations] == ["unexpected notification 'notifications/made_up'"]
    checker.reported = len(checker.violations)  # seen here: the teardown verdict need not report it again
