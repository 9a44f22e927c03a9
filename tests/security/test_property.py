"""Property tests of access control at every entry point: for random principals and random sequences of operations —
lists, plain and task-augmented calls, tasks/*, resource reads and subscriptions, prompt gets, completions, a tool
definition upgraded between calls or while one runs — user code runs, and an item is listed, only if the policy
allows that principal (decided here from levels, scopes and roles, not by AccessControl); a hidden item answers as
an unknown one; another principal's task (the same subject authenticated another way is another principal) is "not
found", exactly as an unknown id is; and fuzzed messages never crash a guarded server."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import client
from server.test_session_properties import json_values  # the fuzzer's JSON, shared with the session's properties
from tooldeck import Deck
from tooldeck.protocol.codec import decode
from tooldeck.protocol.errors import ParseError
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal

SCOPES = ("files:read", "files:write", "admin")
ROLES = {"reader": ["files:read"], "operator": ["files:write", "admin"]}  # "ghost" is a role no policy defines
NOT_FOUND = {"code": -32602, "message": "Failed to retrieve task: Task not found"}

# name -> (level, scopes, task support); every body appends its name to the deck's ``ran`` list.
TOOLS: dict[str, tuple[int, tuple[str, ...], str]] = {
    "open": (0, (), "forbidden"),
    "signed_in": (2, (), "forbidden"),
    "reader": (5, ("files:read",), "forbidden"),
    "critical": (9, ("admin",), "forbidden"),
    "open_task": (0, (), "optional"),
    "writer_task": (5, ("files:write",), "optional"),
    "signed_in_task": (3, (), "required"),
    "critical_task": (9, ("files:read",), "optional"),
}
RESOURCES: dict[str, tuple[int, tuple[str, ...]]] = {  # URI -> (level, scopes); "static" ones have no function
    "notes://public": (0, ()),
    "notes://team": (4, ("files:read",)),
    "notes://static": (2, ()),
}
TEMPLATE = ("vault://{n}/item", 7, ("admin",))
PROMPTS: dict[str, tuple[int, tuple[str, ...]]] = {"brief": (3, ()), "audit_prompt": (6, ("files:write",))}

DEFINITION_ID = "defn"
DEFINITION_TOOL = "defn.run"
# The definition's versions, each a legal bump from the one before (a higher level or a new scope is major; a lower
# level, or a scope fewer, is minor).
VERSIONS: list[tuple[str, int, tuple[str, ...]]] = [
    ("1.0.0", 1, ()),
    ("2.0.0", 6, ("files:write",)),
    ("2.1.0", 2, ()),
    ("3.0.0", 9, ("admin",)),
]


def definition(index: int) -> dict[str, Any]:
    version, level, scopes = VERSIONS[index]
    document: dict[str, Any] = {
        "id": DEFINITION_ID,
        "name": "Definition",
        "version": version,
        "description": "A tool from a definition",
        "capabilities": [{"name": "run", "description": "Runs", "parameters": [{"name": "x", "type": "number"}]}],
        "securityLevel": level,
        "task": "optional",
    }
    if scopes:
        document["scopes"] = list(scopes)
    return document


class Guarded:
    """The deck under test, what ran in it, and the gate a definition call can be held at (to upgrade mid-call)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.version = 0  # index into VERSIONS of the served definition
        deck = self.deck = Deck("guarded")
        deck.apply_policy(Policy({"roles": ROLES}))
        for name, (level, scopes, task) in TOOLS.items():
            options: dict[str, Any] = {"name": name, "security_level": level, "task": task}
            if scopes:
                options["scopes"] = list(scopes)
            deck.add_tool(self._tool_body(name), **options)
        for uri, (level, scopes) in RESOURCES.items():
            if uri == "notes://static":
                deck.add_resource(uri, "static text", security_level=level)
            else:
                deck.resource(uri, security_level=level, scopes=list(scopes) or None)(self._body(uri))
        template, level, scopes = TEMPLATE

        def vault(n: int) -> str:
            self.ran.append(f"vault://{n}/item")
            return f"item {n}"

        deck.resource_template(
            template, security_level=level, scopes=list(scopes), complete={"n": self._completer("n")}
        )(vault)
        for name, (level, scopes) in PROMPTS.items():
            deck.add_prompt(self._topic_body(name), name=name, security_level=level, scopes=list(scopes) or None,
                            complete={"topic": self._completer(name)})  # fmt: skip

        async def run(x: float = 0) -> dict[str, Any]:
            self.ran.append(DEFINITION_TOOL)
            self.entered.set()
            await self.release.wait()
            return {"x": x}

        deck.implements(DEFINITION_TOOL)(run)
        deck.manager.register(definition(0))

    def _tool_body(self, name: str) -> Any:
        # async, so it runs on the loop in one step: a task cancelled before it starts never runs it
        async def body() -> str:
            self.ran.append(name)
            return f"{name} ran"

        return body

    def _body(self, name: str) -> Any:
        def body() -> str:
            self.ran.append(name)
            return f"{name} ran"

        return body

    def _topic_body(self, name: str) -> Any:
        def body(topic: str = "") -> str:
            self.ran.append(name)
            return f"{name} ran"

        return body

    def _completer(self, name: str) -> Any:
        def complete(value: str, context: dict[str, str]) -> list[str]:
            self.ran.append(f"complete:{name}")
            return ["one", "two"]

        return complete

    def upgrade(self) -> bool:
        if self.version + 1 >= len(VERSIONS):
            return False
        self.version += 1
        self.deck.manager.register(definition(self.version))
        return True


