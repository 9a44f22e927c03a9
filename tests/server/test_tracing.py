"""OpenTelemetry spans (server/tracing.py), checked with the SDK's in-memory exporter: a plain call, a refused call,
a task, a 2026-07-28 call and a call whose parent came in ``traceparent``; the tool's own spans nest under the
request's (sync tools too); a JSON log line names the trace; a deck without tracing imports nothing of it."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asgi_client import AsgiClient
from eras import modern
from server.test_metrics import guarded_tools
from server.test_metrics import session_of as metered_session
from tooldeck import Deck
from tooldeck.security.tokens import hash_token
from tooldeck.server import logs
from tooldeck.transports.http import HttpApp
from transports.http.test_eras import headers_for

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
CALLER = {"authorization": "Bearer ci-key"}
app_log = logging.getLogger("tests.traced")


def traced_deck(tmp_path: Path) -> tuple[Deck, InMemorySpanExporter]:
    deck = Deck("traced")
    tracer = None

    @deck.tool
    async def fetch(n: int) -> int:
        with tracer.start_as_current_span("fetch upstream"):  # type: ignore[union-attr]  # a tool's own span
            app_log.warning("fetching %d", n)
        return n

    @deck.tool
    def crunch(n: int) -> int:  # a sync tool, in a worker thread
        with tracer.start_as_current_span("crunch rows"):  # type: ignore[union-attr]
            return n

    guarded_tools(deck)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[authentication.tokens]]\nsubject = "ci"\nsha256 = "{hash_token("ci-key")}"\n')
    deck.apply_policy(policy)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    deck.use_tracing(provider)
    tracer = provider.get_tracer("tests")
    return deck, exporter


async def session_of(http: AsgiClient) -> str:
    return await metered_session(http, CALLER)


async def traced_call(tmp_path: Path, request_id: int, name: str,
                      arguments: dict[str, Any]) -> tuple[Any, str, Any]:  # fmt: skip
    """A session, then one call of ``name``: the spans the call made, the session's id, and the answer."""
    deck, exporter = traced_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await session_of(http)
    exporter.clear()
    answer = await http.call(session, request_id, "tools/call", {"name": name, "arguments": arguments},
                             headers=CALLER)  # fmt: skip
    return exporter.get_finished_spans(), session, orjson.loads(await answer.body())


def shown(span: Any) -> dict[str, Any]:
    """What a golden span says: name, kind, status, attributes."""
    return {"name": span.name, "kind": span.kind.name, "status": span.status.status_code.name,
            "attributes": dict(span.attributes or {})}  # fmt: skip


async def test_a_plain_call_is_a_server_span_with_the_conventions_attributes_and_the_tools_spans_under_it(
    tmp_path: Path,
) -> None:
    (inner, server), session, _ = await traced_call(tmp_path, 7, "fetch", {"n": 1})
    assert shown(server) == {"name": "tools/call fetch", "kind": "SERVER", "status": "UNSET", "attributes": {
        "mcp.method.name": "tools/call", "network.transport": "tcp", "network.protocol.name": "http",
        "mcp.protocol.version": "2025-11-25", "mcp.session.id": session, "jsonrpc.request.id": "7",
        "gen_ai.tool.name": "fetch", "gen_ai.operation.name": "execute_tool", "tooldeck.security.level": 0,
        "tooldeck.decision": "allowed"}}  # fmt: skip
    assert inner.name == "fetch upstream" and inner.parent is not None
    assert inner.parent.span_id == server.context.span_id  # the tool's own span nests under the request's
    assert server.parent is None  # no traceparent: a trace of its own


async def test_a_sync_tools_spans_nest_too(tmp_path: Path) -> None:
    (inner, server), _, _ = await traced_call(tmp_path, 8, "crunch", {"n": 2})
    assert (inner.name, server.name) == ("crunch rows", "tools/call crunch")
    assert inner.parent is not None and inner.parent.span_id == server.context.span_id


