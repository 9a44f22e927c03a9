"""``heap.settle``: a process that serves a deck freezes what start-up made and collects its youngest generation
less often — checked from inside a real ``tooldeck serve`` process, over stdio and over HTTP."""

from __future__ import annotations

import gc
from pathlib import Path

import orjson

from http_client import HttpClient, serve_http
from stdio_client import StdioServer
from tooldeck.server import heap

DECK = """
import gc
from tooldeck import Deck

deck = Deck("heap")


@deck.tool
def collector() -> str:
    \"\"\"The collector's settings in this process.\"\"\"
    return f"{gc.get_threshold()[0]} {gc.get_freeze_count() > 0}"
"""


def test_settle_freezes_what_exists_and_raises_only_the_youngest_threshold() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    try:
        heap.settle()
        assert gc.get_threshold() == (heap.YOUNGEST, *before[1:])
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_a_deck_served_over_stdio_runs_with_the_settled_collector(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(DECK)
    with StdioServer("serve", str(tmp_path / "app.py")) as server:
        server.initialize()
        reply = server.request("tools/call", {"name": "collector", "arguments": {}})
    assert reply["result"]["content"][0]["text"] == f"{heap.YOUNGEST} True"


def test_a_deck_served_over_http_runs_with_the_settled_collector(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(DECK)
    with serve_http(str(tmp_path / "app.py"), "--json-response") as url, HttpClient(url) as http:
        session = http.initialize()
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "collector", "arguments": {}}}
        reply = orjson.loads(http.post(call, session=session).content)
    assert reply["result"]["content"][0]["text"] == f"{heap.YOUNGEST} True"
