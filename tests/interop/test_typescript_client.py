"""Official TypeScript MCP clients against `tooldeck serve examples/conformance_deck.py` at 2026-07-28.

scripts/interop.sh installs the pinned npm packages on first use (about 20 s) and runs tests/interop/ts_client.mjs
(@modelcontextprotocol/client with @modelcontextprotocol/ext-tasks, over Streamable HTTP and stdio) or
tests/interop/inspector_cli.mjs (the MCP Inspector's CLI with --protocol-era modern). Each prints a JSON report of
what it saw; these tests assert on its values, and check every message tooldeck sent in the run (the report keeps
the whole wire, both ways) against the official schema. Like the conformance tests they need npm and node: without
them they fail, they do not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcp_schema

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "interop.sh"
TOOLDECK = Path(sys.executable).parent / "tooldeck"
USER = "Ada Lovelace"  # the name ts_client.mjs's elicitation handler answers with
DECK_TOOLS = 35  # examples/conformance_deck.py


def interop(*args: str, state: Path) -> dict[str, Any]:
    """Run scripts/interop.sh and return its JSON report (the task store goes to `state`, not the user's home)."""
    missing = [tool for tool in ("npm", "node") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: scripts/interop.sh installs the clients with npm")
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TOOLDECK": str(TOOLDECK), "XDG_STATE_HOME": str(state)},
        timeout=300,
    )
    if done.returncode == 2:  # could not start: install or argument trouble, not an interop result
        pytest.fail(f"scripts/interop.sh {' '.join(args)} did not run:\n{done.stdout}{done.stderr}")
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        pytest.fail(
            f"scripts/interop.sh {' '.join(args)} printed no JSON report (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    report["exit"] = done.returncode
    return report


def check_wire(entries: list[dict[str, Any]], version: str, name: str) -> None:
    """Feed one connection's messages, in order, to a WireChecker; the teardown (conftest.py) fails on a violation."""
    checker = mcp_schema.WireChecker(version, name=name)
    for entry in entries:
        if entry["from"] == "client":
            checker.sent(entry["message"])
        else:
            checker.received(entry["message"])


@pytest.fixture(scope="module", params=["http", "stdio"])
def client_report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    state = tmp_path_factory.mktemp(f"interop-{request.param}")
    yield interop("--client", "--transport", request.param, state=state)


@pytest.mark.slow
def test_the_typescript_client_runs_every_step_without_a_failure(client_report: dict[str, Any]) -> None:
    assert client_report["failures"] == [], json.dumps(client_report, indent=1)[:20000]
    assert client_report["exit"] == 0
    assert client_report["client"]["@modelcontextprotocol/client"] == "2.4.0"
    assert client_report["client"]["@modelcontextprotocol/ext-tasks"] == "0.2.2"
    # Every message tooldeck sent is checked against the 2026-07-28 schema (and the tasks extension's definitions).
    assert sum(entry["from"] == "server" for entry in client_report["wire"]) >= 30
    check_wire(client_report["wire"], mcp_schema.MODERN, f"TypeScript client over {client_report['transport']}")


@pytest.mark.slow
def test_the_client_connects_at_2026_07_28_and_lists_and_calls_tools(client_report: dict[str, Any]) -> None:
    steps = client_report["steps"]
    assert steps["connect"] == {
        "era": "modern",
        "protocolVersion": "2026-07-28",
        "serverName": "tooldeck-conformance",
        "supportedVersions": ["2026-07-28"],
        "extensions": ["io.modelcontextprotocol/tasks"],
    }
    methods = [e["message"].get("method") for e in client_report["wire"] if e["from"] == "client"]
    assert "initialize" not in methods
    if client_report["transport"] == "http":  # over stdio the SDK probes with server/discover on a sibling process
        assert methods[0] == "server/discover"
    tools = steps["list_tools"]
    assert tools["count"] == DECK_TOOLS
    assert {"greet", "slow_compute", "confirm_delete", "test_tool_with_task", "test_simple_text"} <= set(tools["names"])
    assert tools["withExecution"] == []  # 2026-07-28 has no Tool.execution
    assert tools["greetSchema"]["required"] == ["name"]
    assert steps["call_simple_text"] == {"isError": False, "texts": ["This is a simple text response for testing."]}
    assert steps["call_greet"] == {"isError": False, "texts": ["Hello, Grace!"]}


@pytest.mark.slow
def test_the_client_answers_elicitations_through_input_required_round_trips(client_report: dict[str, Any]) -> None:
    steps = client_report["steps"]
    assert steps["elicitation_input_required"] == {
        "isError": False,
        "texts": [f"Hello, {USER}!"],
        "elicitations": [{"message": "What is your name?", "mode": "form"}],
    }
    assert steps["elicitation_two_rounds"]["texts"] == [f"Multi-round complete for {USER} who likes teal"]
    assert [e["message"] for e in steps["elicitation_two_rounds"]["elicitations"]] == [
        "Step 1: What is your name?",
        "Step 2: What is your favorite color?",
    ]
    # On the wire: an input_required result with a requestState, and a retry under a new id that echoes it.
    wire = client_report["wire"]
    asked = next(
        e["message"] for e in wire if e["from"] == "server" and (e["message"].get("result") or {}).get("inputRequests")
        and "user_name" in e["message"]["result"]["inputRequests"]
    )  # fmt: skip
    retry = next(
        e["message"] for e in wire if e["from"] == "client" and "inputResponses" in (e["message"].get("params") or {})
    )
    assert asked["result"]["resultType"] == "input_required"
    assert retry["params"]["requestState"] == asked["result"]["requestState"]
    assert retry["params"]["inputResponses"] == {"user_name": {"action": "accept", "content": {"name": USER}}}
    assert retry["id"] != asked["id"]


@pytest.mark.slow
def test_the_client_runs_tasks_through_the_extension(client_report: dict[str, Any]) -> None:
    steps = client_report["steps"]
    done = steps["task_completes"]
    assert (done["kind"], done["outcome"], done["serverStatus"]) == ("task", "completed", "completed")
    assert done["texts"] == ["computed interop in 0.5 s"]
    assert done["statuses"][-1] == "completed"
    asked = steps["task_input_by_tasks_update"]
    assert (asked["outcome"], asked["serverStatus"], asked["texts"]) == (
        "completed",
        "completed",
        ["Deleted notes.txt"],
    )
    assert "input_required" in asked["statuses"]
    assert asked["inputs"] == [{"kind": "elicitation", "delivery": "task-update", "scope": "task", "key": "input-1"}]
    before = steps["input_required_then_task"]
    assert (before["kind"], before["outcome"], before["texts"]) == (
        "task",
        "completed",
        [f"Hello from the task, {USER}!"],
    )
    assert before["inputs"] == [{"kind": "elicitation", "delivery": "request-retry", "scope": "request",
                                 "key": "user_name"}]  # fmt: skip
    cancelled = steps["task_cancelled"]
    assert (cancelled["kind"], cancelled["outcome"], cancelled["serverStatus"]) == ("task", "cancelled", "cancelled")
    failed = steps["task_fails"]
    assert (failed["outcome"], failed["serverStatus"]) == ("failed", "failed")
    assert failed["error"] == "protocol_error_job fails at the protocol level, on purpose"
    # The extension's methods all went over the wire, each declaring the extension in its own capabilities.
    sent = [e["message"] for e in client_report["wire"] if e["from"] == "client"]
    assert {"tasks/get", "tasks/update", "tasks/cancel"} <= {m["method"] for m in sent}
    for message in sent:
        if message["method"].startswith("tasks/"):
            capabilities = message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
            assert "io.modelcontextprotocol/tasks" in capabilities["extensions"]
    created = [e["message"]["result"] for e in client_report["wire"]
               if e["from"] == "server" and (e["message"].get("result") or {}).get("resultType") == "task"]  # fmt: skip
    assert len(created) == 5


# --- the MCP Inspector's CLI ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_inspector_cli_lists_and_calls_tools_at_2026_07_28(tmp_path: Path) -> None:
    report = interop("--inspector", state=tmp_path)
    assert report["failures"] == [], json.dumps(report, indent=1)[:20000]
    assert report["exit"] == 0
    assert report["inspector"] == "2.12.0"
    steps = report["steps"]
    assert len(steps["list_tools_modern"]["names"]) == DECK_TOOLS
    assert {"greet", "slow_compute"} <= set(steps["list_tools_modern"]["names"])
    for name in ("list_tools_modern", "call_greet_modern", "call_task_tool_modern"):
        requests = steps[name]["requests"]
        assert requests[0]["method"] == "server/discover", requests
        assert {r["version"] for r in requests} == {"2026-07-28"}, requests
        assert {r["status"] for r in requests} == {200}, requests
    assert steps["call_greet_modern"]["texts"] == ["Hello, Grace!"]
    assert steps["call_greet_modern"]["resultType"] == "complete"
    task = steps["call_task_tool_modern"]
    assert task["texts"] == ["computed inspector in 0.5 s"]
    assert "tasks/get" in [r["method"] for r in task["requests"]]  # tooldeck answered with a task; the CLI polled it
    legacy = steps["call_greet_legacy"]
    assert legacy["requests"][0]["method"] == "initialize"
    assert (legacy["texts"], legacy["resultType"]) == (["Hello, Grace!"], None)
    for name in steps:
        entries = [entry for entry in report["wire"] if entry["step"] == name]
        assert any(entry["from"] == "server" for entry in entries), name
        version = mcp_schema.LATEST if name.endswith("_legacy") else mcp_schema.MODERN
        check_wire(entries, version, f"MCP Inspector CLI, {name}")


def test_the_wire_check_sees_a_violation_planted_in_a_report() -> None:
    # The net the tests above rely on: a task whose status is not one the extension defines is caught.
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    wire = [
        {"from": "client", "message": {"jsonrpc": "2.0", "id": "interop-1", "method": "tools/call",
                                       "params": {"name": "slow_compute", "arguments": {}, "_meta": meta}}},
        {"from": "server", "message": {"jsonrpc": "2.0", "id": "interop-1",
                                       "result": {"resultType": "task", "taskId": "t1", "status": "running",
                                                  "createdAt": "2026-11-24T08:00:00Z",
                                                  "lastUpdatedAt": "2026-11-24T08:00:00Z", "ttlMs": 60000}}},
    ]  # fmt: skip
    check_wire(wire, mcp_schema.MODERN, "planted")
    (checker,) = mcp_schema.collect()
    assert [v.where.split("\n")[0] for v in checker.violations] == [
        "CreateTaskResult (ext-tasks, official schema) invalid at $.status: 'running' is not one of "
        "['working', 'input_required', 'completed', 'failed', 'cancelled']"
    ]
    checker.reported = len(checker.violations)  # seen here, so the teardown does not report it again
