"""Multi round-trip requests (2026-07-28) against the sans-IO session: a question ends the request with an
InputRequiredResult, the client's retry resumes it from the sealed requestState (server/rounds.py); the same tool in a
2025 session sends real requests. Every message is checked against the 2026-07-28 schema (the Driver's WireChecker).
"""

from __future__ import annotations

from typing import Any

import pytest

from asking import KEY, RUNS, SAMPLED, accept, asking_deck, code_in, retry
from eras import SERVER_INFO_KEY, modern
from helpers import client
from server.test_stateless import Driver
from tooldeck.security.principal import Principal

ELICIT = {"elicitation": {}}
BOTH = {"elicitation": {}, "sampling": {}}
ERIN = Principal("erin")


@pytest.fixture
def driver() -> Driver:
    return Driver(asking_deck(), principal=ERIN)


async def rounds(driver: Driver, first: dict[str, Any], *answers: dict[str, Any], caps: Any = None) -> list[Any]:
    """Send ``first``, then one retry per answer (each with the state of the interim before it): every reply."""
    replies = [(await driver.exchange(first))[-1]]
    for number, responses in enumerate(answers, 2):
        interim = replies[-1]["result"]
        replies.append((await driver.exchange(retry(number * 100, first, interim, responses,
                                                    capabilities=caps or ELICIT)))[-1])  # fmt: skip
    return replies


async def test_a_question_ends_the_call_with_input_required_and_the_retry_completes_it(driver: Driver) -> None:
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    asked, done = await rounds(driver, first, {"input-1": accept(name="Ada")})
    interim = asked["result"]
    assert interim["resultType"] == "input_required"
    assert interim["inputRequests"] == {
        "input-1": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            },
        }
    }
    assert isinstance(interim["requestState"], str)
    assert interim["_meta"] == {SERVER_INFO_KEY: {"name": "asking", "version": "1.0.0"}}
    assert "ttlMs" not in interim and "cacheScope" not in interim
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert done["result"]["resultType"] == "complete"
    assert [m for m in driver.out if "method" in m and "id" in m] == []  # never a request of the server's own


async def test_two_questions_take_two_rounds_and_code_before_a_question_runs_again(driver: Driver) -> None:
    RUNS.clear()
    first = modern(1, "tools/call", {"name": "two_steps"}, capabilities=ELICIT)
    one, two, done = await rounds(driver, first, {"input-1": accept(name="Ada")}, {"input-2": accept(color="teal")})
    assert list(one["result"]["inputRequests"]) == ["input-1"]
    assert list(two["result"]["inputRequests"]) == ["input-2"]
    assert two["result"]["requestState"] != one["result"]["requestState"]
    assert done["result"]["content"][0]["text"] == "Ada likes teal"  # the first answer came back in the state
    assert RUNS == ["start", "start", "named", "start", "named"]


async def test_questions_asked_at_once_come_in_one_round_under_the_tools_keys(driver: Driver) -> None:
    first = modern(1, "tools/call", {"name": "at_once"}, capabilities=BOTH)
    asked, done = await rounds(driver, first, {"user_name": accept(name="Ada"), "greeting": SAMPLED}, caps=BOTH)
    requests = asked["result"]["inputRequests"]
    assert list(requests) == ["user_name", "greeting"]
    assert requests["greeting"] == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
            "maxTokens": 50,
        },
    }
    assert done["result"]["content"][0]["text"] == "Paris, Ada"


async def test_sampling_is_a_round_trip_too(driver: Driver) -> None:
    caps = {"sampling": {}}
    first = modern(1, "tools/call", {"name": "capital"}, capabilities=caps)
    asked, done = await rounds(driver, first, {"input-1": SAMPLED}, caps=caps)
    assert asked["result"]["inputRequests"]["input-1"]["params"]["maxTokens"] == 100
    assert done["result"]["content"][0]["text"] == "The model says Paris"


async def test_roots_are_a_round_trip_too(driver: Driver) -> None:
    caps = {"roots": {"listChanged": True}}
    first = modern(1, "tools/call", {"name": "count_roots"}, capabilities=caps)
    asked, done = await rounds(driver, first, {"client_roots": {"roots": [{"uri": "file:///work"}]}}, caps=caps)
    assert asked["result"]["inputRequests"] == {"client_roots": {"method": "roots/list", "params": {}}}
    assert done["result"]["content"][0]["text"] == "Found 1 root(s): file:///work"
    refused = await driver.request(2, "tools/call", {"name": "count_roots"}, capabilities=ELICIT)
    assert refused["error"]["data"] == {"requiredCapabilities": {"roots": {}}}


