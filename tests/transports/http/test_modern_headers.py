"""The Streamable HTTP rules of 2026-07-28 beyond the ladder of test_eras.py: ``Mcp-Param-{Name}`` headers of a
tool's ``x-mcp-header`` parameters (present and equal to the arguments, the Base64 sentinel decoded, numbers compared
as numbers), 405 for a modern GET or DELETE, and 503 for modern requests while the server shuts down.

Most cases go through the app with real ASGI messages (asgi_client.py); the header spellings only a real HTTP parser
sees (names in any case, whitespace around values) go through uvicorn on a loopback socket. Every body is checked
against the schema of its request's revision; every refusal is 400 with -32020 and the request's id.
"""

from __future__ import annotations

import base64
import http.client
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import mcp_schema
from asgi_client import AsgiClient, Response
from eras import MODERN, modern
from http_client import serving_in_thread as serving
from mcp_schema import WireChecker
from tooldeck import Deck
from tooldeck.transports.http.app import HttpApp

NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SOON = 10.0


def header_deck() -> Deck:
    deck = Deck("headers", version="1.0.0")

    @deck.tool(input_schema={"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry_run": {"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
        "target": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
        "note": {"type": "string"},
    }, "required": ["region"]})  # fmt: skip
    def deploy(**arguments: Any) -> str:
        """Echoes its arguments."""
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()

    @deck.tool
    def add(a: int, b: int) -> int:
        """No x-mcp-header parameters."""
        return a + b

    return deck


def mirrored(message: dict[str, Any], **extra: str | None) -> dict[str, str]:
    """The headers a modern client sends for ``message`` (without Mcp-Param-*), plus ``extra`` (None drops one)."""
    params = message["params"]
    found: dict[str, str | None] = {"mcp-protocol-version": MODERN, "mcp-method": message["method"]}
    if message["method"] in NAMED:
        found["mcp-name"] = params[NAMED[message["method"]]]
    found.update(extra)
    return {k: v for k, v in found.items() if v is not None}


def call(request_id: Any, arguments: dict[str, Any], name: str = "deploy") -> dict[str, Any]:
    return modern(request_id, "tools/call", {"name": name, "arguments": arguments})


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@pytest.fixture
def client() -> AsgiClient:
    return AsgiClient(HttpApp(header_deck()))


async def post(client: AsgiClient, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, Response]:
    response = await client.post(message, version=None, accept="application/json",
                                 headers=mirrored(message, **headers))  # fmt: skip
    return response.status, await response.json(), response


