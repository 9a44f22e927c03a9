"""The sanitiser on every channel a tool has, end to end, in both eras: log notifications (strings, and object keys
and values nested), progress messages and elicitation questions (message, form labels), from async tools and from
sync tools in the worker pool, and results whose text is JSON. In process (the memory client for 2025-11-25, the
sans-IO driver for 2026-07-28), over stdio and over HTTP (real subprocesses); every message schema-checked. Each
channel carries the hostile corpus (tests/security/hostile_deck.py) and must deliver what the corpus expects; with
``[sanitise] enabled = false`` it delivers the text as the tool wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from eras import modern
from helpers import client
from http_client import HttpClient, serve_http
from security.hostile_deck import (
    ENCODABLE,
    ESC_SAMPLE,
    ESC_SAMPLE_CLEAN,
    HOSTILE,
    expected_notifications,
    expected_report,
    form,
    hostile_deck,
    parse_json_text,
)
from security.hostile_strings import dirty_strings
from server.test_stateless import Driver
from stdio_client import CLIENT_INFO, StdioServer
from transports.http.test_eras import headers_for

DECK = "tests/transports/decks/hostile_deck.py"
ELICIT = {"elicitation": {}}
EVERY = 29  # questions over a real transport: every 29th case of the corpus (each class still among them)
# Notifications over HTTP: every 3rd case, 7 messages each, stays under a stream's backlog (max_backlog, 1,000
# messages waiting; past it the oldest notification is dropped, and an async tool that never yields sends them all
# before the stream is written once). The stdio and in-process tests take the whole corpus.
HTTP_EVERY = 3


def notifications(messages: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """(method, params without the progress token, JSON text parsed) of the notifications among ``messages``."""
    return [(m["method"], parse_json_text({k: v for k, v in m["params"].items() if k != "progressToken"}))
            for m in messages if "method" in m and "id" not in m]  # fmt: skip


def question(text: str) -> dict[str, Any]:
    return {"mode": "form", "message": text, "requestedSchema": form(text)}


def expected_questions(every: int = 1) -> list[dict[str, Any]]:
    return [question(clean) for _, clean in ENCODABLE[::every]]


def check_results(results: dict[str, dict[str, Any]], every: int = 1) -> None:
    """The results of ``report``, ``unstructured`` and ``json_text``: text that parses (as a client parses it) to
    the clean value, and structuredContent equal to it."""
    want = expected_report(every)
    assert results["report"]["structuredContent"] == want
    assert json.loads(results["report"]["content"][0]["text"]) == want
    assert json.loads(results["unstructured"]["content"][0]["text"]) == want
    wrapped = results["json_text"]
    assert json.loads(wrapped["content"][0]["text"]) == expected_report(every, surrogates=True)
    assert wrapped["structuredContent"] == {"result": wrapped["content"][0]["text"]}
    assert dirty_strings(json.loads(wrapped["content"][0]["text"])) == []
    for result in results.values():
        assert result["isError"] is False


# --- in process, 2025-11-25 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["chatter", "chatter_sync"])
async def test_logs_and_progress_are_cleaned_in_a_2025_session(tool: str) -> None:
    async with client(hostile_deck()) as c:
        await c.request("logging/setLevel", {"level": "debug"})
        assert (await c.call_tool(tool, progressToken="p"))["content"] == [{"type": "text", "text": "said it all"}]
        assert notifications(c.notifications) == expected_notifications()


async def test_questions_are_cleaned_in_a_2025_session() -> None:
    async with client(hostile_deck(), capabilities=ELICIT) as c:
        c.on_request("elicitation/create", lambda params: {"action": "decline"})
        result = await c.call_tool("ask")
        assert result["structuredContent"] == {"result": ["decline"] * len(ENCODABLE)}
        assert [request["params"] for request in c.requests] == expected_questions()


async def test_results_whose_text_is_json_parse_to_clean_values_in_a_2025_session() -> None:
    async with client(hostile_deck()) as c:
        check_results({name: await c.call_tool(name) for name in ("report", "unstructured", "json_text")})


async def test_with_the_sanitiser_off_every_channel_carries_the_tools_text(tmp_path: Path) -> None:
    policy = tmp_path / "off.toml"
    policy.write_text("[sanitise]\nenabled = false\n")
    deck = hostile_deck()
    deck.apply_policy(policy)
    first = HOSTILE[0]  # every=len: the first case only ("a\x1b[1;31@b")
    async with client(deck, capabilities=ELICIT) as c:
        await c.request("logging/setLevel", {"level": "debug"})
        c.on_request("elicitation/create", lambda params: {"action": "decline"})
        await c.call_tool("chatter", {"every": len(HOSTILE)}, progressToken="p")
        sent = [params.get("data", params.get("message")) for _, params in notifications(c.notifications)]
        assert sent[:4] == [first, {"nested": [{first: {"deeper": [first, 1, None]}}]}, [first, [first]],
                            "a plain line"]  # fmt: skip
        assert sent[-2] == first and notifications(c.notifications)[3][1]["logger"] == first
        await c.call_tool("ask_once")
        assert c.requests[0]["params"] == {"mode": "form", "message": ESC_SAMPLE, "requestedSchema": form(ESC_SAMPLE)}
    on = tmp_path / "on.toml"
    on.write_text("")  # a policy that says nothing: the sanitiser is on again
    deck.apply_policy(on)
    async with client(deck, capabilities=ELICIT) as c:
        c.on_request("elicitation/create", lambda params: {"action": "decline"})
        await c.call_tool("ask_once")
        assert c.requests[0]["params"] == question(ESC_SAMPLE_CLEAN)


# --- in process, 2026-07-28 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["chatter", "chatter_sync"])
async def test_logs_and_progress_on_a_requests_stream_are_cleaned_in_2026(tool: str) -> None:
    driver = Driver(hostile_deck())
    replies = await driver.exchange(modern(1, "tools/call", {"name": tool}, logLevel="debug", progressToken="p"))
    assert replies[-1]["result"]["content"] == [{"type": "text", "text": "said it all"}]
    assert notifications(replies) == expected_notifications()


async def test_questions_in_an_input_required_result_are_cleaned_in_2026() -> None:
    driver = Driver(hostile_deck())
    (reply,) = await driver.exchange(modern(1, "tools/call", {"name": "ask"}, capabilities=ELICIT))
    interim = reply["result"]
    assert interim["resultType"] == "input_required"
    assert [interim["inputRequests"][f"q{index}"] for index in range(len(ENCODABLE))] == [
        {"method": "elicitation/create", "params": params} for params in expected_questions()
    ]


async def test_results_whose_text_is_json_parse_to_clean_values_in_2026() -> None:
    driver = Driver(hostile_deck())
    results = {}
    for number, name in enumerate(("report", "unstructured", "json_text")):
        results[name] = (await driver.request(number, "tools/call", {"name": name}))["result"]
    check_results(results)


# --- over stdio ---------------------------------------------------------------------------------------------------------


def answer_questions(server: StdioServer, request_id: Any) -> tuple[list[Any], list[Any], Any]:
    """Read until the response to ``request_id``, declining every elicitation: (notifications, questions, response)."""
    seen, questions = [], []
    while True:
        message = server.read()
        if message.get("method") == "elicitation/create":
            questions.append(message["params"])
            server.send({"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}})
        elif "method" in message:
            seen.append(message)
        elif message.get("id") == request_id:
            return seen, questions, message


def test_every_channel_is_cleaned_over_stdio_in_a_2025_session() -> None:
    with StdioServer("serve", DECK) as server:
        init = {"protocolVersion": "2025-11-25", "capabilities": ELICIT, "clientInfo": CLIENT_INFO}
        assert "result" in server.request("initialize", init, id="init")
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert server.request("logging/setLevel", {"level": "debug"}, id="level")["result"] == {}
        for number, tool in enumerate(("chatter", "chatter_sync")):
            server.send({"jsonrpc": "2.0", "id": number, "method": "tools/call",
                         "params": {"name": tool, "_meta": {"progressToken": "p"}}})  # fmt: skip
            seen, _, response = answer_questions(server, number)
            assert "result" in response and notifications(seen) == expected_notifications()
        server.send({"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
                     "params": {"name": "ask", "arguments": {"every": EVERY}}})  # fmt: skip
        _, questions, response = answer_questions(server, "ask")
        assert questions == expected_questions(EVERY)
        results = {name: server.request("tools/call", {"name": name}, id=name)["result"]
                   for name in ("report", "unstructured", "json_text")}  # fmt: skip
        check_results(results)


def test_every_channel_is_cleaned_over_stdio_in_2026() -> None:
    with StdioServer("serve", DECK) as server:
        for number, tool in enumerate(("chatter", "chatter_sync")):
            server.send(modern(number, "tools/call", {"name": tool}, logLevel="debug", progressToken="p"))
            seen, _, response = answer_questions(server, number)
            assert response["result"]["resultType"] == "complete"
            assert notifications(seen) == expected_notifications()
        server.send(modern("ask", "tools/call", {"name": "ask", "arguments": {"every": EVERY}}, capabilities=ELICIT))
        interim = server.read()["result"]
        assert [request["params"] for request in interim["inputRequests"].values()] == expected_questions(EVERY)
        results = {}
        for name in ("report", "unstructured", "json_text"):
            server.send(modern(name, "tools/call", {"name": name}))
            results[name] = server.read()["result"]
        check_results(results)


# --- over HTTP ----------------------------------------------------------------------------------------------------------


def stream_answering(http: HttpClient, message: dict[str, Any], **options: Any) -> tuple[list[Any], list[Any], Any]:
    """POST ``message`` and read its stream to the response, declining each elicitation on a POST of its own:
    (notifications, questions, response)."""
    seen, questions = [], []
    with http.stream(message, **options) as stream:
        assert stream.status_code == 200
        for event in stream.messages():
            if event.get("method") == "elicitation/create":
                questions.append(event["params"])
                answer = {"jsonrpc": "2.0", "id": event["id"], "result": {"action": "decline"}}
                assert http.post(answer, session=options.get("session")).status_code == 202
            elif "method" in event:
                seen.append(event)
            elif event.get("id") == message["id"]:
                return seen, questions, event
    raise AssertionError("the stream ended without the response")


def test_every_channel_is_cleaned_over_http_in_a_2025_session() -> None:
    with serve_http(DECK) as url, HttpClient(url) as http:
        init = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": ELICIT, "clientInfo": CLIENT_INFO}}  # fmt: skip
        opened = http.post(init, version=None)
        session = opened.headers["mcp-session-id"]
        assert http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session).status_code == 202
        assert http.post({"jsonrpc": "2.0", "id": "level", "method": "logging/setLevel",
                          "params": {"level": "debug"}}, session=session).status_code == 200  # fmt: skip
        for number, tool in enumerate(("chatter", "chatter_sync")):
            call = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
                    "params": {"name": tool, "arguments": {"every": HTTP_EVERY}, "_meta": {"progressToken": "p"}}}  # fmt: skip
            seen, _, response = stream_answering(http, call, session=session)
            assert "result" in response and notifications(seen) == expected_notifications(HTTP_EVERY)
        ask = {"jsonrpc": "2.0", "id": "ask", "method": "tools/call",
               "params": {"name": "ask", "arguments": {"every": EVERY}}}  # fmt: skip
        _, questions, response = stream_answering(http, ask, session=session)
        assert questions == expected_questions(EVERY) and "result" in response
        results = {}
        for name in ("report", "unstructured", "json_text"):
            call = {"jsonrpc": "2.0", "id": name, "method": "tools/call", "params": {"name": name}}
            results[name] = stream_answering(http, call, session=session)[2]["result"]
        check_results(results)


def test_every_channel_is_cleaned_over_http_in_2026() -> None:
    with serve_http(DECK) as url, HttpClient(url) as http:
        for number, tool in enumerate(("chatter", "chatter_sync")):
            call = modern(number, "tools/call", {"name": tool, "arguments": {"every": HTTP_EVERY}}, logLevel="debug",
                          progressToken="p")  # fmt: skip
            seen, _, response = stream_answering(http, call, version=None, headers=headers_for(call))
            assert response["result"]["resultType"] == "complete"
            assert notifications(seen) == expected_notifications(HTTP_EVERY)
        ask = modern("ask", "tools/call", {"name": "ask", "arguments": {"every": EVERY}}, capabilities=ELICIT)
        interim = stream_answering(http, ask, version=None, headers=headers_for(ask))[2]["result"]
        assert [request["params"] for request in interim["inputRequests"].values()] == expected_questions(EVERY)
        results = {}
        for name in ("report", "unstructured", "json_text"):
            call = modern(name, "tools/call", {"name": name})
            results[name] = orjson.loads(http.post(call, version=None, headers=headers_for(call)).content)["result"]
        check_results(results)