async def test_a_prompt_and_a_resource_ask_too_and_a_retried_read_is_not_cacheable(driver: Driver) -> None:
    first = modern(1, "prompts/get", {"name": "briefing", "arguments": {"topic": "tides"}}, capabilities=ELICIT)
    asked, done = await rounds(driver, first, {"input-1": accept(context="safety")})
    assert (
        asked["result"]["inputRequests"]["input-1"]["params"]["message"] == "What should the briefing on tides stress?"
    )
    assert done["result"]["messages"][0]["content"]["text"] == "Brief me on tides, stressing safety."
    first = modern(2, "resources/read", {"uri": "test://asked"}, capabilities=ELICIT)
    asked, done = await rounds(driver, first, {"input-1": accept(reader="Ada")})
    assert asked["result"]["resultType"] == "input_required"
    assert done["result"]["contents"][0]["text"] == "Read by Ada"
    assert (done["result"]["ttlMs"], done["result"]["cacheScope"]) == (0, "private")


async def test_missing_or_wrong_keys_ask_again_and_extra_keys_are_ignored(driver: Driver) -> None:
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    asked, again, done = await rounds(driver, first, {"wrong": accept(name="Eve")},
                                      {"input-1": accept(name="Ada"), "extra": {"anything": True}})  # fmt: skip
    assert again["result"]["resultType"] == "input_required"
    assert again["result"]["inputRequests"] == asked["result"]["inputRequests"]
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    declined = await rounds(driver, first, {"input-1": {"action": "decline"}})
    assert declined[-1]["result"]["content"][0]["text"] == "No name (decline)"


@pytest.mark.parametrize(
    ("responses", "message"),
    [
        (42, '"inputResponses" must be an object'),
        (None, '"inputResponses" must be an object'),
        ({"input-1": "Ada"}, '"inputResponses.input-1" must be an object'),
        ({"input-1": {"action": "maybe"}}, '"inputResponses.input-1" must be an elicitation result'),
    ],
)
async def test_malformed_input_responses_are_minus_32602(driver: Driver, responses: Any, message: str) -> None:
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    reply = (await driver.exchange(retry(2, first, interim, responses, capabilities=ELICIT)))[-1]
    assert reply["error"]["code"] == -32602
    assert message in reply["error"]["message"]


async def test_a_wrong_answer_to_the_form_is_checked_against_its_schema_as_in_2025(driver: Driver) -> None:
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    _, done = await rounds(driver, first, {"input-1": accept(name=7)})
    assert done["result"]["isError"] is True


def tampered(state: str) -> str:
    body, tag = state.split(".")
    return body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + tag


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (tampered, "integrity check"),
        (lambda state: state.replace(".", ".x"), "integrity check"),
        (lambda state: "not a state", "not a state this server issued"),
    ],
)
async def test_a_tampered_state_is_minus_32602(driver: Driver, change: Any, message: str) -> None:
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    forged = {**interim, "requestState": change(interim["requestState"])}
    reply = (await driver.exchange(retry(2, first, forged, {"input-1": accept(name="Ada")}, capabilities=ELICIT)))[-1]
    assert reply["error"]["code"] == -32602
    assert message in reply["error"]["message"]


async def test_expired_foreign_and_misplaced_states_are_minus_32602() -> None:
    deck = asking_deck(state_key=KEY)
    erin, mallory = Driver(deck, principal=ERIN), Driver(deck, principal=Principal("mallory"))
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    interim = (await erin.exchange(first))[-1]["result"]
    answers = {"input-1": accept(name="Ada")}
    foreign = (await mallory.exchange(retry(2, first, interim, answers, capabilities=ELICIT)))[-1]
    assert foreign["error"]["message"] == "Invalid params: requestState belongs to another principal"
    elsewhere = modern(3, "tools/call", {"name": "two_steps"}, capabilities=ELICIT)
    misplaced = (await erin.exchange(retry(3, elsewhere, interim, answers, capabilities=ELICIT)))[-1]
    assert "belongs to another request" in misplaced["error"]["message"]
    states = deck.request_states()
    clock = states.clock
    states.clock = lambda: clock() + 3600
    try:
        expired = (await erin.exchange(retry(4, first, interim, answers, capabilities=ELICIT)))[-1]
    finally:
        states.clock = clock
    assert "requestState has expired" in expired["error"]["message"]
    assert [r["error"]["code"] for r in (foreign, misplaced, expired)] == [-32602] * 3