# --- Mcp-Param-*: what passes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        ({"region": "eu-west"}, {"mcp-param-region": "eu-west"}),
        ({"region": "eu-west"}, {"mcp-param-region": " \teu-west \t"}),  # OWS around the value
        ({"region": "Zürich"}, {"mcp-param-region": b64("Zürich")}),  # the sentinel, decoded before comparing
        ({"region": " padded "}, {"mcp-param-region": b64(" padded ")}),
        ({"region": ""}, {"mcp-param-region": b64("")}),
        ({"region": "SGVsbG8="}, {"mcp-param-region": "SGVsbG8="}),  # no wrapper: literal
        ({"region": "=?base64?SGVsbG8="}, {"mcp-param-region": "=?base64?SGVsbG8="}),  # no ?= suffix: literal
        ({"region": "=?base64?="}, {"mcp-param-region": "=?base64?="}),  # too short to hold the wrapper: literal
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "42"}),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "42.0"}),  # numerically
        ({"region": "a", "count": 42.0}, {"mcp-param-region": "a", "mcp-param-count": "42"}),
        ({"region": "a", "count": -7}, {"mcp-param-region": "a", "mcp-param-count": "-7"}),
        ({"region": "a", "count": 9007199254740991}, {"mcp-param-region": "a", "mcp-param-count": "9007199254740991"}),
        ({"region": "a", "count": 420}, {"mcp-param-region": "a", "mcp-param-count": "4.2e2"}),
        ({"region": "a", "count": 3}, {"mcp-param-region": "a", "mcp-param-count": b64("3")}),
        ({"region": "a", "dry_run": True}, {"mcp-param-region": "a", "mcp-param-dry-run": "true"}),
        ({"region": "a", "dry_run": False}, {"mcp-param-region": "a", "mcp-param-dry-run": "false"}),
        ({"region": "a", "dry_run": None}, {"mcp-param-region": "a"}),  # null: no header expected
        ({"region": "a", "dry_run": None}, {"mcp-param-region": "a", "mcp-param-dry-run": "true"}),  # nor looked at
        ({"region": "a", "target": {"zone": "z1"}}, {"mcp-param-region": "a", "mcp-param-zone": "z1"}),  # nested
        ({"region": "a", "target": {}}, {"mcp-param-region": "a"}),  # absent inside its object
        ({"region": "a", "note": "not mirrored"}, {"mcp-param-region": "a"}),
        ({"region": "a"}, {"mcp-param-region": "a", "mcp-param-unknown": "\x01anything"}),  # not ours: ignored
    ],
)
async def test_matching_headers_pass_and_the_tool_runs(
    client: AsgiClient, arguments: dict[str, Any], headers: dict[str, str]
) -> None:
    status, body, _ = await post(client, call(1, arguments), headers)
    assert status == 200, body
    assert orjson.loads(body["result"]["structuredContent"]["result"]) == arguments
    assert body["result"]["resultType"] == "complete"


async def test_a_tool_without_annotations_and_other_methods_need_no_param_headers(client: AsgiClient) -> None:
    status, body, _ = await post(client, call(1, {"a": 2, "b": 3}, name="add"), {})
    assert (status, body["result"]["structuredContent"]) == (200, {"result": 5})
    status, body, _ = await post(client, modern(2, "tools/list"), {})
    assert status == 200 and [t["name"] for t in body["result"]["tools"]] == ["deploy", "add"]
    # an unknown tool has no parameters to mirror: the handler's -32602, with 200, as for any unknown tool
    status, body, _ = await post(client, call(3, {"region": "a"}, name="ghost"), {"mcp-param-region": "b"})
    assert (status, body["error"]["code"]) == (200, -32602)


# --- Mcp-Param-*: what is refused ------------------------------------------------------------------------------------

MISSING = "the Mcp-Param-Region header is required, as params.arguments.region is present"


