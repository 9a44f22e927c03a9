"""The audit trail on a served deck, in process: every kind of call leaves exactly one record, in the file before its
answer is back (read at once, never flushed), an unknown tool and another principal's session included; and the
trail fails closed — a call whose record cannot be written is refused (an isError result for tools/call, 503 over
HTTP for the rest), later calls are refused before they run, and all runs again once the trail can be written.
Failures are injected at the file sink's one write seam; the processes in test_audit_processes.py fail for real."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from asgi_client import AsgiClient
from helpers import client, sleep_until_cancelled
from tooldeck import Context, Deck, ToolError
from tooldeck.protocol.errors import UrlElicitationRequiredError
from tooldeck.security.audit import verify
from tooldeck.security.principal import Principal
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http.app import HttpApp

UNAVAILABLE = "the audit trail is unavailable (No space left on device): the call was refused; try again later"


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def audited(tmp_path: Path, extra: str = "") -> tuple[Deck, Path, list[int]]:
    """A deck with one tool of each kind, under a policy with an audit trail (and ``extra``); the list counts runs."""
    trail = tmp_path / "audit.jsonl"
    deck = Deck("audited")
    ran: list[int] = []

    @deck.tool
    def work(n: int) -> int:
        ran.append(n)
        return n

    @deck.tool(task="optional")
    def queued(n: int) -> int:
        ran.append(n)
        return n

    @deck.tool
    def fail() -> str:
        raise ToolError("it broke")

    @deck.tool(security_level=5, scopes=["vault:read"])
    def vault() -> str:
        return "secret"

    @deck.tool
    def visit() -> str:
        raise UrlElicitationRequiredError([], "visit first")

    @deck.tool
    def limited() -> str:
        return "once"

    @deck.tool
    async def nested(value: dict[str, Any], ctx: Context) -> str:
        return "ok"

    deck.add_resource("notes://open", "open notes")
    deck.add_resource("notes://secret", "secret notes", security_level=2)

    @deck.prompt(security_level=2)
    def brief() -> str:
        return "brief"

    policy = tmp_path / "policy.toml"
    policy.write_text(f'[audit]\nfile = "{trail}"\n[sanitise]\nmax_depth = 2\n{extra}')
    deck.apply_policy(policy)
    return deck, trail, ran


def fill_the_disk(deck: Deck) -> Any:
    """Make the deck's audit file sink fail every write with ENOSPC (a full disk); returns the sink."""
    sink = deck._security.sink  # type: ignore[attr-defined]

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    sink._os_write = full
    return sink


# --- coverage: one record per call, written before the answer ------------------------------------------------------


CALLS: list[tuple[str, dict[str, Any], tuple[str, str, str]]] = [
    ("work", {"n": 1}, ("work", "allowed", "ok")),
    ("fail", {}, ("fail", "allowed", "error")),  # the tool's ToolError
    ("work", {"n": "one"}, ("work", "allowed", "error")),  # invalid arguments
    ("visit", {}, ("visit", "allowed", "error")),  # the tool's own JSON-RPC error
    ("vault", {}, ("vault", "refused", "refused")),  # security level and scope
    ("nested", {"value": {"a": {"b": {}}}}, ("nested", "refused", "refused")),  # input limits
    ("missing", {"x": 1}, ("missing", "refused", "refused")),  # no such tool
]


@pytest.mark.parametrize(("name", "arguments", "expected"), CALLS, ids=[f"{c[0]}-{c[2][2]}" for c in CALLS])
async def test_every_tools_call_has_one_record_in_the_file_before_its_answer(
    tmp_path: Path, name: str, arguments: dict[str, Any], expected: tuple[str, str, str]
) -> None:
    deck, trail, _ = audited(tmp_path)
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        answer = await c.request_raw("tools/call", {"name": name, "arguments": arguments})
        (record,) = records(trail)  # at once: the answer came after the record was written
        assert (record["tool"], record["decision"], record["outcome"]) == expected
        assert record["request_id"] == answer["id"] and record["arguments"] == arguments
        if expected[1] == "refused":
            reason = answer["result"]["content"][0]["text"] if "result" in answer else answer["error"]["message"]
            assert record["reason"] == reason