def granted(principal: Principal | None) -> set[str]:
    if principal is None:
        return set()
    scopes = set(principal.scopes)
    for role in principal.roles:
        scopes.update(ROLES.get(role, ()))
    return scopes


def usable(principal: Principal | None, level: int, scopes: tuple[str, ...]) -> bool:
    """What lists show: level 0, or an authenticated principal holding every scope (levels 8-10's verification is
    per call)."""
    return level == 0 or (principal is not None and set(scopes) <= granted(principal))


def allowed(principal: Principal | None, level: int, scopes: tuple[str, ...], elicitation: str) -> bool:
    """Whether a call runs: usable, and for levels 8-10 the user confirmed it (no recent-authentication window)."""
    return usable(principal, level, scopes) and (level < 8 or elicitation == "accept")


def owner(principal: Principal | None) -> str | None:
    """Who a task belongs to: the full identity, how the principal authenticated as well as its subject."""
    if principal is None:
        return None
    return (principal.method, principal.issuer, principal.subject)  # type: ignore[return-value]


def answer_elicitation(mode: str) -> Any:
    def answer(params: dict[str, Any]) -> dict[str, Any]:
        if mode == "decline":
            return {"action": "decline"}
        code = re.search(r"enter the code (\d{6})", params["message"])
        assert code is not None, params["message"]
        return {"action": "accept", "content": {"code": code.group(1)}}

    return answer


principals = st.none() | st.builds(
    lambda subject, how, scopes, roles: Principal(subject, scopes=scopes, roles=roles, method=how[0], issuer=how[1]),
    st.sampled_from(["alice", "bob"]),
    st.sampled_from([("token", None), ("jwt", "https://auth.example.com"), ("jwt", "https://other.example.com")]),
    st.frozensets(st.sampled_from(SCOPES)),
    st.frozensets(st.sampled_from([*ROLES, "ghost"])),
)
who = st.integers(0, 1)
operations = st.one_of(
    st.tuples(st.just("list"), who, st.sampled_from(["tools", "resources", "templates", "prompts"])),
    st.tuples(st.just("call"), who, st.sampled_from([*TOOLS, DEFINITION_TOOL])),
    st.tuples(st.just("task"), who, st.sampled_from([*TOOLS, DEFINITION_TOOL]), who, st.booleans()),
    st.tuples(st.just("read"), who, st.sampled_from([*RESOURCES, "vault://7/item"])),
    st.tuples(st.just("prompt"), who, st.sampled_from(list(PROMPTS))),
    st.tuples(st.just("complete"), who, st.sampled_from([*PROMPTS, TEMPLATE[0]])),
    st.tuples(st.just("subscribe"), who, st.sampled_from([*RESOURCES, "vault://7/item"])),
    st.tuples(st.just("upgrade"), who),
    st.tuples(st.just("upgrade_mid_call"), who),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.tuples(principals, principals),
    st.sampled_from(["none", "decline", "accept"]),
    st.lists(operations, min_size=1, max_size=10),
)
def test_user_code_runs_and_items_are_listed_only_when_the_policy_allows(
    pair: tuple[Principal | None, Principal | None], elicitation: str, ops: list[tuple[Any, ...]]
) -> None:
    asyncio.run(run_operations(pair, elicitation, ops))