@pytest.mark.parametrize(
    ("arguments", "headers", "message"),
    [
        ({"region": "eu-west"}, {}, MISSING),
        ({"region": "eu-west"}, {"mcp-param-region": "us-east"},
         "Mcp-Param-Region is 'us-east' but params.arguments.region is 'eu-west'"),
        ({"region": "eu-west"}, {"mcp-param-region": "EU-WEST"}, "Mcp-Param-Region is 'EU-WEST'"),  # case-sensitive
        ({"region": "eu-west"}, {"mcp-param-region": b64("us-east")}, "Mcp-Param-Region is 'us-east'"),
        ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVsbG8?="},  # bad padding
         "Mcp-Param-Region is not valid Base64 of UTF-8 text"),
        ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVs!!!bG8=?="},  # outside the alphabet
         "Mcp-Param-Region is not valid Base64 of UTF-8 text"),
        ({"region": "Hello"}, {"mcp-param-region": "=?base64?SGVs-bG8=?="},  # the URL-safe alphabet is not Base64
         "Mcp-Param-Region is not valid Base64 of UTF-8 text"),
        ({"region": "x"}, {"mcp-param-region": "=?base64?" + base64.b64encode(b"\xff").decode() + "?="},
         "Mcp-Param-Region is not valid Base64 of UTF-8 text"),
        ({"region": "Zürich"}, {"mcp-param-region": "Zürich"}, "Mcp-Param-Region has characters a header may not"),
        ({"region": "a\x01b"}, {"mcp-param-region": "a\x01b"}, "Mcp-Param-Region has characters a header may not"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a"},
         "the Mcp-Param-Count header is required, as params.arguments.count is present"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "43"},
         "Mcp-Param-Count is '43' but params.arguments.count is 42"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "forty-two"},
         "Mcp-Param-Count is 'forty-two'"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "0x2A"}, "Mcp-Param-Count"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "42abc"}, "Mcp-Param-Count"),
        ({"region": "a", "count": 42}, {"mcp-param-region": "a", "mcp-param-count": "+42"}, "Mcp-Param-Count"),
        ({"region": "a", "count": 9007199254740993}, {"mcp-param-region": "a", "mcp-param-count": "9007199254740992"},
         "Mcp-Param-Count"),  # exact, not through floats
        ({"region": "a", "dry_run": True}, {"mcp-param-region": "a"}, "the Mcp-Param-Dry-Run header is required"),
        ({"region": "a", "dry_run": True}, {"mcp-param-region": "a", "mcp-param-dry-run": "True"},
         "Mcp-Param-Dry-Run is 'True' but params.arguments.dry_run is true"),
        ({"region": "a", "dry_run": False}, {"mcp-param-region": "a", "mcp-param-dry-run": "0"},
         "Mcp-Param-Dry-Run is '0' but params.arguments.dry_run is false"),
        ({"region": "a", "target": {"zone": "z1"}}, {"mcp-param-region": "a"},
         "the Mcp-Param-Zone header is required, as params.arguments.target.zone is present"),
        ({"region": "a", "target": {"zone": "z1"}}, {"mcp-param-region": "a", "mcp-param-zone": "z2"},
         "Mcp-Param-Zone is 'z2' but params.arguments.target.zone is 'z1'"),
        # a recognised header must be well-formed even when its value is absent
        ({"region": "a"}, {"mcp-param-region": "a", "mcp-param-count": "=?base64?!!?="},
         "Mcp-Param-Count is not valid Base64"),
    ],
)  # fmt: skip
async def test_each_param_header_problem_is_400_with_minus_32020_naming_the_header(
    client: AsgiClient, arguments: dict[str, Any], headers: dict[str, str], message: str
) -> None:
    status, body, response = await post(client, call("r", arguments), headers)
    assert (status, body["id"], body["error"]["code"]) == (400, "r", -32020), body
    assert body["error"]["message"].startswith("Header mismatch: ")
    assert message in body["error"]["message"], body["error"]["message"]
    assert "mcp-session-id" not in response.headers


async def test_param_headers_are_the_last_header_rung_of_the_ladder(client: AsgiClient) -> None:
    wrong = {"mcp-param-region": "nope"}
    status, body, _ = await post(client, call(1, {"region": "a"}), {**wrong, "mcp-name": "add"})
    assert (status, body["error"]["code"]) == (400, -32020) and "Mcp-Name" in body["error"]["message"]
    status, body, _ = await post(client, modern(2, "tools/call", {"name": "deploy", "arguments": {"region": "a"}},
                                                version="v999.0.0"),
                                 {**wrong, "mcp-protocol-version": "v999.0.0"})  # fmt: skip
    assert (status, body["error"]["code"]) == (400, -32022)


async def test_the_mcp_name_sentinel_is_decoded_and_checked(client: AsgiClient) -> None:
    arguments = {"region": "a"}
    status, body, _ = await post(client, call(1, arguments), {"mcp-param-region": "a", "mcp-name": b64("deploy")})
    assert status == 200, body
    status, body, _ = await post(client, call(2, arguments), {"mcp-param-region": "a", "mcp-name": b64("add")})
    assert (status, body["error"]["code"]) == (400, -32020)
    assert "Mcp-Name is 'add'" in body["error"]["message"]
    status, body, _ = await post(client, call(3, arguments), {"mcp-param-region": "a", "mcp-name": "=?base64?ZGVw?="})
    assert (status, body["error"]["code"]) == (400, -32020)  # "dep" is valid Base64 but not the name
    status, body, _ = await post(client, call(4, arguments), {"mcp-param-region": "a", "mcp-name": "=?base64?ZGV?="})
    assert (status, body["error"]["code"]) == (400, -32020) and "not valid Base64" in body["error"]["message"]


