"""JSON logs (server/logs.py): each line a JSON object, naming the request whose work wrote it — in async and sync
tools alike — and nothing of a request outside one; the access log (transports/http/access.py). `tooldeck serve`
with both is run by the README's example (tests/test_readme.py)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from asgi_client import AsgiClient
from tooldeck import Deck
from tooldeck.security.tokens import hash_token
from tooldeck.server import logs
from tooldeck.transports.http import HttpApp

app_log = logging.getLogger("tests.app")


@pytest.fixture
def json_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """What a JSON handler on the root logger writes, as ``configure(fmt="json")`` sets it up."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    root = logging.getLogger()
    monkeypatch.setattr(logs, "contextual", True)
    root.addHandler(handler)
    level = app_log.level
    app_log.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        app_log.setLevel(level)


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def secured_deck(tmp_path: Path) -> Deck:
    deck = Deck("logged")

    @deck.tool
    async def fetch(n: int) -> int:
        app_log.info("fetching %d", n)
        return n

    @deck.tool
    def crunch(n: int) -> int:  # in a worker thread
        app_log.warning("crunching %d", n, extra={"rows": 3})
        return n

    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[authentication.tokens]]\nsubject = "ci"\nsha256 = "{hash_token("ci-key")}"\n')
    deck.apply_policy(policy)
    return deck


async def test_every_line_a_tool_writes_names_its_request(tmp_path: Path, json_lines: io.StringIO) -> None:
    http = AsgiClient(HttpApp(secured_deck(tmp_path)))
    key = {"authorization": "Bearer ci-key"}
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=key)  # fmt: skip
    await init.body()
    session = init.headers["mcp-session-id"]
    for request_id, tool in ((7, "fetch"), ("c-8", "crunch")):
        answer = await http.call(session, request_id, "tools/call", {"name": tool, "arguments": {"n": 1}}, headers=key)
        assert answer.status == 200
        await answer.body()
    app_log.info("between requests")
    lines = [line for line in parsed(json_lines) if line["logger"] == "tests.app"]
    assert [(line["message"], line["level"]) for line in lines] == [
        ("fetching 1", "info"), ("crunching 1", "warning"), ("between requests", "info")]  # fmt: skip
    fetching, crunching, between = lines
    assert {k: fetching[k] for k in ("request_id", "session", "principal", "tool")} == {
        "request_id": 7, "session": session, "principal": "token:ci", "tool": "fetch"}  # fmt: skip
    assert (crunching["request_id"], crunching["tool"], crunching["rows"]) == ("c-8", "crunch", 3)  # extra=, too
    assert not {"request_id", "session", "principal", "tool"} & set(between)  # outside a request: none
    assert fetching["time"].endswith("Z") and len(fetching["time"]) == len("2026-11-27T10:00:00.000Z")


def test_an_exception_is_kept_whole_in_its_line(json_lines: io.StringIO) -> None:
    try:
        raise ValueError("bad row")
    except ValueError:
        app_log.exception("import failed")
    (line,) = parsed(json_lines)
    assert line["message"] == "import failed"
    assert "ValueError: bad row" in line["exception"] and "Traceback" in line["exception"]


def test_configure_refuses_a_format_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="log format must be one of text, json, got 'xml'"):
        logs.configure("info", "xml")


async def test_the_access_log_is_a_line_per_request_and_leaves_probes_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tooldeck.access")
    http = AsgiClient(HttpApp(secured_deck(tmp_path), access_log=True), client=("192.0.2.7", 40000))
    refused = await http.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"authorization": "Bearer no"})
    assert refused.status == 401
    await refused.body()
    probe = await http.request("GET", path="/healthz", jsonrpc=False)
    await probe.body()
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers={"authorization": "Bearer ci-key"})  # fmt: skip
    await init.body()
    records = [r for r in caplog.records if r.name == "tooldeck.access"]
    assert [(r.method, r.path, r.status, r.principal, r.client) for r in records] == [  # type: ignore[attr-defined]
        ("POST", "/mcp", 401, None, "192.0.2.7"), ("POST", "/mcp", 200, "token:ci", "192.0.2.7")]  # fmt: skip
    assert records[1].getMessage().startswith("POST /mcp 200 ")
    assert records[1].getMessage().endswith(" ms principal=token:ci client=192.0.2.7")
    assert all(r.duration_ms >= 0 for r in records)  # type: ignore[attr-defined]
