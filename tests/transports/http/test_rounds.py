"""Multi round-trip requests over Streamable HTTP (2026-07-28): the interim result and the retry are two ordinary
POSTs with no session; a retry may reach another server process holding the same key; refused states are 400 with a
-32602 body. Every body is checked against the 2026-07-28 schema (tests/asgi_client.py)."""

from __future__ import annotations

from pathlib import Path

from asgi_client import AsgiClient
from asking import KEY, RUNS, accept, asking_deck, code_in, retry
from eras import modern
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http.app import HttpApp
from transports.http.test_eras import answer, post

ELICIT = {"elicitation": {}}


async def test_a_question_is_an_interim_result_and_the_retry_may_reach_another_process() -> None:
    one, two = AsgiClient(HttpApp(asking_deck(state_key=KEY))), AsgiClient(HttpApp(asking_deck(state_key=KEY)))
    first = modern(1, "tools/call", {"name": "two_steps"}, capabilities=ELICIT)
    status, body, response = await answer(one, first)
    assert status == 200 and body["result"]["resultType"] == "input_required"
    assert "mcp-session-id" not in response.headers
    status, body, _ = await answer(two, retry(2, first, body["result"], {"input-1": accept(name="Ada")},
                                               capabilities=ELICIT))  # fmt: skip
    assert status == 200 and list(body["result"]["inputRequests"]) == ["input-2"]
    status, body, _ = await answer(one, retry(3, first, body["result"], {"input-2": accept(color="teal")},
                                               capabilities=ELICIT))  # fmt: skip
    assert status == 200 and body["result"]["content"][0]["text"] == "Ada likes teal"


async def test_a_tampered_state_or_a_malformed_answer_is_400_with_minus_32602() -> None:
    client = AsgiClient(HttpApp(asking_deck()))
    first = modern(1, "prompts/get", {"name": "briefing", "arguments": {"topic": "tides"}}, capabilities=ELICIT)
    _, body, _ = await answer(client, first)
    interim = body["result"]
    forged = {**interim, "requestState": "A" + interim["requestState"][1:]}
    status, body, _ = await answer(
        client, retry(2, first, forged, {"input-1": accept(context="x")}, capabilities=ELICIT)
    )
    assert (status, body["error"]["code"], body["id"]) == (400, -32602, 2)
    assert "integrity check" in body["error"]["message"]
    status, body, _ = await answer(client, retry(3, first, interim, 42, capabilities=ELICIT))  # type: ignore[arg-type]
    assert (status, body["error"]["code"]) == (400, -32602)
    status, body, _ = await answer(client, retry(4, first, interim, {"input-1": accept(context="safety")},
                                                 capabilities=ELICIT))  # fmt: skip
    assert status == 200 and body["result"]["messages"][0]["content"]["text"] == "Brief me on tides, stressing safety."


async def test_a_level_8_tool_is_confirmed_over_http_once_and_for_its_arguments(tmp_path: Path) -> None:
    RUNS.clear()
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[authentication.tokens]]\nsubject = "erin"\nsha256 = "{hash_token("erin-secret")}"\n')
    apps = []
    for _ in range(2):
        deck = asking_deck(state_key=KEY)
        deck.apply_policy(policy)
        apps.append(AsgiClient(HttpApp(deck)))
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    asked = await post(apps[0], first, authorization="Bearer erin-secret")
    interim = (await asked.json())["result"]
    assert interim["resultType"] == "input_required" and RUNS == []
    confirmed = retry(2, first, interim, {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)
    done = await post(apps[1], confirmed, authorization="Bearer erin-secret")
    assert (await done.json())["result"]["structuredContent"] == {"result": "wiped sda"}
    replayed = await post(apps[1], {**confirmed, "id": 3}, authorization="Bearer erin-secret")
    assert replayed.status == 400 and "used already" in (await replayed.json())["error"]["message"]
    other = retry(4, modern(4, "tools/call", {"name": "wipe", "arguments": {"disk": "sdb"}}), interim,
                  {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)  # fmt: skip
    refused = await post(apps[0], other, authorization="Bearer erin-secret")
    assert refused.status == 400 and "another request" in (await refused.json())["error"]["message"]
    assert RUNS == ["wiped sda"]