async def test_2025_sessions_are_not_asked_for_param_headers(client: AsgiClient) -> None:
    session = await client.initialize()
    response = await client.call(session, 1, "tools/call", {"name": "deploy", "arguments": {"region": "a"}},
                                 accept="application/json")  # fmt: skip
    body = await response.json()
    assert response.status == 200 and orjson.loads(body["result"]["structuredContent"]["result"]) == {"region": "a"}


# --- GET and DELETE --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("version", [MODERN, f" {MODERN}\t"])
async def test_a_modern_get_or_delete_without_a_session_is_405_allowing_post(method: str, version: str) -> None:
    client = AsgiClient(HttpApp(header_deck()))
    response = await client.request(method, headers={"mcp-protocol-version": version, "accept": "text/event-stream"})
    body = await response.json()
    assert (response.status, response.headers["allow"]) == (405, "POST")
    assert body["error"]["code"] == -32600 and "id" not in body
    assert body["error"]["message"] == (f"Method not allowed: {method} is not part of protocol revision {MODERN}; "
                                        "send each request as a POST")  # fmt: skip
    mcp_schema.check(MODERN, "JSONRPCErrorResponse", body)


async def test_2025_get_and_delete_are_unchanged() -> None:
    client = AsgiClient(HttpApp(header_deck()))
    session = await client.initialize()
    stream = await client.request("GET", headers={"mcp-session-id": session, "mcp-protocol-version": "2025-11-25",
                                                  "accept": "text/event-stream"})  # fmt: skip
    assert (stream.status, stream.headers["content-type"]) == (200, "text/event-stream")
    await stream.close()
    # a 2025 session named under a modern header is the session's business (400, as before), not a 405
    odd = await client.request("GET", headers={"mcp-session-id": session, "mcp-protocol-version": MODERN,
                                               "accept": "text/event-stream"})  # fmt: skip
    assert odd.status == 400 and (await odd.json())["error"]["code"] == -32602
    no_session = await client.request("GET", headers={"accept": "text/event-stream"})
    refused = await no_session.json()
    assert no_session.status == 400 and "Mcp-Session-Id header is required" in refused["error"]["message"]
    deleted = await client.request("DELETE", headers={"mcp-session-id": session})
    assert deleted.status == 200
    gone = await client.request("DELETE", headers={"mcp-session-id": session})
    assert gone.status == 404


# --- shutdown --------------------------------------------------------------------------------------------------------


async def test_modern_requests_during_shutdown_are_503_with_an_error_echoing_the_id() -> None:
    app = HttpApp(header_deck())
    client = AsgiClient(app)
    session = await client.initialize()
    app.begin_shutdown()
    for request_id, message in [(1, modern(1, "tools/list")), ("c", call("c", {"region": "a"})),
                                (3, modern(3, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))]:  # fmt: skip
        status, body, response = await post(client, message, {"mcp-param-region": "a"})
        assert (status, body["id"], body["error"]["code"]) == (503, request_id, -32000), body
        assert body["error"]["message"] == "Service Unavailable: the server is shutting down"
        assert "mcp-session-id" not in response.headers
    # as a 2025 initialize is refused, and a 2025 session's requests in flight are still served (the drain)
    init = await client.post({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}, version=None)  # fmt: skip
    assert init.status == 503 and (await init.json())["error"]["code"] == -32000
    listed = await client.call(session, 5, "tools/list", accept="application/json")
    assert listed.status == 200 and len((await listed.json())["result"]["tools"]) == 2


# --- over a real socket ----------------------------------------------------------------------------------------------


