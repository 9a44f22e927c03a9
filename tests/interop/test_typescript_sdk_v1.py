"""The TypeScript SDK 1.x client (@modelcontextprotocol/sdk 1.32.2, what most hosts ship) and progress over stdio.

A tool that reports its last progress step and returns at once: tooldeck writes the notification and then the
response, in that order, in one write (everything sent in one turn of its event loop goes out together), so the
client reads both in one chunk. SDK 1.x handles a notification one microtask late but a response at once, and the
response retires the request's progress handler, so the SDK's own ``onprogress`` misses the last step and reports
"unknown token" through ``onerror`` (typescript-sdk issue 2580). A client that handles ``notifications/progress``
itself, as the README says, sees every step. Over Streamable HTTP each SSE event is handled on its own turn.

scripts/interop.sh --client-v1 installs the pinned packages on first use and runs tests/interop/ts_sdk_v1_progress.mjs;
like the other interop tests these need npm and node, and fail without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcp_schema
from interop.test_typescript_client import interop

DECK = Path(__file__).with_name("progress_deck.py")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    yield interop("--client-v1", "--deck", str(DECK), state=tmp_path_factory.mktemp("interop-v1"))


@pytest.mark.slow
def test_every_message_of_the_run_is_valid_and_in_order(report: dict[str, Any]) -> None:
    assert report["failures"] == [], json.dumps(report, indent=1)[:20000]
    assert report["exit"] == 0
    assert report["client"]["@modelcontextprotocol/sdk"] == "1.32.2"
    version = report["steps"]["stdio_connect"]["protocolVersion"]
    assert version == mcp_schema.LATEST
    for connection in ("stdio", "http"):
        checker = mcp_schema.WireChecker(version, name=f"TypeScript SDK 1.x over {connection}")
        entries = [e for e in report["wire"] if e["connection"] == connection]
        for entry in entries:
            (checker.sent if entry["from"] == "client" else checker.received)(entry["message"])
        # On the wire, for every call: progress 1, 2 and 3 for its token, then its response.
        server = [e["message"] for e in entries if e["from"] == "server"]
        calls = [e["message"] for e in entries if e["message"].get("method") == "tools/call"]
        assert len(calls) == (2 if connection == "stdio" else 1)
        for call in calls:
            token = call["params"]["_meta"]["progressToken"]
            related = [m for m in server if (m.get("id") == call["id"] and "method" not in m)
                       or (m.get("params") or {}).get("progressToken") == token]  # fmt: skip
            assert [m["params"]["progress"] if "method" in m else "response" for m in related] == [1, 2, 3, "response"]


@pytest.mark.slow
def test_over_stdio_the_sdks_onprogress_misses_the_step_read_with_the_response(report: dict[str, Any]) -> None:
    # The reproduction of the report: [1, 2], not [1, 2, 3]. The server wrote progress 3 before the response, and
    # the client read them in one chunk; SDK 1.x then dropped the notification as one for an unknown token.
    seen = report["steps"]["stdio_sdk_onprogress"]
    assert seen["texts"] == ["3 steps done"]
    assert seen["reads"][-1] == ["progress 3", "response"]
    assert seen["progress"] == [1, 2]
    assert len(seen["errors"]) == 1
    assert seen["errors"][0].startswith("Received a progress notification for an unknown token")
    assert '"progress":3' in seen["errors"][0]


@pytest.mark.slow
def test_over_stdio_a_client_handling_progress_itself_sees_every_step(report: dict[str, Any]) -> None:
    # What the README tells a client to do: its own progressToken and a notifications/progress handler. Notifications
    # are handled in arrival order, so the last step is seen before the call's promise settles, in the same read.
    seen = report["steps"]["stdio_own_handler"]
    assert seen["reads"][-1] == ["progress 3", "response"]
    assert seen["progress"] == [1, 2, 3]
    assert seen["errors"] == []
    assert seen["texts"] == ["3 steps done"]


@pytest.mark.slow
def test_over_streamable_http_the_sdks_onprogress_sees_every_step(report: dict[str, Any]) -> None:
    seen = report["steps"]["http_sdk_onprogress"]
    assert (seen["progress"], seen["errors"], seen["texts"]) == ([1, 2, 3], [], ["3 steps done"])