async def test_refused_resources_prompts_and_rate_limits_each_have_one_record_before_the_answer(tmp_path: Path) -> None:
    deck, trail, _ = audited(tmp_path, '[limits]\nper_tool = "1/hour"\n')
    async with client(deck) as c:
        c.session.principal = None
        assert (await c.request_raw("resources/read", {"uri": "notes://open"}))["result"]  # a read is not a call
        assert records(trail) == []
        steps = [
            ("resources/read", {"uri": "notes://secret"}, "resource:notes://secret"),
            ("prompts/get", {"name": "brief"}, "prompt:brief"),
            ("tools/call", {"name": "limited", "arguments": {}}, "limited"),
            ("tools/call", {"name": "limited", "arguments": {}}, "limited"),  # over the limit
        ]
        for count, (method, params, tool) in enumerate(steps, 1):
            await c.request_raw(method, params)
            assert len(records(trail)) == count and records(trail)[-1]["tool"] == tool
    assert [(r["decision"], r["outcome"]) for r in records(trail)] == [
        ("refused", "refused"), ("refused", "refused"), ("allowed", "ok"), ("refused", "refused"),
    ]  # fmt: skip
    assert records(trail)[-1]["reason"].startswith("Rate limit exceeded (per tool: 1/hour)")
    assert verify([trail]).ok


async def test_an_unknown_tool_is_answered_as_without_a_trail_and_recorded(tmp_path: Path) -> None:
    deck, trail, _ = audited(tmp_path)
    plain = Deck("plain")
    answers = []
    for each in (deck, plain):
        async with client(each) as c:
            answers.append(await c.request_raw("tools/call", {"name": "nope", "arguments": {"a": 1}}))
    assert answers[0] == answers[1] == {
        "jsonrpc": "2.0", "id": answers[0]["id"], "error": {"code": -32602, "message": "Unknown tool: nope"},
    }  # fmt: skip
    (record,) = records(trail)
    assert {key: record[key] for key in ("tool", "version", "security_level", "decision", "reason", "outcome")} == {
        "tool": "nope", "version": None, "security_level": None, "decision": "refused",
        "reason": "Unknown tool: nope", "outcome": "refused",
    }  # fmt: skip


async def test_an_unknown_tool_of_the_2026_07_28_era_is_recorded_too(tmp_path: Path) -> None:
    from server.test_stateless import Driver

    deck, trail, _ = audited(tmp_path)
    answer = await Driver(deck).request(1, "tools/call", {"name": "nope", "arguments": {}})
    assert answer["error"] == {"code": -32602, "message": "Unknown tool: nope"}
    assert [(r["tool"], r["decision"]) for r in records(trail)] == [("nope", "refused")]


# --- over HTTP: a session named by another principal, and refusals before the protocol -----------------------------


class TrailAtAnswer:
    """The HTTP app, noting how many records the trail holds at the moment each response begins to leave."""

    def __init__(self, app: Any, trail: Path) -> None:
        self.app, self.trail = app, trail
        self.seen: list[tuple[int, int]] = []  # (status, records in the file then)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def noting(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((message["status"], len(records(self.trail)) if self.trail.exists() else 0))
            await send(message)

        await self.app(scope, receive, noting)


def http_deck(tmp_path: Path) -> tuple[Deck, Path]:
    trail = tmp_path / "audit.jsonl"
    deck = Deck("http-audited")

    @deck.tool
    def ping() -> str:
        return "pong"

    policy = tmp_path / "policy.toml"
    tokens = "".join(f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
                     for who in ("alice", "mallory"))  # fmt: skip
    policy.write_text(f'{tokens}[audit]\nfile = "{trail}"\n')
    deck.apply_policy(policy)
    return deck, trail