async def run_operations(
    pair: tuple[Principal | None, Principal | None], elicitation: str, ops: list[tuple[Any, ...]]
) -> None:
    guarded = Guarded()
    capabilities = {} if elicitation == "none" else {"elicitation": {}}
    async with client(guarded.deck, capabilities=capabilities) as c:
        if elicitation != "none":
            c.on_request("elicitation/create", answer_elicitation(elicitation))
        for op in ops:
            principal = pair[op[1]]
            c.session.principal = principal
            guarded.ran.clear()  # what each operation ran is checked on its own (bodies run on the loop, at once)
            kind = op[0]
            if kind == "list":
                await check_list(c, guarded, principal, op[2])
            elif kind == "call":
                await check_call(c, guarded, principal, elicitation, op[2])
            elif kind == "task":
                await check_task(c, guarded, pair, op, elicitation)
            elif kind == "read":
                await check_read(c, guarded, principal, op[2])
            elif kind == "prompt":
                await check_prompt(c, guarded, principal, op[2])
            elif kind == "complete":
                await check_complete(c, guarded, principal, op[2])
            elif kind == "subscribe":
                await check_subscribe(c, guarded, principal, op[2])
            elif kind == "upgrade":
                guarded.upgrade()
            else:
                await check_upgrade_mid_call(c, guarded, principal, elicitation)
            if kind in ("list", "upgrade"):
                assert guarded.ran == []
        assert (await c.request("ping")) == {}


def tool_rule(guarded: Guarded, name: str) -> tuple[int, tuple[str, ...], str]:
    if name == DEFINITION_TOOL:
        _, level, scopes = VERSIONS[guarded.version]
        return level, scopes, "optional"
    return TOOLS[name]


async def check_list(c: Any, guarded: Guarded, principal: Principal | None, what: str) -> None:
    rules: dict[str, tuple[int, tuple[str, ...]]]
    if what == "tools":
        shown = {tool["name"] for tool in await c.list_tools()}
        rules = {name: tool_rule(guarded, name)[:2] for name in [*TOOLS, DEFINITION_TOOL]}
    elif what == "resources":
        shown = {r["uri"] for r in (await c.request("resources/list", {}))["resources"]}
        rules = RESOURCES
    elif what == "templates":
        shown = {t["uriTemplate"] for t in (await c.request("resources/templates/list", {}))["resourceTemplates"]}
        rules = {TEMPLATE[0]: (TEMPLATE[1], TEMPLATE[2])}
    else:
        shown = {p["name"] for p in (await c.request("prompts/list", {}))["prompts"]}
        rules = PROMPTS
    assert shown == {name for name, (level, scopes) in rules.items() if usable(principal, level, scopes)}


async def check_call(c: Any, guarded: Guarded, principal: Principal | None, elicitation: str, name: str) -> None:
    level, scopes, task = tool_rule(guarded, name)
    reply = await c.request_raw("tools/call", {"name": name, "arguments": {}})
    if task == "required":
        assert reply["error"]["code"] == -32601, reply
        assert guarded.ran == []
    elif allowed(principal, level, scopes, elicitation):
        assert reply["result"]["isError"] is False, reply
        assert guarded.ran == [name]
    else:
        refused_or_not_run(reply, level, elicitation)
        assert guarded.ran == []