async def test_another_process_with_the_same_key_takes_the_retry() -> None:
    here, there = Driver(asking_deck(state_key=KEY), principal=ERIN), Driver(asking_deck(state_key=KEY), principal=ERIN)
    first = modern(1, "tools/call", {"name": "greet"}, capabilities=ELICIT)
    interim = (await here.exchange(first))[-1]["result"]
    done = (await there.exchange(retry(2, first, interim, {"input-1": accept(name="Ada")}, capabilities=ELICIT)))[-1]
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    stranger = Driver(asking_deck(), principal=ERIN)  # its own random key: the state is not its to open
    refused = await stranger.exchange(retry(3, first, interim, {"input-1": accept(name="A")}, capabilities=ELICIT))
    assert "integrity check" in refused[-1]["error"]["message"]


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "server/discover"])
async def test_lists_are_never_input_required(driver: Driver, method: str) -> None:
    reply = await driver.request(1, method, {"inputResponses": {"input-1": accept(name="Ada")},
                                            "requestState": "x.y"}, capabilities=ELICIT)  # fmt: skip
    assert reply["result"]["resultType"] == "complete"


@pytest.mark.parametrize(
    ("tool", "capabilities", "required"),
    [("greet", {}, {"elicitation": {"form": {}}}), ("greet", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
     ("capital", ELICIT, {"sampling": {}}), ("wipe", {}, {"elicitation": {"form": {}}})],
)  # fmt: skip
async def test_asking_for_what_the_request_did_not_declare_is_minus_32021(
    driver: Driver, tool: str, capabilities: dict[str, Any], required: dict[str, Any]
) -> None:
    arguments = {"disk": "sda"} if tool == "wipe" else {}
    reply = await driver.request(1, "tools/call", {"name": tool, "arguments": arguments}, capabilities=capabilities)
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": required}


async def test_a_level_8_tool_is_confirmed_through_a_round_trip_once() -> None:
    RUNS.clear()
    deck = asking_deck(state_key=KEY)
    driver, other_process = Driver(deck, principal=ERIN), Driver(asking_deck(state_key=KEY), principal=ERIN)
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    assert RUNS == []
    message = interim["inputRequests"]["input-1"]["params"]["message"]
    assert 'wipe@3.0.0\narguments: {\n  "disk": "sda"\n}' in message
    confirmed = retry(2, first, interim, {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)
    done = (await other_process.exchange(confirmed))[-1]  # no memory of the code needed: it is in the state
    assert done["result"]["structuredContent"] == {"result": "wiped sda"}
    replayed = (await other_process.exchange({**confirmed, "id": 3}))[-1]
    assert replayed["error"] == {"code": -32602, "message": "Invalid params: requestState was used already: send the "
                                 "request again without it"}  # fmt: skip
    other_disk = retry(4, modern(4, "tools/call", {"name": "wipe", "arguments": {"disk": "sdb"}}), interim,
                       {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)  # fmt: skip
    assert "belongs to another request" in (await driver.exchange(other_disk))[-1]["error"]["message"]
    assert RUNS == ["wiped sda"]


@pytest.mark.parametrize("answer", [{"action": "decline"}, {"action": "cancel"}, accept(code="000000x")])
async def test_a_level_8_tool_declined_or_wrongly_confirmed_does_not_run(driver: Driver, answer: Any) -> None:
    RUNS.clear()
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    _, done = await rounds(driver, first, {"input-1": answer})
    assert done["result"]["isError"] is True
    assert "tool 'wipe' was not run" in done["result"]["content"][0]["text"]
    assert RUNS == []


async def test_the_same_tools_in_a_2025_session_send_real_requests() -> None:
    RUNS.clear()
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        if "code" in params["message"]:
            return accept(code=code_in({"inputRequests": {"input-1": {"params": params}}}))
        return accept(name="Ada") if "name" in params["message"] else accept(color="teal")

    async with client(asking_deck(), capabilities={"elicitation": {}}) as c:
        c.session.principal = ERIN
        c.on_request("elicitation/create", answer)
        assert (await c.call_tool("two_steps"))["content"][0]["text"] == "Ada likes teal"
        assert (await c.call_tool("wipe", {"disk": "sda"}))["structuredContent"] == {"result": "wiped sda"}
    async with client(asking_deck(), capabilities={"roots": {}}) as c:
        c.on_request("roots/list", lambda params: {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]})
        assert (await c.call_tool("count_roots"))["content"][0]["text"] == "Found 2 root(s): file:///a, file:///b"
    assert asked[:2] == ["Step 1: your name?", "Step 2: your favourite colour?"]
    assert "enter the code" in asked[2]
    assert RUNS == ["start", "named", "wiped sda"]  # one run: nothing repeats in a session


async def test_answers_sent_with_a_first_attempt_are_taken_for_the_questions_of_their_keys(driver: Driver) -> None:
    first = modern(1, "tools/call", {"name": "greet", "inputResponses": {"input-1": accept(name="Ada"),
                                                                         "extra": {"anything": 1}}},
                   capabilities=ELICIT)  # fmt: skip
    done = (await driver.exchange(first))[-1]["result"]
    assert (done["resultType"], done["content"]) == ("complete", [{"type": "text", "text": "Hello, Ada!"}])


async def test_a_first_attempt_cannot_bring_its_own_confirmation(driver: Driver) -> None:
    RUNS.clear()
    for code in ("000000", "123456", "999999"):
        first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sdb"},
                                         "inputResponses": {"input-1": accept(code=code)}},
                       capabilities=ELICIT)  # fmt: skip
        reply = (await driver.exchange(first))[-1]
        assert (
            "error" in reply
            or reply["result"].get("isError") is True
            or reply["result"]["resultType"] == ("input_required")
        ), reply
    assert RUNS == []  # never wiped


