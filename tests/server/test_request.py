"""The request context: built from a session's state, or from one request alone (no session at all)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from helpers import Harness
from tooldeck import Deck
from tooldeck.protocol.errors import InvalidParamsError
from tooldeck.server.methods.tools import call_tool, list_tools
from tooldeck.server.request import RequestContext, Work
from tooldeck.server.state import SessionState


class Peer:
    """What a stateless exchange would provide: somewhere to send, nothing else."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, message: Any, related: Any) -> None:
        self.sent.append((message, related))


def test_a_request_context_needs_no_session() -> None:
    deck = Deck("standalone", log_level="warning")
    deck.add_tool(lambda: "x", name="x")
    rctx = RequestContext.standalone(deck, Peer(), 1, "tools/list", {}, "2025-11-25",  # type: ignore[arg-type]
                                     client_capabilities={"sampling": {}}, principal="alice")  # fmt: skip
    assert rctx.revision == "2025-11-25" and rctx.client_capabilities == {"sampling": {}}
    assert rctx.capabilities == deck.initialize_result("2025-11-25")["capabilities"]  # what the server declares
    assert rctx.owner() == "alice" and rctx.identifies_requestor
    assert rctx.log_rank == 3  # "warning", the deck's default, since no client set one
    listed = orjson.loads(orjson.dumps(list_tools(rctx)))  # a pre-encoded listing
    assert [t["name"] for t in listed["tools"]] == ["x"]  # handlers read only the request


def test_a_session_request_reads_the_session_state_live() -> None:
    deck = Deck("live")
    state = SessionState("info")
    state.revision = "2025-06-18"
    rctx = RequestContext(deck, Peer(), "r", "ping", {}, state)  # type: ignore[arg-type]
    state.log_rank = 5  # logging/setLevel while the request runs
    assert rctx.log_rank == 5 and rctx.revision == "2025-06-18"


@pytest.mark.parametrize(("meta", "token"), [(None, None), ({}, None), ({"progressToken": None, "x": 1}, None),
                                             ({"progressToken": "t"}, "t"), ({"progressToken": 7}, 7)])  # fmt: skip
def test_the_progress_token_is_read_from_meta(meta: Any, token: Any) -> None:
    params = {} if meta is None else {"_meta": meta}
    rctx = RequestContext.standalone(Deck("p"), Peer(), 1, "tools/call", params, "2025-11-25")  # type: ignore[arg-type]
    assert rctx.progress_token() == token


@pytest.mark.parametrize("meta", [5, {"progressToken": 1.5}, {"progressToken": True}])
def test_a_malformed_progress_token_is_32602(meta: Any) -> None:
    rctx = RequestContext.standalone(Deck("p"), Peer(), 1, "tools/call", {"_meta": meta}, "2025-11-25")  # type: ignore[arg-type]
    with pytest.raises(InvalidParamsError):
        rctx.progress_token()


def test_cancel_is_the_one_place_cancellation_is_set() -> None:
    rctx = RequestContext.standalone(Deck("c"), Peer(), 1, "tools/call", {}, "2025-11-25")  # type: ignore[arg-type]
    assert not rctx.cancelled
    rctx.cancel()
    assert rctx.cancelled


def test_tools_call_hands_the_runner_work_that_streams_only_with_a_context() -> None:
    deck = Deck("work")

    @deck.tool
    def plain() -> str:
        return "p"

    harness = Harness(deck)
    harness.initialize()
    session = harness.session
    work = call_tool(RequestContext(deck, session, 1, "tools/call", {"name": "plain"}, session.state))
    assert type(work) is Work and not work.streams and not work.own
    work.coro.close()
    with pytest.raises(InvalidParamsError, match="Unknown tool: nope"):
        call_tool(RequestContext(deck, session, 2, "tools/call", {"name": "nope"}, session.state))