async def test_a_refused_call_records_the_decision_and_the_error(tmp_path: Path) -> None:
    (server,), _, answer = await traced_call(tmp_path, 9, "wipe", {})
    message = answer["error"]["message"]
    golden = shown(server)
    assert golden["status"] == "ERROR" and server.status.description == message
    assert {k: golden["attributes"][k] for k in ("error.type", "rpc.response.status_code", "tooldeck.decision",
                                                  "tooldeck.security.level")} == {
        "error.type": "-32000", "rpc.response.status_code": "-32000", "tooldeck.decision": "refused",
        "tooldeck.security.level": 5}  # fmt: skip
    assert "vault:write" in golden["attributes"]["tooldeck.refusal.reason"]


async def test_a_task_call_and_its_result_are_spans_of_their_own(tmp_path: Path) -> None:
    deck, exporter = traced_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await session_of(http)
    exporter.clear()
    created = await http.call(session, 1, "tools/call", {"name": "later", "arguments": {}, "task": {}}, headers=CALLER)
    task_id = (await created.json())["result"]["task"]["taskId"]
    result = await http.call(session, 2, "tasks/result", {"taskId": task_id}, headers=CALLER)
    await result.body()
    names = [(span.name, span.attributes.get("jsonrpc.request.id")) for span in exporter.get_finished_spans()]
    assert ("tools/call later", "1") in names and ("tasks/result", "2") in names


async def test_a_2026_call_has_no_session_and_its_parent_comes_from_traceparent(tmp_path: Path) -> None:
    deck, exporter = traced_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    exporter.clear()
    message = modern(3, "tools/call", {"name": "fetch", "arguments": {"n": 3}},
                     traceparent=f"00-{PARENT_TRACE}-{PARENT_SPAN}-01")  # fmt: skip
    answer = await http.post(message, version=None, accept="application/json",
                             headers={**CALLER, **headers_for(message)})  # fmt: skip
    assert answer.status == 200, await answer.body()
    await answer.body()
    _inner, server = exporter.get_finished_spans()
    assert format(server.context.trace_id, "032x") == PARENT_TRACE  # the caller's trace goes on
    assert server.parent is not None and format(server.parent.span_id, "016x") == PARENT_SPAN
    assert "mcp.session.id" not in server.attributes  # a 2026-07-28 request has no session: MUST NOT be set
    assert server.attributes["mcp.protocol.version"] == "2026-07-28"


async def test_a_json_log_line_names_the_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deck, exporter = traced_deck(tmp_path)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    monkeypatch.setattr(logs, "contextual", True)
    app_log.addHandler(handler)
    try:
        http = AsgiClient(HttpApp(deck))
        session = await session_of(http)
        answer = await http.call(session, 4, "tools/call", {"name": "fetch", "arguments": {"n": 4}}, headers=CALLER)
        await answer.body()
    finally:
        app_log.removeHandler(handler)
    (line,) = [orjson.loads(text) for text in out.getvalue().splitlines()]
    server = exporter.get_finished_spans()[-1]
    assert line["trace_id"] == format(server.context.trace_id, "032x")


def test_a_deck_without_tracing_imports_nothing_of_it() -> None:
    code = ("import sys\nfrom tooldeck import Deck\nd = Deck('x')\nd.http_app()\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


async def test_the_audit_record_of_a_traced_call_names_its_trace(tmp_path: Path) -> None:
    from security.test_audit_trail import records

    deck, exporter = traced_deck(tmp_path)
    trail = tmp_path / "audit.jsonl"
    policy = tmp_path / "policy.toml"
    policy.write_text(policy.read_text() + f'[audit]\nfile = "{trail}"\n')
    deck.apply_policy(policy)
    http = AsgiClient(HttpApp(deck))
    session = await session_of(http)
    answer = await http.call(session, 5, "tools/call", {"name": "crunch", "arguments": {"n": 5}}, headers=CALLER)
    await answer.body()
    server = exporter.get_finished_spans()[-1]
    (record,) = [r for r in records(trail) if r.get("event") == "call"]
    assert record["trace_id"] == format(server.context.trace_id, "032x")
