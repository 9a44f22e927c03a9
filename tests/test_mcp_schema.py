"""The test suite's schema net (``tests/mcp_schema.py``, ``tests/conftest.py``) and the drivers built on it.

Each driver gets one test that plants a violation in the server's output and expects the teardown verdict
(``verify(collect())``) to fail; the test calls the verdict itself, so it passes when the net holds.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from asgi_client import INIT, AsgiClient
from helpers import Harness, adder_deck, client
from http_client import HttpClient, serve_http
from mcp_schema import (
    LATEST,
    REVISIONS,
    WireChecker,
    _close,
    check,
    collect,
    format_checker,
    validator,
    verify,
)
from stdio_client import StdioServer
from tooldeck import Context, Deck
from tooldeck.protocol import jsonrpc
from tooldeck.transports.http import HttpApp

TESTS = Path(__file__).parent
PLANTED_DECK = "tests/transports/decks/planted.py"
SERVER_INFO = {"name": "s", "version": "1"}


# --- the closed form ----------------------------------------------------------------------------------------------

TOOL = {"name": "t", "inputSchema": {"type": "object"}}

# Members a later revision added: valid in the official 2025-03-26 schema (it is open), rejected by its closed form.
LATER_MEMBERS_IN_2025_03_26 = {
    "execution": ("Tool", {**TOOL, "execution": {"taskSupport": "optional"}}),
    "outputSchema": ("Tool", {**TOOL, "outputSchema": {"type": "object"}}),
    "title": ("Tool", {**TOOL, "title": "T"}),
    "icons": ("Tool", {**TOOL, "icons": [{"src": "https://example.com/i.png"}]}),
    "structuredContent": ("CallToolResult", {"content": [], "structuredContent": {"result": 1}}),
    "tasks capability": (
        "InitializeResult",
        {"protocolVersion": "2025-03-26", "capabilities": {"tasks": {}}, "serverInfo": SERVER_INFO},
    ),
}


@pytest.mark.parametrize("case", LATER_MEMBERS_IN_2025_03_26)
def test_members_of_later_revisions_fail_the_closed_2025_03_26_schema(case: str) -> None:
    definition, instance = LATER_MEMBERS_IN_2025_03_26[case]
    assert validator("2025-03-26", definition).is_valid(instance)  # the official schema cannot see it
    with pytest.raises(AssertionError, match=r"2025-03-26, closed schema\) invalid at \$"):
        check("2025-03-26", definition, instance)


FREE_FORM = {
    "a tool's input schema": (
        "Tool",
        {
            "name": "t",
            "inputSchema": {
                "type": "object",
                "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
                "properties": {"p": {"$ref": "#/$defs/Point", "description": "d"}, "s": {"type": "string", "x-k": 1}},
                "additionalProperties": False,
                "required": ["p"],
            },
        },
    ),
    "a tool's output schema": (
        "Tool",
        {**TOOL, "outputSchema": {"type": "object", "properties": {"r": {"anyOf": [{"type": "null"}]}}, "title": "R"}},
    ),
    "_meta": ("CallToolResult", {"content": [], "_meta": {"io.example/trace": {"id": 1}}}),
    "structuredContent": ("CallToolResult", {"content": [], "structuredContent": {"any": {"nested": [1, {}]}}}),
    "error data": (
        "JSONRPCErrorResponse",
        {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m", "data": {"x": [1]}}},
    ),
    "experimental and logging capabilities": (
        "InitializeResult",
        {
            "protocolVersion": LATEST,
            "capabilities": {"experimental": {"x": {"y": 1}}, "logging": {"z": 1}},
            "serverInfo": SERVER_INFO,
        },
    ),
    "a requested schema using pattern (the elicitation page's example)": (
        "ElicitRequest",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "elicitation/create",
            "params": {
                "message": "m",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                },
            },
        },
    ),
    "GetTaskResult's _meta (Result & Task)": (
        "GetTaskResult",
        {
            "taskId": "t",
            "status": "working",
            "createdAt": "2025-11-25T00:00:00Z",
            "lastUpdatedAt": "2025-11-25T00:00:00Z",
            "ttl": None,
            "_meta": {"k": 1},
        },
    ),
}


@pytest.mark.parametrize("case", FREE_FORM)
def test_schema_valued_and_free_form_places_stay_open(case: str) -> None:
    definition, instance = FREE_FORM[case]
    check(LATEST, definition, instance)


def test_a_2026_result_s_meta_takes_keys_of_its_own_beside_the_reserved_ones() -> None:
    meta = {"tooldeck/retryAfter": 30.0, "io.modelcontextprotocol/serverInfo": {"name": "d", "version": "1"}}
    result = {"content": [], "isError": True, "resultType": "complete", "_meta": meta}
    check("2026-07-28", "CallToolResult", result)
    with pytest.raises(AssertionError):
        check("2026-07-28", "CallToolResult", {**result, "unknownMember": 1})  # the result itself stays closed


def test_an_all_of_is_closed_as_the_union_of_its_branches() -> None:
    _, task = FREE_FORM["GetTaskResult's _meta (Result & Task)"]
    with pytest.raises(AssertionError, match=r"closed schema\) invalid at \$: .*'bogus' was unexpected"):
        check(LATEST, "GetTaskResult", {**task, "bogus": 1})
    with pytest.raises(AssertionError, match=r"closed schema\).*'bogus' was unexpected"):
        check(LATEST, "CancelTaskResult", {**task, "bogus": 1})


def test_closing_refuses_keywords_that_would_loosen_it() -> None:
    with pytest.raises(ValueError, match="'not'"):
        _close({"not": {"properties": {"a": {}}}}, "/X")


# --- formats ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", REVISIONS)
def test_the_formats_the_schemas_use_are_checked(version: str) -> None:
    assert {"uri", "uri-template", "byte"} <= set(format_checker(version).checkers)


@pytest.mark.parametrize("version", REVISIONS)
@pytest.mark.parametrize(
    ("definition", "instance", "format"),
    [
        ("Resource", {"uri": "not a uri", "name": "n"}, "uri"),
        ("Resource", {"uri": "no-scheme/path", "name": "n"}, "uri"),
        ("ResourceTemplate", {"uriTemplate": "file:///{path", "name": "n"}, "uri-template"),
        ("BlobResourceContents", {"uri": "file:///a", "blob": "abc"}, "byte"),  # length not a multiple of 4
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YWJj\n"}, "byte"),  # whitespace
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YW=j"}, "byte"),  # padding inside
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YW*j"}, "byte"),  # outside the alphabet
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YWJj_-8="}, "byte"),  # base64url, not base64
    ],
)
def test_an_invalid_format_fails(version: str, definition: str, instance: dict[str, Any], format: str) -> None:
    with pytest.raises(AssertionError, match=f"official schema.*is not a '{format}'"):
        check(version, definition, instance)


@pytest.mark.parametrize(
    ("definition", "instance"),
    [
        ("Resource", {"uri": "file:///notes/a.txt", "name": "n"}),
        ("Resource", {"uri": "urn:example:a", "name": "n"}),
        ("ResourceTemplate", {"uriTemplate": "file:///{+path}{?q}", "name": "n"}),
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YWJj"}),
        ("BlobResourceContents", {"uri": "file:///a", "blob": ""}),
        ("BlobResourceContents", {"uri": "file:///a", "blob": "YQ=="}),
    ],
)
def test_valid_formats_pass(definition: str, instance: dict[str, Any]) -> None:
    check(LATEST, definition, instance)


# --- the checker --------------------------------------------------------------------------------------------------

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def test_the_checker_records_instead_of_raising_and_the_verdict_fails() -> None:
    checker = WireChecker(name="probe")
    checker.sent(LIST_TOOLS)
    checker.received({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{**TOOL, "name": 3}]}})  # no exception here
    assert checker.count == 1 and len(checker.violations) == 1
    with pytest.raises(AssertionError, match=r"probe: ListToolsResult \(2025-11-25, official schema\) invalid at "
                                             r"\$\.tools\[0\]\.name: 3 is not of type 'string'"):  # fmt: skip
        verify(collect())
    assert collect() == []  # the verdict took the checker: the teardown does not see it again


def test_a_checker_that_saw_nothing_after_a_request_fails_the_verdict() -> None:
    silent = WireChecker(name="silent")
    silent.sent(LIST_TOOLS)
    with pytest.raises(AssertionError, match="silent: sent 1 request.* saw no server message"):
        verify(collect())


def test_opting_out_and_sending_no_request_excuse_silence() -> None:
    opted_out = WireChecker()
    opted_out.sent(LIST_TOOLS)
    opted_out.expect_no_messages()
    notifications_only = WireChecker()
    notifications_only.sent({"jsonrpc": "2.0", "method": "notifications/initialized"})
    WireChecker()  # never used
    verify(collect())


def test_the_check_cannot_be_switched_off_by_replacing_it() -> None:
    checker = WireChecker()
    with pytest.raises(AttributeError):
        checker.received = lambda message: None  # type: ignore[method-assign]
    with pytest.raises(AttributeError):
        checker.sent = lambda message: None  # type: ignore[method-assign]


def test_check_every_samples_but_counts_all() -> None:
    checker = WireChecker()
    checker.check_every(3)
    for i in range(5):
        checker.sent({**LIST_TOOLS, "id": i})
        checker.received({"jsonrpc": "2.0", "id": i, "result": {"tools": "not a list"}})
    assert checker.count == 5 and len(checker.violations) == 2  # the 1st and the 4th
    with pytest.raises(AssertionError):
        verify(collect())


def test_a_checker_shared_by_tests_is_judged_for_what_each_test_saw() -> None:
    shared = WireChecker(name="shared")  # as a module-scoped driver's would be
    shared.sent(LIST_TOOLS)
    shared.received({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
    verify(collect())  # the first test's teardown: clean
    assert collect() == []
    shared.received({"jsonrpc": "2.0", "id": 1, "result": {"tools": 7}})  # in a later test
    assert collect() == [shared]
    with pytest.raises(AssertionError, match=r"shared: ListToolsResult .* invalid at \$\.tools"):
        verify([shared])
    assert collect() == []  # reported once


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        ({"jsonrpc": "2.0", "method": "notifications/unknown"}, "unexpected notification"),
        ({"jsonrpc": "2.0", "id": 9, "result": {}}, "a response to no request"),
        ([{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}], "only valid in 2025-03-26"),
        ({"jsonrpc": "1.0", "id": 1, "result": {}}, "not a JSON-RPC 2.0 object"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}}, "invalid at \\$.id"),
    ],
)
def test_wire_level_complaints_are_recorded(message: Any, complaint: str) -> None:
    checker = WireChecker()
    checker.sent(LIST_TOOLS)
    checker.received(message)
    with pytest.raises(AssertionError, match=complaint):
        verify(collect())


def test_older_revisions_check_server_messages_against_their_own_definitions() -> None:
    checker = WireChecker()
    checker.sent({"jsonrpc": "2.0", "id": "init", "method": "initialize"})
    checker.received({"jsonrpc": "2.0", "id": "init", "result": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                                  "serverInfo": SERVER_INFO}})  # fmt: skip
    checker.received(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    )
    checker.received({"jsonrpc": "2.0", "id": 0, "method": "roots/list"})
    assert checker.version == "2025-06-18" and checker.violations == []
    checker.received({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1,
                                                                                        "bogus": 1}})  # fmt: skip
    with pytest.raises(AssertionError, match=r"ProgressNotification \(2025-06-18, closed schema\)"):
        verify(collect())


# --- one planted violation per driver -----------------------------------------------------------------------------

Plant = Callable[[dict[str, Any]], dict[str, Any]]
PLANTS: dict[str, tuple[Plant, str]] = {
    "an extra member": (lambda m: {**m, "planted": True}, r"closed schema\) invalid at \$: .*'planted' was unexpected"),
    "a wrong type": (
        lambda m: {**m, "result": {**m["result"], "_meta": "planted"}},
        r"official schema\) invalid at \$\.result\['_meta'\]: 'planted' is not of type 'object'",
    ),
}


@pytest.fixture(params=list(PLANTS))
def planted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every JSON-RPC result the server builds carries the planted fault; returns what the verdict must say."""
    plant, expected = PLANTS[request.param]
    result = jsonrpc.result
    monkeypatch.setattr(jsonrpc, "result", lambda request_id, value: plant(result(request_id, value)))
    return expected