async def test_a_level_8_confirmation_round_is_audited_as_input_required(tmp_path: Any) -> None:
    import orjson

    trail = tmp_path / "audit.jsonl"
    deck = asking_deck(state_key=KEY)
    (tmp_path / "policy.toml").write_text(f'[audit]\nfile = "{trail}"\n')
    deck.apply_policy(tmp_path / "policy.toml")
    driver = Driver(deck, principal=ERIN)
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    assert interim["resultType"] == "input_required"
    (tmp_path / "empty.toml").write_text("")
    deck.apply_policy(tmp_path / "empty.toml")  # closes (drains) the trail
    (record,) = [orjson.loads(line) for line in trail.read_bytes().splitlines()]
    assert (record["tool"], record["principal"], record["security_level"], record["outcome"]) == (
        "wipe",
        "erin",
        8,
        "input_required",
    )


@pytest.mark.parametrize("refusal", [{"action": "decline"}, {"action": "cancel"}])
async def test_a_declined_confirmation_spends_its_state(driver: Driver, refusal: dict[str, Any]) -> None:
    # The state that carried the question is spent by any answer: a declined one cannot be accepted later.
    RUNS.clear()
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    declined = (await driver.exchange(retry(2, first, interim, {"input-1": refusal}, capabilities=ELICIT)))[-1]
    assert declined["result"]["isError"] is True
    accepted_later = retry(3, first, interim, {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)
    late = (await driver.exchange(accepted_later))[-1]
    assert late["error"] == {"code": -32602, "message": "Invalid params: requestState was used already: send the "
                             "request again without it"}  # fmt: skip
    assert RUNS == []


async def test_a_confirmation_in_the_state_confirms_only_the_version_it_showed() -> None:
    # An answer counts only for the question it answered, and the question shows tool@version: a tool upgraded
    # between the question and the answer is asked about again, never run on the old version's confirmation.
    RUNS.clear()
    deck = asking_deck(state_key=KEY)
    driver = Driver(deck, principal=ERIN)
    first = modern(1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities=ELICIT)
    interim = (await driver.exchange(first))[-1]["result"]
    assert "wipe@3.0.0" in interim["inputRequests"]["input-1"]["params"]["message"]
    deck.remove_tool("wipe")

    @deck.tool(name="wipe", security_level=8, version="3.1.0")
    def wipe_everything(disk: str) -> str:
        RUNS.append(f"wiped {disk} and its backups")
        return "wiped"

    confirmed = retry(2, first, interim, {"input-1": accept(code=code_in(interim))}, capabilities=ELICIT)
    again = (await driver.exchange(confirmed))[-1]["result"]
    assert again["resultType"] == "input_required"
    assert "wipe@3.1.0" in again["inputRequests"]["input-1"]["params"]["message"]
    assert RUNS == []
