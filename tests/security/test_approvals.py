"""Level 8-10 calls approved by a person in a browser (``[levels] approval = "url"``): the client is sent a URL-mode
elicitation naming tooldeck's page; the call runs only once the caller's own credentials approve it there; denied,
it is refused; the link alone, another principal's credentials or a forged form approve nothing; a client without
URL mode is refused or falls back to the form, as the policy says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asgi_client import AsgiClient, Response
from tooldeck import Deck
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http import HttpApp

ALICE = {"authorization": "Bearer alice-key"}
URL_CAPS = {"elicitation": {"url": {}, "form": {}}}


def approving_deck(tmp_path: Path, without_url: str = "refuse") -> tuple[Deck, list[str]]:
    deck = Deck("approving")
    ran: list[str] = []

    @deck.tool(security_level=9, version="2.1.0")
    def deploy(target: str) -> str:
        ran.append(target)
        return f"deployed {target}"

    policy = tmp_path / "policy.toml"
    policy.write_text(
        "".join(
            f'[[authentication.tokens]]\nsubject = "{who}"\nsha256 = "{hash_token(who + "-key")}"\n'
            for who in ("alice", "mallory")
        )
        + f'[levels]\napproval = "url"\nwithout_url = "{without_url}"\nconfirm_timeout = 30\n'
    )
    deck.apply_policy(policy)
    return deck, ran


async def open_session(http: AsgiClient, capabilities: dict[str, Any]) -> str:
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=ALICE)  # fmt: skip
    await init.body()
    return init.headers["mcp-session-id"]


async def asked(http: AsgiClient, session: str, target: str) -> tuple[Response, Any, dict[str, Any]]:
    """Call deploy; return its stream, the stream's events, and the URL-mode elicitation it sent."""
    call = await http.call(session, 1, "tools/call", {"name": "deploy", "arguments": {"target": target}},
                           headers=ALICE)  # fmt: skip
    events = call.events()
    assert (await events.__anext__()).data == ""  # priming
    request = (await events.__anext__()).message
    assert request["method"] == "elicitation/create"
    return call, events, request


async def answer(http: AsgiClient, session: str, request: dict[str, Any], action: str = "accept") -> None:
    reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": action}}
    assert (await http.post(reply, session=session, headers=ALICE)).status == 202