def refused_or_not_run(reply: dict[str, Any], level: int, elicitation: str) -> None:
    """A refusal: a JSON-RPC error, except a declined confirmation (levels 8-10), an isError result ("not run")."""
    if "result" in reply:
        assert level >= 8 and elicitation == "decline", reply
        assert reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"].endswith("was not run: the user did not confirm it (decline)")
    else:
        assert reply["error"]["code"] == -32000, reply


async def task_ids(c: Any) -> set[str]:
    return {task["taskId"] for task in (await c.request("tasks/list", {}))["tasks"]}


async def check_task(
    c: Any, guarded: Guarded, pair: tuple[Principal | None, Principal | None], op: tuple[Any, ...], elicitation: str
) -> None:
    _, creator, name, querier, cancels = op
    level, scopes, task = tool_rule(guarded, name)
    principal = pair[creator]
    known = await task_ids(c)
    reply = await c.request_raw("tools/call", {"name": name, "arguments": {}, "task": {}})
    if task == "forbidden":
        assert reply["error"]["code"] == -32601, reply
        assert guarded.ran == []
        return
    if not allowed(principal, level, scopes, elicitation):
        assert reply["error"]["code"] == -32000, reply  # refused before a task exists, even a declined confirmation
        assert guarded.ran == []
        assert await task_ids(c) == known
        return
    task_id = reply["result"]["task"]["taskId"]
    unknown = await c.request_raw("tasks/get", {"taskId": "no-such-task"})
    assert unknown["error"] == NOT_FOUND
    other = pair[querier]
    c.session.principal = other
    visible = owner(other) == owner(principal)
    cancelled = False
    for method in ("tasks/get", *(["tasks/cancel"] if cancels else [])):
        answer = await c.request_raw(method, {"taskId": task_id})
        if not visible:
            assert answer["error"] == unknown["error"], (method, answer)  # just as an id that never existed
        elif method == "tasks/get":
            assert answer["result"]["taskId"] == task_id
        elif "result" in answer:
            assert answer["result"]["status"] == "cancelled"
            cancelled = True
        else:
            assert answer["error"]["message"] == "Cannot cancel task: it is already completed", answer
    assert (task_id in await task_ids(c)) == visible
    if not visible:
        assert (await c.request_raw("tasks/result", {"taskId": task_id}))["error"] == unknown["error"]
    c.session.principal = principal
    result = await c.request("tasks/result", {"taskId": task_id})
    if cancelled:
        assert result["isError"] is True, result
        assert guarded.ran in ([], [name])
    else:
        assert result["isError"] is False, result
        assert guarded.ran == [name]


async def check_read(c: Any, guarded: Guarded, principal: Principal | None, uri: str) -> None:
    level, scopes = RESOURCES.get(uri) or (TEMPLATE[1], TEMPLATE[2])
    reply = await c.request_raw("resources/read", {"uri": uri})
    if usable(principal, level, scopes):
        assert reply["result"]["contents"][0]["uri"] == uri
        assert guarded.ran == ([] if uri == "notes://static" else [uri])
    else:
        assert reply["error"]["code"] == -32000, reply
        assert guarded.ran == []


async def check_prompt(c: Any, guarded: Guarded, principal: Principal | None, name: str) -> None:
    level, scopes = PROMPTS[name]
    reply = await c.request_raw("prompts/get", {"name": name})
    if usable(principal, level, scopes):
        assert reply["result"]["messages"][0]["content"]["text"] == f"{name} ran"
        assert guarded.ran == [name]
    else:
        assert reply["error"]["code"] == -32000, reply
        assert guarded.ran == []


