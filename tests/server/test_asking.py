"""How a call asks its client (server/asking.py): the ``Asker`` Protocol and its three implementations — a 2025
request's requests to the client (``ClientRequests``, here against ``MockPeer``), a 2026-07-28 request's rounds and a
2026-07-28 task's inputs — and ``Context`` choosing among them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tooldeck import Context, Deck
from tooldeck.protocol.errors import ClientRequestError, InvalidParamsError, MissingClientCapabilityError
from tooldeck.server.asking import ClientRequests
from tooldeck.server.peer import MockPeer
from tooldeck.server.request import RequestContext
from tooldeck.server.rounds import InputRequired, Rounds, RoundTrip
from tooldeck.server.state import SessionState
from tooldeck.server.task_inputs import TaskInputs

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}}
ASKS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


class Manager:
    """What a task's asker needs of the TaskManager: the status moves it makes."""

    def __init__(self) -> None:
        self.moves: list[tuple[str, str]] = []

    async def settle(self, task_id: str, status: str, **_: Any) -> None:
        self.moves.append((task_id, status))


def context_2025(peer: MockPeer, capabilities: dict[str, Any] = ASKS, task: Any = None) -> Context:
    request = RequestContext.standalone(peer.server, peer, 1, "tools/call", {}, "2025-11-25",
                                        client_capabilities=capabilities)  # fmt: skip
    return Context(request, "tool", task)


def round_trip(peer: MockPeer, capabilities: dict[str, Any] = ASKS) -> RoundTrip:
    state = SessionState.of_request(peer.server, "2026-07-28", client_capabilities=capabilities)
    trip = RoundTrip(peer.server, peer, 1, "tools/call", {"name": "tool", "arguments": {}}, state)
    trip._rounds = None
    return trip


# --- the Protocol, as each implementation keeps it ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["client requests", "rounds", "task inputs"])
def test_every_asker_names_its_questions_and_remembers_what_it_makes(kind: str) -> None:
    peer = MockPeer(Deck("a"))
    asker: Any = {
        "client requests": lambda: ClientRequests(peer, 1),
        "rounds": lambda: Rounds(round_trip(peer)),
        "task inputs": lambda: TaskInputs(Manager(), "t-1"),
    }[kind]()
    assert type(asker.key("confirm")) is str and type(asker.key(None)) is str
    made = asker.memo("id", lambda: "first")
    assert made == "first"
    again = asker.memo("id", lambda: "second")
    assert again == ("second" if kind == "client requests" else "first")  # a 2025 question is asked only once


def test_keys_count_in_call_order_where_questions_are_keyed() -> None:
    peer = MockPeer(Deck("a"))
    rounds = Rounds(round_trip(peer))
    assert [rounds.key(None), rounds.key("mine"), rounds.key(None)] == ["input-1", "mine", "input-2"]
    inputs = TaskInputs(Manager(), "t-1")
    assert [inputs.key("mine"), inputs.key("mine"), inputs.key(None)] == ["mine", "mine-2", "input-1"]
    assert ClientRequests(peer, 1).key(None) == ""  # a 2025 question goes by its request id


# --- a 2025 request: requests to the client -------------------------------------------------------------------------


async def test_a_2025_question_is_a_request_to_the_client_tied_to_the_call() -> None:
    peer = MockPeer(Deck("a"), lambda method, params: {"action": "accept", "content": {"name": "Ada"}})
    answer = await context_2025(peer).elicit("Who?", NAME_FORM)
    assert (answer.action, answer.content) == ("accept", {"name": "Ada"})
    assert peer.sent == [{"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
                          "params": {"mode": "form", "message": "Who?", "requestedSchema": NAME_FORM}}]  # fmt: skip


async def test_a_2025_question_the_client_refuses_is_a_client_request_error() -> None:
    def refuse(method: str, params: dict[str, Any]) -> Any:
        raise InvalidParamsError("no model here")

    with pytest.raises(ClientRequestError, match=r"the client refused sampling/createMessage: no model here") as err:
        await context_2025(MockPeer(Deck("a"), refuse)).sample("hi")
    assert err.value.code == -32602


async def test_a_2025_question_without_an_answer_in_time_is_abandoned_and_the_client_told() -> None:
    peer = MockPeer(Deck("a"))  # answers nothing
    with pytest.raises(ClientRequestError, match="did not answer roots/list within 0.01 s"):
        await context_2025(peer).list_roots(timeout=0.01)
    assert peer.sent[-1] == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": 1, "reason": "no answer within 0.01 s"}}  # fmt: skip
    assert peer.pending == {}


async def test_a_2025_task_names_itself_in_its_question_and_waits_input_required() -> None:
    manager = Manager()
    peer = MockPeer(Deck("a"), lambda method, params: {"roots": [{"uri": "file:///w"}]})
    roots = await context_2025(peer, task=(manager, "t-9")).list_roots()
    assert roots == [{"uri": "file:///w"}]
    assert peer.sent[0]["params"]["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": "t-9"}}
    assert manager.moves == [("t-9", "input_required"), ("t-9", "working")]


async def test_a_2025_question_the_client_did_not_declare_is_refused_before_anything_is_sent() -> None:
    peer = MockPeer(Deck("a"))
    with pytest.raises(ClientRequestError, match="does not support sampling"):
        await context_2025(peer, capabilities={}).sample("hi")
    assert peer.sent == []


# --- a 2026-07-28 request: rounds; a 2026-07-28 task: its inputs --------------------------------------------------


async def test_a_2026_question_without_an_answer_ends_the_round_and_sends_nothing() -> None:
    peer = MockPeer(Deck("a"))
    trip = round_trip(peer)
    with pytest.raises(InputRequired):
        await Context(trip, "tool").elicit("Who?", NAME_FORM)
    assert trip.rounds.asked == {"input-1": {"method": "elicitation/create", "params": {
        "mode": "form", "message": "Who?", "requestedSchema": NAME_FORM}}}  # fmt: skip
    assert peer.sent == []


async def test_a_2026_question_the_request_did_not_declare_is_32021() -> None:
    peer = MockPeer(Deck("a"))
    with pytest.raises(MissingClientCapabilityError, match="clientCapabilities do not declare") as err:
        await Context(round_trip(peer, capabilities={}), "tool").sample("hi")
    assert err.value.code == -32021 and err.value.data == {"requiredCapabilities": {"sampling": {}}}


async def test_a_2026_task_parks_its_question_until_it_is_answered() -> None:
    manager = Manager()
    inputs = TaskInputs(manager, "t-2")

    class Tasks:
        def questions(self, task_id: str) -> TaskInputs:
            assert task_id == "t-2"
            return inputs

        async def settle(self, task_id: str, status: str, **_: Any) -> None:
            await manager.settle(task_id, status)

    peer = MockPeer(Deck("a"))
    ctx = Context(round_trip(peer), "tool", (Tasks(), "t-2"))
    asking = asyncio.ensure_future(ctx.list_roots())
    async with asyncio.timeout(5):
        while not inputs.pending:
            await asyncio.sleep(0)
    assert inputs.requests() == {"input-1": {"method": "roots/list", "params": {}}}
    assert inputs.answer({"input-1": {"roots": [{"uri": "file:///t"}]}})
    assert await asking == [{"uri": "file:///t"}]
    assert manager.moves == [("t-2", "input_required")] and peer.sent == []