def exchange(port: int, checker: WireChecker, method: str, message: Any,
             headers: list[tuple[str, bytes]]) -> tuple[int, dict[str, str], Any]:  # fmt: skip
    """One request with headers spelled exactly as given (names in any case, values as raw bytes)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=SOON)
    try:
        connection.putrequest(method, "/mcp", skip_accept_encoding=True)
        body = b""
        if message is not None:
            checker.sent(message)
            body = orjson.dumps(message)
            connection.putheader("Content-Type", "application/json")
        connection.putheader("Accept", "application/json, text/event-stream")
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        found = orjson.loads(data) if data else None
        if found is not None:
            checker.received(found)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, found
    finally:
        connection.close()


def test_over_real_http_header_names_in_any_case_and_values_with_whitespace() -> None:
    checker = WireChecker(name="raw http")
    with serving(header_deck()) as port:
        message = call(1, {"region": "eu-west", "count": 3})
        spelled = [("MCP-PROTOCOL-VERSION", MODERN.encode()), ("mcp-method", b"tools/call"),
                   ("Mcp-Name", b"  deploy  "), ("MCP-PARAM-REGION", b" \teu-west\t "), ("mcp-param-COUNT", b"3.0")]  # fmt: skip
        status, _, body = exchange(port, checker, "POST", message, spelled)
        assert status == 200 and orjson.loads(body["result"]["structuredContent"]["result"])["region"] == "eu-west"

        status, _, body = exchange(port, checker, "POST", {**message, "id": 2}, spelled[:3] + spelled[4:])
        assert (status, body["id"], body["error"]["code"]) == (400, 2, -32020)
        assert "Mcp-Param-Region header is required" in body["error"]["message"]

        latin = [*spelled[:3], ("Mcp-Param-Region", "Zürich".encode("latin-1")), spelled[4]]
        status, _, body = exchange(port, checker, "POST", call(3, {"region": "Zürich", "count": 3}), latin)
        assert (status, body["error"]["code"]) == (400, -32020) and "characters" in body["error"]["message"]
        encoded = [*spelled[:3], ("Mcp-Param-Region", b64("Zürich").encode()), spelled[4]]
        status, _, body = exchange(port, checker, "POST", call(4, {"region": "Zürich", "count": 3}), encoded)
        assert status == 200, body

        for method in ("GET", "DELETE"):
            status, headers, body = exchange(port, checker, method, None, [("Mcp-Protocol-Version", MODERN.encode())])
            assert (status, headers["allow"], body["error"]["code"]) == (405, "POST", -32600)
            mcp_schema.check(MODERN, "JSONRPCErrorResponse", body)


# --- the README's example --------------------------------------------------------------------------------------------


def readme_example() -> str:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme.split("\n## Two protocol eras", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "x-mcp-header" in b]
    return block


def test_the_readme_example_declares_a_mirrored_parameter_and_is_checked_over_http() -> None:
    source = readme_example()
    assert source.rstrip().endswith('deck.run(transport="http")')
    namespace: dict[str, Any] = {}
    exec(compile(source.rstrip().removesuffix('deck.run(transport="http")'), "README.md", "exec"), namespace)
    deck = namespace["deck"]
    (tool,) = deck.tools
    assert [(p.header, p.path) for p in tool.mirrored] == [("Mcp-Param-Region", ("region",))]
    checker = WireChecker(name="readme example")
    with serving(deck) as port:
        message = call(1, {"region": "eu-west", "token": "s3cret"}, name=tool.name)
        headers = [(k, v.encode()) for k, v in mirrored(message).items()]
        status, _, body = exchange(port, checker, "POST", message, [*headers, ("Mcp-Param-Region", b"eu-west")])
        assert status == 200 and body["result"]["content"][0]["text"] == "deployed to eu-west"
        status, _, body = exchange(port, checker, "POST", {**message, "id": 2}, headers)
        assert (status, body["error"]["code"]) == (400, -32020)