async def check_complete(c: Any, guarded: Guarded, principal: Principal | None, target: str) -> None:
    """A completer runs only for a caller who may use what it completes; to anyone else the item is unknown."""
    if target in PROMPTS:
        level, scopes = PROMPTS[target]
        params = {"ref": {"type": "ref/prompt", "name": target}, "argument": {"name": "topic", "value": ""}}
        unknown = f"Unknown prompt: {target}"
    else:
        level, scopes = TEMPLATE[1], TEMPLATE[2]
        params = {"ref": {"type": "ref/resource", "uri": target}, "argument": {"name": "n", "value": ""}}
        unknown = f"Unknown resource template: {target}"
    reply = await c.request_raw("completion/complete", params)
    if usable(principal, level, scopes):
        assert reply["result"]["completion"]["values"] == ["one", "two"], reply
        assert guarded.ran == [f"complete:{'n' if target == TEMPLATE[0] else target}"]
    else:
        assert reply["error"] == {"code": -32602, "message": unknown}, reply
        assert guarded.ran == []


async def check_subscribe(c: Any, guarded: Guarded, principal: Principal | None, uri: str) -> None:
    level, scopes = RESOURCES.get(uri) or (TEMPLATE[1], TEMPLATE[2])
    reply = await c.request_raw("resources/subscribe", {"uri": uri})
    if usable(principal, level, scopes):
        assert reply["result"] == {}, reply
    else:
        assert reply["error"] == {"code": -32002, "message": f"Resource not found: {uri}", "data": {"uri": uri}}, reply
    assert guarded.ran == []


async def check_upgrade_mid_call(c: Any, guarded: Guarded, principal: Principal | None, elicitation: str) -> None:
    """A call that got in (its body is running) finishes on its version while the definition is upgraded under it.
    A call that arrived just before the upgrade but was not yet looked up (tools/call is looked up when its work
    starts) is judged by one version or the other: it runs only if the version it met allows it."""
    old_level, old_scopes, _ = tool_rule(guarded, DEFINITION_TOOL)
    runs = allowed(principal, old_level, old_scopes, elicitation)
    guarded.entered.clear()
    guarded.release.clear()
    reply = asyncio.ensure_future(c.request_raw("tools/call", {"name": DEFINITION_TOOL, "arguments": {"x": 1}}))
    if runs:
        async with asyncio.timeout(5):
            await guarded.entered.wait()  # in flight on the old version
    upgraded = guarded.upgrade()
    new_level, new_scopes, _ = tool_rule(guarded, DEFINITION_TOOL)
    guarded.release.set()
    answer = await reply
    if guarded.ran:
        assert guarded.ran == [DEFINITION_TOOL]
        assert runs or allowed(principal, new_level, new_scopes, elicitation)
        assert answer["result"]["isError"] is False, answer
        assert answer["result"]["content"] == [{"type": "text", "text": '{"x":1}'}]
    else:
        assert not runs
        refused_or_not_run(answer, max(old_level, new_level), elicitation)
    if upgraded:
        guarded.ran.clear()
        await check_call(c, guarded, principal, elicitation, DEFINITION_TOOL)


# --- fuzzed messages --------------------------------------------------------------------------------------------

fuzz_methods = st.sampled_from(
    [
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "prompts/list",
        "prompts/get",
        "tasks/get",
        "tasks/result",
        "tasks/cancel",
        "tasks/list",
        "completion/complete",
        "logging/setLevel",
        "initialize",
        "notifications/cancelled",
        "nope",
        "",
    ]
)
names = st.sampled_from([*TOOLS, DEFINITION_TOOL, *PROMPTS, "nope"])
uris = st.sampled_from([*RESOURCES, "vault://1/item", "vault://x/item", "nope://"])
plausible = st.fixed_dictionaries(  # what a client would send, mostly: user code runs (or is refused)
    {"name": names, "uri": uris},
    optional={"arguments": st.just({}) | st.fixed_dictionaries({"x": json_values}), "task": st.just({})},
)
fuzz_params = (
    st.none()
    | json_values
    | plausible
    | st.fixed_dictionaries(
        {},
        optional={
            "name": names | json_values,
            "uri": uris | json_values,
            "arguments": st.dictionaries(st.sampled_from(["x", "n", "code"]), json_values, max_size=2) | json_values,
            "task": st.just({}) | json_values,
            "taskId": st.text(max_size=8) | json_values,
            "cursor": json_values,
            "_meta": st.fixed_dictionaries({}, optional={"progressToken": json_values}) | json_values,
            "requestId": json_values,
        },
    )
)