async def test_another_principals_session_is_refused_403_and_recorded_before_the_answer(tmp_path: Path) -> None:
    deck, trail = http_deck(tmp_path)
    app = TrailAtAnswer(HttpApp(deck), trail)
    http = AsgiClient(app)
    alice = {"authorization": "Bearer alice-key"}
    reply = await http.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=alice)  # fmt: skip
    session = reply.headers["mcp-session-id"]
    await reply.body()
    mallory = {"authorization": "Bearer mallory-key"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ping", "arguments": {}}}
    refused = await http.post(call, session=session, headers=mallory)
    assert refused.status == 403
    (record,) = records(trail)  # before the 403's body was read
    await refused.body()
    assert record | {"time": ""} == {
        "seq": 0, "prev": "0" * 64, "time": "", "event": "http-refused", "method": "POST", "path": "/mcp",
        "client": "127.0.0.1", "principal": "mallory", "auth": "token", "session": session, "status": 403,
        "decision": "refused", "reason": "Forbidden: this session belongs to another principal",
    }  # fmt: skip
    deleted = await http.request("DELETE", headers={**mallory, "mcp-session-id": session,
                                                   "mcp-protocol-version": "2025-11-25"})  # fmt: skip
    assert deleted.status == 403
    await deleted.body()
    assert [(r["method"], r["status"], r["principal"]) for r in records(trail)] == [
        ("POST", 403, "mallory"), ("DELETE", 403, "mallory"),
    ]  # fmt: skip
    unknown = await http.post(call, headers={"authorization": "Bearer wrong"}, session=session)
    assert unknown.status == 401
    assert [(r["status"], r["principal"]) for r in records(trail)][-1] == (401, None)
    await unknown.body()
    ok = await http.post(call, session=session, headers=alice)
    await ok.body()
    assert app.seen == [(200, 0), (403, 1), (403, 2), (401, 3), (200, 4)]  # each record written before its answer
    assert verify([trail]).ok


# --- failing closed -------------------------------------------------------------------------------------------------


async def test_a_call_whose_record_cannot_be_written_is_refused_and_so_is_every_call_until_it_can(
    tmp_path: Path,
) -> None:
    deck, trail, ran = audited(tmp_path)
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        assert (await c.call_tool("work", {"n": 1}))["structuredContent"] == {"result": 1}
        sink = fill_the_disk(deck)
        withheld = await c.call_tool("work", {"n": 2})  # it ran, but its record cannot be written: no result
        assert withheld == {"content": [{"type": "text", "text": UNAVAILABLE}], "isError": True}
        refused = await c.call_tool("work", {"n": 3})  # refused before it runs
        assert refused == withheld and ran == [1, 2]
        read = await c.request_raw("resources/read", {"uri": "notes://open"})
        assert read["error"] == {"code": -32000, "message": UNAVAILABLE}
        unknown = await c.request_raw("tools/call", {"name": "nope", "arguments": {}})
        assert unknown["error"]["code"] == -32602  # a refusal anyway: answered as ever, counted
        assert [r.get("n") for r in (r["arguments"] for r in records(trail))] == [1]
        sink._os_write = os.write  # space came back
        assert (await c.call_tool("work", {"n": 4}))["structuredContent"] == {"result": 4}
        assert ran == [1, 2, 4]
    shown = [(r["event"], r.get("tool"), r.get("outcome")) for r in records(trail)]
    assert shown == [
        ("call", "work", "ok"), ("call", "work", "ok"), ("audit-unavailable", None, None), ("call", "work", "ok"),
    ]  # fmt: skip
    outage = records(trail)[2]
    assert (outage["reason"], outage["late"], outage["refused"]) == ("No space left on device", 1, 3)
    assert verify([trail]).ok


async def test_over_http_an_unavailable_trail_is_an_is_error_result_for_tools_and_503_for_the_rest(
    tmp_path: Path,
) -> None:
    deck, trail, ran = audited(tmp_path)
    sink = fill_the_disk(deck)
    http = AsgiClient(HttpApp(deck))
    session = await http.initialize()
    call = await http.call(session, 2, "tools/call", {"name": "work", "arguments": {"n": 1}}, accept="application/json")
    assert call.status == 200
    assert (await call.json())["result"] == {"content": [{"type": "text", "text": UNAVAILABLE}], "isError": True}
    read = await http.call(session, 3, "resources/read", {"uri": "notes://open"}, accept="application/json")
    assert read.status == 503
    assert (await read.json())["error"] == {"code": -32000, "message": UNAVAILABLE}
    task = await http.call(session, 4, "tools/call", {"name": "queued", "arguments": {"n": 2}, "task": {}},
                           accept="application/json")  # fmt: skip
    assert task.status == 503  # a task is refused before it is made
    assert (await task.json())["error"] == {"code": -32000, "message": UNAVAILABLE}
    assert ran == [1]  # the first call ran before the trail was known to be down; nothing since
    assert trail.read_bytes() == b""
    sink._os_write = os.write
    sink.close()
    assert [r["event"] for r in records(trail)] == ["call", "audit-unavailable"]


async def test_a_call_that_ends_in_a_json_rpc_error_or_a_question_is_refused_too_when_its_record_cannot_be_written(
    tmp_path: Path,
) -> None:
    from server.test_stateless import Driver

    deck, trail, _ = audited(tmp_path)

    @deck.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"Hello, {(answer.content or {}).get('name')}!"

    sink = fill_the_disk(deck)
    async with client(deck) as c:
        visited = await c.request_raw("tools/call", {"name": "visit", "arguments": {}})  # a -32042 of its own
        assert visited["result"] == {"content": [{"type": "text", "text": UNAVAILABLE}], "isError": True}
    sink._os_write = os.write
    assert sink.admit() is None  # written again: the kept record, and the outage's
    fill_the_disk(deck)
    asked = await Driver(deck).request(1, "tools/call", {"name": "greet", "arguments": {}},
                                       capabilities={"elicitation": {}})  # fmt: skip
    assert asked["result"]["resultType"] == "complete"  # not input_required: the question is taken back
    assert (asked["result"]["content"], asked["result"]["isError"]) == ([{"type": "text", "text": UNAVAILABLE}], True)
    sink._os_write = os.write
    sink.close()
    shown = [(r["event"], r.get("tool"), r.get("outcome")) for r in records(trail)]
    assert shown == [
        ("call", "visit", "error"), ("audit-unavailable", None, None),
        ("call", "greet", "input_required"), ("audit-unavailable", None, None),
    ]  # fmt: skip


async def test_http_refusals_while_the_trail_is_down_are_counted_not_kept(tmp_path: Path) -> None:
    deck, trail = http_deck(tmp_path)
    sink = fill_the_disk(deck)
    http = AsgiClient(HttpApp(deck))
    for _ in range(3):
        refused = await http.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                  headers={"authorization": "Bearer wrong"})  # fmt: skip
        assert refused.status == 401
        await refused.body()
    sink._os_write = os.write
    sink.close()  # the first refusal was kept (the trail was not known to be down yet), the others counted
    shown = [(r["event"], r.get("status"), r.get("late"), r.get("refused")) for r in records(trail)]
    assert shown == [("http-refused", 401, None, None), ("audit-unavailable", None, 1, 2)]


