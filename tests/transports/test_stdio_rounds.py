"""Multi round-trip requests over stdio (real subprocesses, 2026-07-28): a question ends the call with an interim
result; its retry resumes it, on the same connection or in another process started with the same
``$TOOLDECK_STATE_KEY``; a level-8 tool is confirmed that way once. Every line is checked against the schema."""

from __future__ import annotations

from asking import KEY, SAMPLED, accept, code_in, retry
from eras import modern
from stdio_client import StdioServer

DECK = "tests/transports/decks/asking_deck.py"
ENV = {"TOOLDECK_STATE_KEY": KEY.decode()}
BOTH = {"elicitation": {}, "sampling": {}}


def test_questions_over_stdio_and_a_retry_taken_by_another_process() -> None:
    with StdioServer("serve", DECK, env=ENV) as one, StdioServer("serve", DECK, env=ENV) as two:
        first = modern(1, "tools/call", {"name": "at_once"}, capabilities=BOTH)
        one.send(first)
        interim = one.read()["result"]
        assert list(interim["inputRequests"]) == ["user_name", "greeting"]
        two.send(retry(2, first, interim, {"user_name": accept(name="Ada"), "greeting": SAMPLED}, capabilities=BOTH))
        assert two.read()["result"]["content"][0]["text"] == "Paris, Ada"
        state = interim["requestState"]
        middle = len(state) // 2  # a character that always carries bits (the last may not: base64's padding bits)
        forged = {
            **interim,
            "requestState": state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :],
        }
        one.send(retry(3, first, forged, {"user_name": accept(name="Ada")}, capabilities=BOTH))
        assert one.read()["error"]["code"] == -32602
        one.send(modern(4, "tools/call", {"name": "greet"}))
        assert one.read()["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_level_8_tool_confirmed_over_stdio_runs_once() -> None:
    with StdioServer("serve", DECK, env=ENV) as one, StdioServer("serve", DECK, env=ENV) as two:
        first = modern(
            1, "tools/call", {"name": "wipe", "arguments": {"disk": "sda"}}, capabilities={"elicitation": {}}
        )
        one.send(first)
        interim = one.read()["result"]
        confirmed = retry(2, first, interim, {"input-1": accept(code=code_in(interim))},
                          capabilities={"elicitation": {}})  # fmt: skip
        two.send(confirmed)
        assert two.read()["result"]["structuredContent"] == {"result": "wiped sda"}
        two.send({**confirmed, "id": 3})
        assert "used already" in two.read()["error"]["message"]