@st.composite
def fuzzed(draw: Any) -> tuple[str, Any]:
    """("request", (method, params)) with a well-formed envelope, ("notification", message), ("message", any JSON
    value with no "method": junk, a response to nothing) or ("bytes", raw bytes, often not JSON at all)."""
    kind = draw(st.sampled_from(["call", "request", "request", "notification", "message", "bytes"]))
    if kind == "call":  # an entry point that runs user code, called much as a client would
        return "request", (draw(st.sampled_from(["tools/call", "resources/read", "prompts/get"])), draw(plausible))
    if kind == "request":
        return kind, (draw(fuzz_methods), draw(fuzz_params))
    if kind == "notification":
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(fuzz_methods)}
        params = draw(fuzz_params)
        if params is not None:
            message["params"] = params
        return kind, message
    if kind == "message":
        return kind, draw(json_values.filter(lambda value: not (isinstance(value, dict) and "method" in value)))
    return kind, draw(st.binary(max_size=40) | json_values.map(lambda value: orjson.dumps(value)[:-1]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    principals | st.just(Principal("root", roles={"reader", "operator"})),
    st.booleans(),
    st.lists(fuzzed(), max_size=10),
)
def test_fuzzed_messages_never_crash_a_guarded_server(
    principal: Principal | None, elicits: bool, batch: list[tuple[str, Any]]
) -> None:
    asyncio.run(send_fuzz(principal, elicits, batch))


async def send_fuzz(principal: Principal | None, elicits: bool, batch: list[tuple[str, Any]]) -> None:
    loop_errors: list[Any] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
    guarded = Guarded()
    async with client(guarded.deck, capabilities={"elicitation": {}} if elicits else {}) as c:
        c.session.principal = principal
        if elicits:
            c.on_request("elicitation/create", answer_elicitation("decline"))
        pending = []
        parse_errors = 0
        for index, (kind, value) in enumerate(batch):
            if kind == "request":
                method, params = value
                pending.append(asyncio.ensure_future(c.request_raw(method, params, id=f"fuzz-request-{index}")))
            elif kind == "bytes":
                try:
                    message = decode(value)
                except ParseError as exc:  # as the stdio transport does with a line that is not JSON
                    parse_errors += 1
                    c.session.receive_error(exc, exc.request_id)
                else:
                    c.send(message)
            else:
                c.send(value)
        async with asyncio.timeout(10):
            responses = await asyncio.gather(*pending)  # every request: one answer, to its id
            assert (await c.request_raw("ping", id="final"))["result"] == {}
        for response in responses:
            assert ("result" in response) != ("error" in response), response
        ours = {f"fuzz-request-{index}" for index in range(len(batch))} | {"final"}
        assert not [r for r in c.unrouted if isinstance(r, dict) and r.get("id") in ours]  # none answered twice
        assert sum(1 for r in c.unrouted if r.get("error", {}).get("code") == -32700) == parse_errors
        # Level 8-10 tools refuse or are declined; nothing but what the principal may use ran.
        for name in guarded.ran:
            level, scopes = (TOOLS.get(name) or PROMPTS.get(name) or RESOURCES.get(name) or (1, ()))[:2]
            if name == DEFINITION_TOOL:
                level, scopes = VERSIONS[0][1:]
            elif name.startswith("vault://"):
                level, scopes = TEMPLATE[1], TEMPLATE[2]
            assert allowed(principal, level, scopes, "decline"), (name, principal)
    assert loop_errors == []