# --- task-augmented calls: recorded when the task is created, and again when its work ends ------------------------


async def test_a_task_call_is_recorded_before_its_create_task_result_and_again_when_its_work_ends(
    tmp_path: Path,
) -> None:
    deck, trail, ran = audited(tmp_path)
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        answer = await c.request_raw("tools/call", {"name": "queued", "arguments": {"n": 7}, "task": {}})
        task_id = answer["result"]["task"]["taskId"]
        (created,) = records(trail)  # at once: a process killed now has recorded the call it answered
        assert (created["tool"], created["decision"], created["outcome"], created["request_id"]) == (
            "queued", "allowed", "task_created", answer["id"])  # fmt: skip
        assert created["arguments"] == {"n": 7}
        await c.request_raw("tasks/result", {"taskId": task_id})
    assert ran == [7]
    assert [(r["tool"], r["outcome"]) for r in records(trail)] == [("queued", "task_created"), ("queued", "ok")]
    assert verify([trail]).ok


async def test_a_task_whose_creation_cannot_be_recorded_never_runs_and_ends_failed(tmp_path: Path) -> None:
    deck, trail, ran = audited(tmp_path)
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        sink = fill_the_disk(deck)  # admitted (the trail has not failed yet), stored, then its record cannot be written
        answer = await c.request_raw("tools/call", {"name": "queued", "arguments": {"n": 8}, "task": {}})
        assert answer["result"] == {"content": [{"type": "text", "text": UNAVAILABLE}], "isError": True}
        listed = await c.request_raw("tasks/list", {})
        (task,) = listed["result"]["tasks"]
        assert (task["status"], task["statusMessage"]) == ("failed", UNAVAILABLE)
        assert trail.read_bytes() == b""
        sink._os_write = os.write  # space came back
    sink.close()
    assert ran == []
    assert [(r["event"], r.get("outcome")) for r in records(trail)] == [
        ("call", "task_created"),
        ("audit-unavailable", None),
    ]