async def page(http: AsgiClient, path: str, form: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    if form is None:
        response = await http.request("GET", path=path, jsonrpc=False)
    else:
        from urllib.parse import urlencode

        response = await http.request("POST", path=path, body=urlencode(form).encode(), jsonrpc=False,
                                      headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    return response.status, (await response.body()).decode(), response.headers


def form_token(text: str) -> str:
    return text.split('name="form" value="', 1)[1].split('"', 1)[0]


async def waiting(tmp_path: Path) -> tuple[AsgiClient, Any, Any, str, str, list[str]]:
    """A call of deploy waiting for its approval, the link opened: the client, the call's stream and its events,
    the page's path, its form token, and the runs so far."""
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await open_session(http, URL_CAPS)
    call, events, request = await asked(http, session, "prod")
    await answer(http, session, request)
    path = "/approve/" + request["params"]["elicitationId"]
    return http, call, events, path, form_token((await page(http, path))[1]), ran


async def test_the_caller_approves_in_the_browser_and_then_the_call_runs(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await open_session(http, URL_CAPS)
    call, events, request = await asked(http, session, "<script>prod</script>")
    params = request["params"]
    assert params["mode"] == "url" and "deploy@2.1.0 needs your approval" in params["message"]
    path = params["url"].removeprefix("http://127.0.0.1:8000")
    assert path == f"/approve/{params['elicitationId']}"
    await answer(http, session, request)
    assert ran == []  # opening the page is not approving

    status, text, headers = await page(http, path)
    assert status == 200
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert "deploy@2.1.0" in text and "token:alice" in text
    assert "&lt;script&gt;prod&lt;/script&gt;" in text and "<script>" not in text  # what the call carries, escaped
    token = form_token(text)

    assert (await page(http, path, {"form": "forged", "token": "alice-key", "decision": "approve"}))[0] == 400
    status, text, _ = await page(http, path, {"form": token, "token": "mallory-key", "decision": "approve"})
    assert status == 403 and "not those the call was made with" in text  # another principal approves nothing
    assert ran == []
    status, text, _ = await page(http, path, {"form": token, "token": "alice-key", "decision": "approve"})
    assert (status, "The call is approved" in text) == (200, True)

    complete = (await events.__anext__()).message
    assert complete == {"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                        "params": {"elicitationId": params["elicitationId"]}}  # fmt: skip
    result = (await events.__anext__()).message
    assert result["result"]["structuredContent"] == {"result": "deployed <script>prod</script>"}
    assert ran == ["<script>prod</script>"]
    assert (await page(http, path, {"form": token, "token": "alice-key", "decision": "approve"}))[0] == 404  # once
    await call.close()


async def test_a_denied_call_never_runs(tmp_path: Path) -> None:
    http, call, events, path, token, ran = await waiting(tmp_path)
    assert (await page(http, path, {"form": token, "token": "alice-key", "decision": "deny"}))[0] == 200
    await events.__anext__()  # elicitation/complete
    result = (await events.__anext__()).message["result"]
    assert result["isError"] is True and "the approver denied it" in result["content"][0]["text"]
    assert ran == []
    await call.close()


async def test_three_wrong_credentials_deny_the_call(tmp_path: Path) -> None:
    http, call, events, path, token, ran = await waiting(tmp_path)
    statuses = [(await page(http, path, {"form": token, "token": "guess", "decision": "approve"}))[0] for _ in range(3)]
    assert statuses == [403, 403, 403]
    await events.__anext__()  # elicitation/complete
    assert "the approver denied it" in (await events.__anext__()).message["result"]["content"][0]["text"]
    assert ran == []
    await call.close()


async def test_a_declined_link_never_runs_the_call_and_the_page_is_gone(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    session = await open_session(http, URL_CAPS)
    call, events, request = await asked(http, session, "prod")
    await answer(http, session, request, "decline")
    result = (await events.__anext__()).message["result"]
    assert "did not open the approval page (decline)" in result["content"][0]["text"]
    assert (await page(http, "/approve/" + request["params"]["elicitationId"]))[0] == 404
    assert ran == []
    await call.close()


async def test_a_client_without_url_mode_is_refused_or_given_the_form(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    assert ran == []
    http = AsgiClient(HttpApp(deck))
    session = await open_session(http, {"elicitation": {"form": {}}})
    refused = await http.call(session, 1, "tools/call", {"name": "deploy", "arguments": {"target": "prod"}},
                              headers=ALICE)  # fmt: skip
    assert refused.status == 403
    assert "needs a person's approval in a browser" in (await refused.json())["error"]["message"]

    deck, _ = approving_deck(tmp_path, without_url="form")
    http = AsgiClient(HttpApp(deck))
    session = await open_session(http, {"elicitation": {"form": {}}})
    _call, _events, request = await asked(http, session, "prod")
    assert request["params"]["mode"] == "form" and "enter the code" in request["params"]["message"]


async def test_unknown_pages_say_nothing_and_the_mcp_endpoint_still_needs_credentials(tmp_path: Path) -> None:
    deck, _ = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    status, _, headers = await page(http, "/approve/nothing-here")
    assert status == 404 and headers["cache-control"] == "no-store"
    assert (await http.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"authorization": "Bearer x"})
            ).status == 401  # fmt: skip


async def modern_call(http: AsgiClient, request_id: int, target: str, **retry: Any) -> dict[str, Any]:
    """A 2026-07-28 tools/call of deploy by alice (a client with URL-mode elicitation): its result."""
    from eras import modern
    from transports.http.test_eras import headers_for

    message = modern(request_id, "tools/call", {"name": "deploy", "arguments": {"target": target}, **retry},
                     capabilities=URL_CAPS)  # fmt: skip
    response = await http.post(message, version=None, accept="application/json",
                               headers={**headers_for(message), **ALICE})  # fmt: skip
    return dict(await response.json())


async def approve_on_page(http: AsgiClient, link: str, decision: str = "approve") -> int:
    path = link.removeprefix("http://127.0.0.1:8000")
    token = form_token((await page(http, path))[1])
    return (await page(http, path, {"form": token, "token": "alice-key", "decision": decision}))[0]


async def test_a_2026_call_is_approved_on_the_page_and_its_retry_runs_it_once(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    first = (await modern_call(http, 1, "prod"))["result"]
    assert first["resultType"] == "input_required"
    ((key, asked),) = first["inputRequests"].items()
    params = asked["params"]
    assert (key, asked["method"], params["mode"]) == ("approval-0", "elicitation/create", "url")
    assert "elicitationId" not in params and "deploy@2.1.0 needs your approval" in params["message"]
    assert ran == []

    # The client retries before the person decided: the link is asked for again, under a new key.
    early = (await modern_call(http, 2, "prod", inputResponses={key: {"action": "accept"}},
                               requestState=first["requestState"]))["result"]  # fmt: skip
    assert list(early["inputRequests"]) == ["approval-1"] and ran == []
    assert await approve_on_page(http, params["url"]) == 200
    retry = {"inputResponses": {"approval-1": {"action": "accept"}}, "requestState": early["requestState"]}
    done = (await modern_call(http, 3, "prod", **retry))["result"]
    assert done["structuredContent"] == {"result": "deployed prod"} and ran == ["prod"]
    replayed = await modern_call(http, 4, "prod", **retry)
    assert replayed["error"]["code"] == -32602 and ran == ["prod"]  # the state is spent: one run


async def test_a_2026_retry_that_answers_the_next_link_unasked_is_asked_it_again_and_runs_nothing(
    tmp_path: Path,
) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    first = (await modern_call(http, 1, "prod"))["result"]
    early = {"approval-0": {"action": "accept"}, "approval-1": {"action": "accept"}}  # the next key guessed, too
    again = (await modern_call(http, 2, "prod", inputResponses=early, requestState=first["requestState"]))["result"]
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["approval-1"]
    assert ran == []  # an answer to a question not asked yet counts for nothing


async def test_a_2026_call_denied_on_the_page_never_runs(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    first = (await modern_call(http, 1, "prod"))["result"]
    assert await approve_on_page(http, first["inputRequests"]["approval-0"]["params"]["url"], "deny") == 200
    done = (await modern_call(http, 2, "prod", inputResponses={"approval-0": {"action": "accept"}},
                              requestState=first["requestState"]))["result"]  # fmt: skip
    assert done["isError"] is True and "the approver denied it" in done["content"][0]["text"] and ran == []


async def test_a_2026_call_whose_link_is_declined_never_runs_and_its_page_is_gone(tmp_path: Path) -> None:
    deck, ran = approving_deck(tmp_path)
    http = AsgiClient(HttpApp(deck))
    first = (await modern_call(http, 1, "prod"))["result"]
    url = first["inputRequests"]["approval-0"]["params"]["url"]
    done = (await modern_call(http, 2, "prod", inputResponses={"approval-0": {"action": "decline"}},
                              requestState=first["requestState"]))["result"]  # fmt: skip
    assert done["isError"] is True and "did not open the approval page (decline)" in done["content"][0]["text"]
    assert (await page(http, url.removeprefix("http://127.0.0.1:8000")))[0] == 404  # nothing left to approve
    assert ran == []
