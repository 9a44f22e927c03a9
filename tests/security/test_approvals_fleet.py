"""Approvals across the processes of a fleet (two HTTP apps over shared backends: one in-memory record, or Redis):
a call waiting on one process for an approver is listed by the other's console and decided there, and its decision
reaches the call; a decision is single-use across the fleet and bound to the call it was made for; an approval page
served by the other process approves the call, its wrong tries counted fleet-wide; a process that is gone is
reported to the decider."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from asgi_client import AsgiClient
from tooldeck import Deck
from tooldeck.security.approvals import TAKEN, Approval, Decision, MemoryApprovalStore
from tooldeck.security.principal import Principal
from tooldeck.security.tokens import hash_token
from tooldeck.server.backends import Backends
from tooldeck.transports.http import HttpApp
from transports.http.fleet_apps import KINDS, Fleet, fleet_for

TOKENS = {"alice": [], "bob": ["ops"], "carol": ["ops"]}  # alice calls; bob and carol approve and operate
URL_CAPS = {"elicitation": {"url": {}, "form": {}}}


def make_deck(policy: Path, backends: Backends) -> Deck:
    deck = Deck("fleet-approvals", backends=backends)
    deck.ran = []  # type: ignore[attr-defined]

    @deck.tool(security_level=10, version="3.0.0")
    def deploy(target: str) -> str:  # four eyes
        deck.ran.append(target)  # type: ignore[attr-defined]
        return f"deployed {target}"

    @deck.tool(security_level=9, version="2.1.0")
    def publish(target: str) -> str:  # approved by the caller in a browser
        deck.ran.append(target)  # type: ignore[attr-defined]
        return f"published {target}"

    deck.apply_policy(policy)
    deck.use_console()
    return deck


@pytest.fixture(params=KINDS)
def fleet(request: pytest.FixtureRequest, tmp_path: Path,
          at_loop_end: Callable[[Callable[[], Awaitable[None]]], None]) -> Fleet:  # fmt: skip
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "".join(
            f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
            f"roles = {orjson.dumps(roles).decode()}\n"
            for who, roles in TOKENS.items()
        )
        + '[roles]\nops = ["operator", "approver"]\n'
        + '[levels]\napproval = "url"\nconfirm_timeout = 30\n[approvals]\nlevels = [10]\ntimeout = 30\n'
    )
    return fleet_for(request, at_loop_end, lambda backends: make_deck(policy, backends))


def bearer(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {who}-key"}


async def session_of(http: AsgiClient, capabilities: dict[str, Any] | None = None) -> str:
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities or {},
        "clientInfo": {"name": "t", "version": "1"}}}, version=None, headers=bearer("alice"))  # fmt: skip
    await init.body()
    return init.headers["mcp-session-id"]


def calling(http: AsgiClient, session: str, name: str, target: str) -> asyncio.Future[Any]:
    """alice's call of ``name``, running: its result message once it ends."""

    async def call() -> Any:
        response = await http.call(session, 1, "tools/call", {"name": name, "arguments": {"target": target}},
                                   headers=bearer("alice"))  # fmt: skip
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return await response.json()
        async for event in response.events(timeout=30):
            if event.data and "result" in event.message:
                return event.message
        raise AssertionError("the call's stream ended without its result")

    return asyncio.ensure_future(call())