# --- runs stopped before they ended: recorded "cancelled" ----------------------------------------------------------


async def test_a_call_the_client_cancels_while_it_runs_is_recorded_cancelled(tmp_path: Path) -> None:
    deck, trail, _ = audited(tmp_path)
    started, stopped = asyncio.Event(), asyncio.Event()

    @deck.tool
    async def hang() -> str:
        return await sleep_until_cancelled(stopped, started)

    async with client(deck) as c:
        c.session.principal = Principal("ada")
        call = asyncio.ensure_future(c.request_raw("tools/call", {"name": "hang", "arguments": {}}, id="h"))
        await started.wait()
        c.notify("notifications/cancelled", {"requestId": "h"})
        await stopped.wait()
        await c.call_tool("work", {"n": 1})  # recorded after the cancelled one
        assert not call.done()  # no answer for a cancelled request
        call.cancel()
    shown = [(r["tool"], r["request_id"], r["decision"], r["outcome"]) for r in records(trail)]
    assert shown[0] == ("hang", "h", "allowed", "cancelled")
    assert shown[1][0::3] == ("work", "ok")
    assert verify([trail]).ok


async def test_a_task_still_running_when_the_server_stops_is_recorded_cancelled_before_the_trail_closes(
    tmp_path: Path,
) -> None:
    deck, trail, _ = audited(tmp_path)
    started, stopped = asyncio.Event(), asyncio.Event()

    @deck.tool(task="optional")
    async def long() -> str:
        return await sleep_until_cancelled(stopped, started)

    async with client(deck) as c:
        deck.bind_loop()  # as a transport does: the services run, the trail's closer among them
        c.session.principal = Principal("ada")
        answer = await c.request_raw("tools/call", {"name": "long", "arguments": {}, "task": {}})
        assert answer["result"]["task"]["status"] == "working"
        await started.wait()
        await deck.aclose()  # the server stops: the run is cancelled, waited for and recorded, then the trail closes
        assert stopped.is_set()
    assert [(r["tool"], r["outcome"]) for r in records(trail)] == [("long", "task_created"), ("long", "cancelled")]
    assert verify([trail]).ok


# --- a busy server: the records of a loop turn go out together ----------------------------------------------------


async def test_while_the_server_is_busy_calls_that_end_together_share_one_write_before_their_answers(
    tmp_path: Path,
) -> None:
    deck, trail, _ = audited(tmp_path)

    @deck.tool
    async def echo(n: int) -> int:
        return n

    sink = deck._security.sink  # type: ignore[attr-defined]
    writes: list[bytes] = []
    write = sink._os_write
    sink._os_write = lambda fd, data: (writes.append(bytes(data)), write(fd, data))[1]
    async with client(deck) as c:
        c.session.principal = Principal("ada")
        await c.call_tool("echo", {"n": 0})
        assert len(writes) == 1  # alone: written at once
        deck.busy = lambda: True  # as a transport says while other requests wait
        answers = await asyncio.gather(*(c.call_tool("echo", {"n": n}) for n in range(1, 5)))
        assert [a["structuredContent"]["result"] for a in answers] == [1, 2, 3, 4]
        assert len(writes) == 2 and writes[1].count(b"\n") == 4  # the four records in one write, before the answers
    assert [r["arguments"]["n"] for r in records(trail)] == [0, 1, 2, 3, 4]
    assert verify([trail]).ok