def make_deck() -> Deck:
    deck = adder_deck("planted")

    @deck.tool
    def steps(ctx: Context) -> str:  # a sync tool: its progress is sent from a worker thread
        ctx.report_progress(1, 2)
        return "done"

    return deck


def test_harness_plant_fails_the_verdict(planted: str) -> None:
    harness = Harness(make_deck())
    harness.initialize()
    with pytest.raises(AssertionError, match=f"Harness: .*{planted}"):
        verify(collect())


async def test_client_plant_fails_the_verdict(planted: str) -> None:
    async with client(make_deck()) as c:
        await c.request("tools/list")
    with pytest.raises(AssertionError, match=f"helpers.client: .*{planted}"):
        verify(collect())


async def test_a_sync_tools_invalid_progress_fails_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    notification = jsonrpc.notification

    def broken(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if method == "notifications/progress" and params is not None:
            params = {**params, "progress": "half"}
        return notification(method, params)

    monkeypatch.setattr(jsonrpc, "notification", broken)
    async with client(make_deck()) as c:
        result = await c.call_tool("steps", progressToken="p")
        assert result["structuredContent"] == {"result": "done"}
    with pytest.raises(AssertionError, match=r"ProgressNotification .* invalid at \$\.params\.progress"):
        verify(collect())


async def test_asgi_client_plant_fails_the_verdict(planted: str) -> None:
    app = HttpApp(make_deck())
    http = AsgiClient(app)
    await http.initialize()
    await app.aclose()
    with pytest.raises(AssertionError, match=f"AsgiClient: .*{planted}"):
        verify(collect())


async def test_asgi_client_checks_a_4xx_error_body_nobody_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    error = jsonrpc.error
    monkeypatch.setattr(jsonrpc, "error", lambda request_id, err: {**error(request_id, err), "planted": True})
    app = HttpApp(make_deck())
    http = AsgiClient(app)
    session = await http.initialize()
    response = await http.post({"jsonrpc": "2.0", "id": 5, "method": 7}, session=session)
    assert response.status == 400  # its body is not read
    await app.aclose()
    with pytest.raises(AssertionError, match=r"AsgiClient: JSONRPCErrorResponse .*'planted' was unexpected"):
        verify(collect())


async def test_asgi_client_checks_an_error_body_without_an_id() -> None:
    app = HttpApp(make_deck())

    async def planted_app(scope: Any, receive: Any, send: Any) -> None:
        async def planted_send(message: dict[str, Any]) -> None:
            if message.get("body"):
                message = {**message, "body": message["body"].replace(b'"code":-32600', b'"code":"-32600"')}
            await send(message)

        await app(scope, receive, planted_send)

    http = AsgiClient(planted_app, host="evil.example.com")
    response = await http.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert response.status == 403
    await app.aclose()
    with pytest.raises(AssertionError, match=r"JSONRPCErrorResponse .* invalid at \$\.error\.code"):
        verify(collect())


@pytest.fixture
def planted_stdio() -> Iterator[StdioServer]:
    server = StdioServer("serve", PLANTED_DECK)
    yield server
    server.kill()


def test_stdio_server_plant_fails_the_verdict(planted_stdio: StdioServer) -> None:
    reply = planted_stdio.initialize()
    assert reply["planted"] is True  # planted by the deck at import, in the server process
    with pytest.raises(AssertionError, match=r"StdioServer\(serve .*planted.py\): .*'planted' was unexpected"):
        verify(collect())


def test_http_client_over_uvicorn_plant_fails_the_verdict() -> None:
    with serve_http(PLANTED_DECK) as url, HttpClient(url) as http:
        session = http.initialize()
        with http.stream({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=session) as stream:
            assert [m["id"] for m in stream.messages()] == [2]
    with pytest.raises(AssertionError, match=r"HttpClient: JSONRPCResultResponse .*'planted' was unexpected"):
        verify(collect())


# --- loop callbacks, tasks and threads ----------------------------------------------------------------------------


def recorded(hook: Any, name: str) -> list[str]:
    """The conftest list a hook records into (found through the hook: conftest is not importable by name)."""
    found: list[str] = getattr(sys.modules[hook.__module__], name)
    return found


async def test_an_exception_in_a_loop_callback_is_recorded() -> None:
    loop = asyncio.get_running_loop()
    errors = recorded(loop.get_exception_handler(), "loop_errors")
    ran = asyncio.Event()

    def callback() -> None:
        ran.set()
        raise RuntimeError("planted in a callback")

    loop.call_soon(callback)
    await ran.wait()  # the handler ran right after the callback, before this task resumes
    assert len(errors) == 1 and "planted in a callback" in errors[0]
    errors.clear()


async def test_a_task_exception_never_retrieved_is_recorded() -> None:
    errors = recorded(asyncio.get_running_loop().get_exception_handler(), "loop_errors")

    async def fail() -> None:
        raise RuntimeError("planted in a task")

    task = asyncio.get_running_loop().create_task(fail())
    await asyncio.wait([task])  # waits without retrieving the exception
    del task
    gc.collect()
    assert len(errors) == 1 and "Task exception was never retrieved" in errors[0] and "planted in a task" in errors[0]
    errors.clear()


def test_an_exception_that_ends_a_thread_is_recorded() -> None:
    errors = recorded(threading.excepthook, "thread_errors")

    def fail() -> None:
        raise RuntimeError("planted in a thread")

    thread = threading.Thread(target=fail, name="planted")
    thread.start()
    thread.join()
    assert len(errors) == 1 and "planted" in errors[0] and "planted in a thread" in errors[0]
    errors.clear()


INNER_TESTS = """
import asyncio, threading
from helpers import Harness
from tooldeck import Deck
from tooldeck.protocol import jsonrpc

async def test_loop_callback():
    ran = asyncio.Event()
    asyncio.get_running_loop().call_soon(lambda: (ran.set(), 1 / 0))
    await ran.wait()

async def test_task_never_retrieved():
    async def fail():
        raise RuntimeError("never retrieved")
    await asyncio.wait([asyncio.get_running_loop().create_task(fail())])

def test_thread():
    thread = threading.Thread(target=lambda: 1 / 0)
    thread.start()
    thread.join()

def test_wire(monkeypatch):
    result = jsonrpc.result
    monkeypatch.setattr(jsonrpc, "result", lambda i, r: {**result(i, r), "planted": 1})
    Harness(Deck("d")).initialize()

def test_clean():
    pass
"""


def test_the_teardown_fails_the_test_that_caused_it(tmp_path: Path) -> None:
    """End to end, in a pytest of its own: each planted fault errors its own test at teardown, and only that test."""
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rE", str(tmp_path / "test_inner.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    out = done.stdout
    assert "5 passed, 4 errors" in out, out
    for name, said in [
        ("test_loop_callback", "ZeroDivisionError"),
        ("test_task_never_retrieved", "Task exception was never retrieved"),
        ("test_thread", "exception in thread"),
        ("test_wire", "'planted' was unexpected"),
    ]:
        assert f"ERROR test_inner.py::{name}" in out, out
        section = re.split(r"\n_{3,} ", out.split(f"ERROR at teardown of {name}", 1)[1].split("\n", 1)[1])[0]
        assert said in section, section


def test_the_net_holds_for_modern_exchanges() -> None:
    from eras import modern

    checker = WireChecker(name="planted-modern")
    checker.sent(modern(1, "tools/list"))
    checker.received({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})  # no resultType
    checker.sent(modern(5, "prompts/list"))
    checker.received({"jsonrpc": "2.0", "id": 5, "result": {"prompts": [], "resultType": "complete"}})  # no hints
    checker.sent(modern(2, "resources/read", {"uri": "x://y"}))
    checker.received({"jsonrpc": "2.0", "id": 2, "error": {"code": -32002, "message": "gone"}})
    checker.sent(modern(3, "tools/list", version="v9"))
    checker.received({"jsonrpc": "2.0", "id": 3, "error": {"code": -32022, "message": "no", "data": {"supported": []}}})
    checker.sent(modern(4, "tools/call", {"name": "t"}))
    checker.received({"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage", "params": {}})
    with pytest.raises(AssertionError) as caught:
        verify([checker])
    text = str(caught.value)
    assert "ListToolsResult (2026-07-28, official schema)" in text
    assert "a prompts/list result without ttlMs and cacheScope" in text
    assert "error -32002 must not be sent in 2026-07-28" in text
    assert "UnsupportedProtocolVersionError (2026-07-28" in text
    assert "a server request in a 2026-07-28 exchange" in text


def test_the_net_holds_for_input_required_results() -> None:
    from eras import modern

    checker = WireChecker(name="planted-input-required")
    ask = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {"type": "object",
                                                                                           "properties": {}}}}  # fmt: skip
    checker.sent(modern(1, "tools/list"))
    checker.received({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "requestState": "s"}})
    checker.sent(modern(2, "tools/call", {"name": "t"}))
    checker.received({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required"}})
    checker.sent(modern(3, "resources/read", {"uri": "x://y"}))
    checker.received({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "input_required", "inputRequests": {"k": ask},
                                                            "ttlMs": 0, "cacheScope": "private"}})  # fmt: skip
    checker.sent(modern(4, "prompts/get", {"name": "p"}))
    checker.received({"jsonrpc": "2.0", "id": 4, "result": {"resultType": "input_required",
                                                            "inputRequests": {"k": {"method": "ping"}}}})  # fmt: skip
    with pytest.raises(AssertionError) as caught:
        verify([checker])
    text = str(caught.value)
    assert "an input_required result to tools/list" in text
    assert "an input_required result with neither inputRequests nor requestState" in text
    assert "an input_required result with cache hints" in text
    assert "InputRequiredResult (2026-07-28" in text