async def console(app: HttpApp, path: str, form: dict[str, str] | None = None, who: str = "bob"
                  ) -> tuple[int, str]:  # fmt: skip
    """An operator's script on ``app``'s console (a bearer token: no cookie, no CSRF token)."""
    http = AsgiClient(app)
    if form is None:
        response = await http.request("GET", path=path, jsonrpc=False, headers=bearer(who))
    else:
        response = await http.request("POST", path=path, jsonrpc=False, body=urlencode(form).encode(),
                                      headers={**bearer(who), "content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    return response.status, (await response.body()).decode()


async def listed(app: HttpApp) -> tuple[str, str]:
    """The id of the first call ``app``'s console lists as waiting for an approver, and the page."""
    for _ in range(300):
        status, text = await console(app, "/console/approvals")
        assert status == 200
        if 'data-id="' in text:
            return text.split('data-id="', 1)[1].split('"', 1)[0], text
        await asyncio.sleep(0.01)
    raise AssertionError("no call was listed as waiting for approval")


async def four_eyes_call(fleet: Fleet, target: str = "prod") -> tuple[HttpApp, HttpApp, asyncio.Future[Any], str]:
    """alice's call of deploy on the first process, waiting; its approval's id as the second process lists it."""
    first, second = await fleet.start(2)
    http = AsgiClient(first)
    running = calling(http, await session_of(http), "deploy", target)
    approval_id, text = await listed(second)
    assert "deploy@3.0.0" in text and "token:alice" in text and f"on process <code>{first.deck.node_id}</code>" in text
    return first, second, running, approval_id


async def test_a_call_waiting_on_one_process_is_approved_from_another_process_s_console(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    assert first.deck.ran == [] and not running.done()
    status, _ = await console(second, f"/console/approvals/{approval_id}", {"decision": "approve", "reason": "ok"})
    assert status == 303
    result = (await asyncio.wait_for(running, 10))["result"]
    assert result["structuredContent"] == {"result": "deployed prod"}
    assert first.deck.ran == ["prod"] and second.deck.ran == []
    for app in (first, second):  # decided: gone from every process's queue, and decided once only
        assert await app.deck.access.approvals.waiting("operator") == []
        status, text = await console(app, f"/console/approvals/{approval_id}", {"decision": "deny"}, who="carol")
        assert status == 409 and "no call with this id is waiting" in text


async def test_the_caller_s_approval_page_cannot_decide_a_call_that_waits_for_an_approver(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    for app in (first, second):  # the caller's own credentials approve nothing that needs another person
        assert (await page(app, f"/approve/{approval_id}"))[0] == 404
        form = {"form": "", "token": "alice-key", "decision": "approve"}
        assert (await page(app, f"/approve/{approval_id}", form))[0] == 404
    assert not running.done() and first.deck.ran == []
    assert await second.deck.access.decide(approval_id, _principal("bob"), False) is None
    await asyncio.wait_for(running, 10)


async def test_a_call_denied_on_another_process_is_refused_where_it_waits(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    status, _ = await console(second, f"/console/approvals/{approval_id}", {"decision": "deny", "reason": "freeze"})
    assert status == 303
    result = (await asyncio.wait_for(running, 10))["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "tool 'deploy' was not run: token:bob denied it: freeze"
    assert first.deck.ran == []


async def test_the_caller_cannot_approve_their_own_call_from_another_process(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    caller = Principal("alice", roles=["ops"])  # holds the scope, but it is their own call
    problem = await second.deck.access.decide(approval_id, caller, True)
    assert problem == "a call cannot be approved by its own caller: another approver must decide"
    assert await second.deck.access.decide(approval_id, _principal("bob"), True) is None
    assert (await asyncio.wait_for(running, 10))["result"]["structuredContent"] == {"result": "deployed prod"}
    assert first.deck.ran == ["prod"]


async def test_two_decisions_on_two_processes_at_once_one_wins(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    found = [await app.deck.access.approvals.find(approval_id, "operator") for app in (first, second)]
    assert all(approval is not None for approval in found)  # both processes see it waiting, and both decide
    outcomes = await asyncio.gather(
        first.deck.access.approvals.decide(found[0], Decision(False, "token:carol", "no")),
        second.deck.access.approvals.decide(found[1], Decision(True, "token:bob")),
    )
    assert sorted(outcomes, key=str) == [None, TAKEN]  # the loser is told another decision came first
    result = (await asyncio.wait_for(running, 10))["result"]
    if outcomes[1] is None:
        assert result["structuredContent"] == {"result": "deployed prod"} and first.deck.ran == ["prod"]
    else:
        assert "token:carol denied it: no" in result["content"][0]["text"] and first.deck.ran == []


async def test_a_decision_bound_to_another_call_settles_nothing(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    store = second.deck.backends.approvals
    kept = await store.take(approval_id)
    assert kept is not None
    forged = Approval.from_json({**kept.to_json(), "binding": [kept.binding[0], kept.binding[1], "another digest"]})
    await store.add(forged)  # the shared store says the call is another one than the one that waits
    problem = await second.deck.access.decide(approval_id, _principal("bob"), True)
    assert problem == "the call stopped waiting before the decision reached it (withdrawn or expired): it was not run"
    assert not running.done() and first.deck.ran == []  # still waiting: the forged decision did not settle it
    assert await first.deck.access.approvals.wait(kept, 0.01) is None
    running.cancel()


async def test_a_decision_for_a_process_that_is_gone_says_so(fleet: Fleet) -> None:
    first, second, running, approval_id = await four_eyes_call(fleet)
    first.deck.nodes.close()  # the process no longer hears the fleet, as if it had died
    problem = await second.deck.access.decide(approval_id, _principal("bob"), True)
    assert problem == (f"the process the call waits in ({first.deck.node_id}) did not answer: the call ended with it, "
                       "and was not run")  # fmt: skip
    assert await second.deck.access.approvals.waiting("operator") == []
    assert first.deck.ran == []
    running.cancel()


def _principal(who: str) -> Principal:
    return Principal(who, roles=TOKENS[who])


# --- approval pages (URL mode) -----------------------------------------------------------------------------------------


async def page(app: HttpApp, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
    http = AsgiClient(app)
    if form is None:
        response = await http.request("GET", path=path, jsonrpc=False)
    else:
        response = await http.request("POST", path=path, body=urlencode(form).encode(), jsonrpc=False,
                                      headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    return response.status, (await response.body()).decode()


async def url_call(fleet: Fleet) -> tuple[HttpApp, HttpApp, Any, Any, str]:
    """alice's call of publish on the first process, its approval link opened: the apps, the call's stream and its
    events, and the page's path."""
    first, second = await fleet.start(2)
    http = AsgiClient(first)
    session = await session_of(http, URL_CAPS)
    call = await http.call(session, 1, "tools/call", {"name": "publish", "arguments": {"target": "prod"}},
                           headers=bearer("alice"))  # fmt: skip
    events = call.events()
    assert (await events.__anext__()).data == ""  # priming
    request = (await events.__anext__()).message
    assert request["method"] == "elicitation/create" and request["params"]["mode"] == "url"
    reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept"}}
    assert (await http.post(reply, session=session, headers=bearer("alice"))).status == 202
    return first, second, call, events, "/approve/" + request["params"]["elicitationId"]


async def test_an_approval_page_served_by_another_process_approves_the_call(fleet: Fleet) -> None:
    first, second, call, events, path = await url_call(fleet)
    status, text = await page(second, path)
    assert status == 200 and "publish@2.1.0" in text and "token:alice" in text
    token = text.split('name="form" value="', 1)[1].split('"', 1)[0]
    status, text = await page(second, path, {"form": token, "token": "alice-key", "decision": "approve"})
    assert (status, "The call is approved" in text) == (200, True)
    assert (await events.__anext__()).message["method"] == "notifications/elicitation/complete"
    result = (await events.__anext__()).message["result"]
    assert result["structuredContent"] == {"result": "published prod"} and first.deck.ran == ["prod"]
    for app in (first, second):
        assert (await page(app, path))[0] == 404  # single use, on every process
    await call.close()


async def test_wrong_credentials_on_the_pages_of_two_processes_count_together(fleet: Fleet) -> None:
    first, second, call, events, path = await url_call(fleet)
    token = (await page(first, path))[1].split('name="form" value="', 1)[1].split('"', 1)[0]
    statuses = [(await page(app, path, {"form": token, "token": "bob-key", "decision": "approve"}))[0]
                for app in (first, second, second)]  # fmt: skip
    assert statuses == [403, 403, 403]
    await events.__anext__()  # elicitation/complete
    assert "the approver denied it" in (await events.__anext__()).message["result"]["content"][0]["text"]
    assert first.deck.ran == []
    await call.close()


async def test_one_process_keeps_its_approvals_in_memory_and_relays_nothing(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text("[approvals]\nlevels = [10]\n")
    deck = make_deck(policy, Backends())
    approvals = deck.access.approvals
    assert approvals.relay is None and approvals is deck.access.approvals  # made once
    assert deck.nodes.handlers == {}  # no operation served: nobody else could decide
    assert type(approvals.store) is MemoryApprovalStore


async def test_a_2026_call_asked_on_one_process_is_approved_on_another_and_run_by_a_retry_on_a_third(
    fleet: Fleet,
) -> None:
    from eras import modern
    from transports.http.test_eras import headers_for

    one, two, three = await fleet.start(3)

    async def call(app: HttpApp, request_id: int, **retry: Any) -> dict[str, Any]:
        message = modern(request_id, "tools/call", {"name": "publish", "arguments": {"target": "site"}, **retry},
                         capabilities=URL_CAPS)  # fmt: skip
        response = await AsgiClient(app).post(message, version=None, accept="application/json",
                                              headers={**headers_for(message), **bearer("alice")})  # fmt: skip
        return dict(await response.json())["result"]

    first = await call(one, 1)
    link = first["inputRequests"]["approval-0"]["params"]["url"]
    path = link.removeprefix("http://127.0.0.1:8000")
    status, text = await page(two, path)
    assert status == 200 and "publish@2.1.0" in text
    token = text.split('name="form" value="', 1)[1].split('"', 1)[0]
    assert (await page(two, path, {"form": token, "token": "alice-key", "decision": "approve"}))[0] == 200
    done = await call(three, 2, inputResponses={"approval-0": {"action": "accept"}},
                      requestState=first["requestState"])  # fmt: skip
    assert done["structuredContent"] == {"result": "published site"}
    assert [app.deck.ran for app in (one, two, three)] == [[], [], ["site"]]  # type: ignore[attr-defined]
