"""Every channel under the same access control: completion/complete and resources/subscribe are admitted as the
item they complete or watch would be, a hidden name answers exactly as an unknown one, resource updates reach only
sessions that may read the resource, identities are full (method, issuer, subject) wherever something is bound to
one, and anonymous callers are rate limited by address — over Streamable HTTP in both eras, with real API keys and
JWTs (every body is checked against its revision's schema by tests/asgi_client.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import orjson
import pytest

from asgi_client import AsgiClient
from eras import modern
from helpers import client
from tooldeck import Deck
from tooldeck.security.policy import Policy
from tooldeck.security.principal import Principal
from tooldeck.security.tokens import hash_token
from tooldeck.transports.http.app import HttpApp
from transports.http.test_eras import headers_for

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def policy(tmp_path: Path, jwks: Path | None = None, *, hide: bool = True, limits: str = "") -> Path:
    """API keys ``reader-key`` (subject "reader", scope secrets:read) and ``nobody-key`` (subject "nobody"); with
    ``jwks``, JWTs of ISSUER too."""
    path = tmp_path / "policy.toml"
    jwt_table = f'[authentication.jwt]\nissuer = "{ISSUER}"\naudience = "{RESOURCE}"\njwks = "{jwks}"\n' if jwks else ""
    path.write_text(f"""
[[authentication.tokens]]
subject = "reader"
sha256 = "{hash_token("reader-key")}"
scopes = ["secrets:read"]

[[authentication.tokens]]
subject = "nobody"
sha256 = "{hash_token("nobody-key")}"

{jwt_table}
[levels]
hide_unusable = {"true" if hide else "false"}

{limits}
""")
    return path


class Guarded:
    """A deck whose level-5 prompt, template and resource need secrets:read; every completer records that it ran."""

    def __init__(self, policy_path: Path) -> None:
        self.ran: list[str] = []
        deck = self.deck = Deck("channels")

        def topics(value: str, context: dict[str, str]) -> list[str]:
            self.ran.append("topics")
            return [t for t in ("payroll", "passwords") if t.startswith(value)]

        def names(value: str, context: dict[str, str]) -> list[str]:
            self.ran.append("names")
            return [n for n in ("alpha", "beta") if n.startswith(value)]

        @deck.prompt(security_level=5, scopes=["secrets:read"], complete={"topic": topics})
        def secret_prompt(topic: str) -> str:
            return f"about {topic}"

        @deck.resource_template("vault://{name}", security_level=5, scopes=["secrets:read"], complete={"name": names})
        def vault(name: str) -> str:
            return f"secret {name}"

        @deck.resource("vault-index://all", security_level=5, scopes=["secrets:read"])
        def index() -> str:
            return "alpha, beta"

        @deck.prompt(complete={"topic": ["weather"]})
        def open_prompt(topic: str) -> str:
            return topic

        @deck.tool(task="optional", security_level=1)
        async def job(n: int) -> int:
            return n * 2

        deck.apply_policy(policy_path)
        self.app = AsgiClient(HttpApp(deck))


def completion(ref: dict[str, Any], value: str = "p") -> dict[str, Any]:
    return {"ref": ref, "argument": {"name": "topic" if ref["type"] == "ref/prompt" else "name", "value": value}}


PROMPT = {"type": "ref/prompt", "name": "secret_prompt"}
TEMPLATE = {"type": "ref/resource", "uri": "vault://{name}"}


async def complete(guarded: Guarded, era: str, params: dict[str, Any], bearer: str | None) -> tuple[int, Any]:
    """One completion/complete over HTTP in ``era`` ("2025": a session of its own; "2026": a stateless request)."""
    headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
    app = guarded.app
    if era == "2026":
        message = modern(9, "completion/complete", params)
        response = await app.post(message, version=None, accept="application/json",
                                  headers={**headers_for(message), **headers})  # fmt: skip
        return response.status, await response.json()
    session = await open_session(app, headers)
    response = await app.post({"jsonrpc": "2.0", "id": 9, "method": "completion/complete", "params": params},
                              session=session, headers=headers, accept="application/json")  # fmt: skip
    return response.status, await response.json()


async def open_session(app: AsgiClient, headers: dict[str, str]) -> str:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    reply = await app.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, version=None,
                           headers=headers)  # fmt: skip
    assert reply.status == 200, await reply.body()
    await reply.body()
    session = reply.headers["mcp-session-id"]
    done = await app.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session, headers=headers)
    assert done.status == 202
    return str(session)


# --- completion/complete ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize("ref", [PROMPT, TEMPLATE], ids=["prompt", "template"])
async def test_completion_is_authorized_as_the_item_it_completes(tmp_path: Path, era: str, ref: dict[str, Any]) -> None:
    guarded = Guarded(policy(tmp_path, hide=False))  # nothing hidden: the refusals say what would allow the call
    status, reply = await complete(guarded, era, completion(ref), None)
    assert status == 401 and reply["error"]["code"] == -32000, reply
    assert "needs an authenticated caller (security level 5)" in reply["error"]["message"]
    status, reply = await complete(guarded, era, completion(ref), "nobody-key")
    assert status == 403 and "needs the scope secrets:read" in reply["error"]["message"], reply
    assert guarded.ran == []  # no completer ran for a caller the policy denies
    status, reply = await complete(guarded, era, completion(ref), "reader-key")
    assert status == 200, reply
    assert reply["result"]["completion"]["values"] == (["payroll", "passwords"] if ref is PROMPT else [])
    assert guarded.ran == ["topics" if ref is PROMPT else "names"]


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize(
    ("ref", "ghost"),
    [(PROMPT, {"type": "ref/prompt", "name": "ghost_prompt"}),
     (TEMPLATE, {"type": "ref/resource", "uri": "ghost://{name}"})],
    ids=["prompt", "template"],
)  # fmt: skip
async def test_a_hidden_name_completes_exactly_as_an_unknown_one(
    tmp_path: Path, era: str, ref: dict[str, Any], ghost: dict[str, Any]
) -> None:
    guarded = Guarded(policy(tmp_path))  # hide_unusable: the level-5 items are not listed to these callers
    for bearer in (None, "nobody-key"):
        hidden = await complete(guarded, era, completion(ref), bearer)
        unknown = await complete(guarded, era, completion(ghost), bearer)
        name = ref.get("name", ref.get("uri"))
        ghost_name = ghost.get("name", ghost.get("uri"))
        assert hidden[0] == unknown[0]
        assert hidden[1]["error"] == {**unknown[1]["error"],
                                      "message": unknown[1]["error"]["message"].replace(ghost_name, name)}  # fmt: skip
    assert guarded.ran == []


async def test_completion_is_rate_limited_as_a_call(tmp_path: Path) -> None:
    guarded = Guarded(policy(tmp_path, limits='[limits]\nper_principal = "2/minute"\n'))
    for _ in range(2):
        assert (await complete(guarded, "2025", completion(PROMPT), "reader-key"))[0] == 200
    status, reply = await complete(guarded, "2025", completion(PROMPT), "reader-key")
    assert status == 429 and reply["error"]["message"].startswith("Rate limit exceeded (per principal"), reply
    assert guarded.ran == ["topics", "topics"]


async def test_completion_of_an_open_prompt_needs_nothing(tmp_path: Path) -> None:
    guarded = Guarded(policy(tmp_path))
    status, reply = await complete(
        guarded, "2026", completion({"type": "ref/prompt", "name": "open_prompt"}, "w"), None
    )
    assert status == 200 and reply["result"]["completion"]["values"] == ["weather"]


async def test_a_level_9_completion_needs_no_confirmation_but_never_admits_the_call_after_it() -> None:
    # A completion runs no action, so levels 8-10 need their caller and scopes but no confirmation; the call of the
    # same item right after must still be verified (the access control remembers only calls admitted below level 8).
    from tooldeck.protocol.errors import RefusedError
    from tooldeck.security.levels import AccessControl
    from tooldeck.server.pipeline import Call

    deck = Deck("nine")
    deck.add_tool(lambda: "done", name="launch", security_level=9)
    tool = deck.tools.get("launch")
    control = AccessControl(Policy({"levels": {"confirm": False}}))

    class Request:
        principal = Principal("ops")

    assert control(Request(), Call("completion", "prompt:launch", tool, {})) is None
    with pytest.raises(RefusedError, match="needs per-call verification"):
        await control(Request(), Call("tool", "launch", tool, {}))


# --- resources/subscribe ------------------------------------------------------------------------------------------


async def subscribe(app: AsgiClient, session: str, uri: str, headers: dict[str, str]) -> tuple[int, Any]:
    response = await app.post({"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": uri}},
                              session=session, headers=headers, accept="application/json")  # fmt: skip
    return response.status, await response.json()


async def test_subscribing_needs_read_access(tmp_path: Path) -> None:
    guarded = Guarded(policy(tmp_path, hide=False))
    for bearer, status in ((None, 401), ("nobody-key", 403)):
        headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
        session = await open_session(guarded.app, headers)
        for uri in ("vault-index://all", "vault://alpha"):
            got, reply = await subscribe(guarded.app, session, uri, headers)
            assert got == status and reply["error"]["code"] == -32000, reply
    headers = {"authorization": "Bearer reader-key"}
    session = await open_session(guarded.app, headers)
    assert await subscribe(guarded.app, session, "vault-index://all", headers) == (200, {"jsonrpc": "2.0", "id": 5,
                                                                                       "result": {}})  # fmt: skip


async def test_subscribing_to_a_hidden_resource_is_exactly_not_found(tmp_path: Path) -> None:
    guarded = Guarded(policy(tmp_path))
    session = await open_session(guarded.app, {})
    hidden = await subscribe(guarded.app, session, "vault-index://all", {})
    unknown = await subscribe(guarded.app, session, "ghost://none", {})
    assert hidden[0] == unknown[0] == 200
    assert hidden[1]["error"] == {"code": -32002, "message": "Resource not found: vault-index://all",
                                  "data": {"uri": "vault-index://all"}}  # fmt: skip
    assert unknown[1]["error"]["message"] == "Resource not found: ghost://none"


async def test_resource_updates_reach_only_sessions_that_may_read_the_resource() -> None:
    deck = Deck("updates")
    deck.add_resource("docs://root", "the root")
    deck.add_resource("docs://root/public", "public")
    deck.add_resource("docs://root/secret", "secret", security_level=5, scopes=["secrets:read"])
    deck.use_policy(Policy({}))
    async with client(deck) as anonymous, client(deck) as reader:
        anonymous.session.principal = None
        reader.session.principal = Principal("reader", scopes={"secrets:read"})
        for c in (anonymous, reader):
            assert await c.request("resources/subscribe", {"uri": "docs://root"}) == {}
        deck.notify_resource_updated("docs://root/secret")
        deck.notify_resource_updated("docs://root/public")
        seen = await reader.wait_for_notification("notifications/resources/updated")
        assert seen["params"] == {"uri": "docs://root/secret"}
        public = await anonymous.wait_for_notification("notifications/resources/updated")
        assert public["params"] == {"uri": "docs://root/public"}  # the secret's update, sent first, never came


# --- identities ---------------------------------------------------------------------------------------------------


def bearer_jwt(key: Any, sub: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "sub": sub, "exp": now + 600, "iat": now, **claims}
    return jwt.encode(payload, key, algorithm="ES256", headers={"kid": "k1"})


async def test_a_jwt_with_an_api_keys_subject_is_another_principal(tmp_path: Path, signer: tuple[Any, Path]) -> None:
    key, jwks = signer
    guarded = Guarded(policy(tmp_path, jwks))
    app = guarded.app
    owner = {"authorization": "Bearer reader-key"}
    impostor = {"authorization": f"Bearer {bearer_jwt(key, 'reader', scope='secrets:read')}"}
    session = await open_session(app, owner)
    # 2025-11-25: the key holder's session and tasks are not the JWT's
    refused = await app.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, session=session, headers=impostor,
                             accept="application/json")  # fmt: skip
    assert refused.status == 403 and (await refused.json())["error"]["message"] == (
        "Forbidden: this session belongs to another principal"
    )
    created = await app.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                              "params": {"name": "job", "arguments": {"n": 2}, "task": {}}},
                             session=session, headers=owner, accept="application/json")  # fmt: skip
    task_id = (await created.json())["result"]["task"]["taskId"]
    other = await open_session(app, impostor)
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        answer = await app.post({"jsonrpc": "2.0", "id": 4, "method": method, "params": {"taskId": task_id}},
                                session=other, headers=impostor, accept="application/json")  # fmt: skip
        assert (await answer.json())["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    listed = await app.post({"jsonrpc": "2.0", "id": 5, "method": "tasks/list", "params": {}}, session=other,
                            headers=impostor, accept="application/json")  # fmt: skip
    assert (await listed.json())["result"]["tasks"] == []
    mine = await app.post({"jsonrpc": "2.0", "id": 6, "method": "tasks/result", "params": {"taskId": task_id}},
                          session=session, headers=owner, accept="application/json")  # fmt: skip
    assert (await mine.json())["result"]["structuredContent"] == {"result": 4}


async def test_a_jwt_with_an_api_keys_subject_cannot_reach_its_2026_tasks(
    tmp_path: Path, signer: tuple[Any, Path]
) -> None:
    key, jwks = signer
    app = Guarded(policy(tmp_path, jwks)).app
    owner = {"authorization": "Bearer reader-key"}
    impostor = {"authorization": f"Bearer {bearer_jwt(key, 'reader', scope='secrets:read')}"}

    async def post(message: dict[str, Any], headers: dict[str, str]) -> Any:
        mirrored = headers_for(message)
        if "taskId" in message["params"]:
            mirrored["mcp-name"] = message["params"]["taskId"]
        response = await app.post(message, version=None, accept="application/json", headers={**mirrored, **headers})
        return await response.json()

    created = await post(modern(1, "tools/call", {"name": "job", "arguments": {"n": 2}}, capabilities=TASKS), owner)
    task_id = created["result"]["taskId"]
    for method in ("tasks/get", "tasks/cancel"):
        answer = await post(modern(2, method, {"taskId": task_id}, capabilities=TASKS), impostor)
        assert answer["error"]["code"] == -32602, answer
        unknown = await post(modern(3, method, {"taskId": "no-such-task"}, capabilities=TASKS), impostor)
        assert answer["error"] == unknown["error"]  # exactly as an id that never existed
    mine = await post(modern(4, "tasks/get", {"taskId": task_id}, capabilities=TASKS), owner)
    assert mine["result"]["taskId"] == task_id


def test_identities_are_method_issuer_and_subject() -> None:
    assert Principal("ci", method="token").id == "token:ci"
    assert Principal("ci", method="jwt", issuer=ISSUER).id == f"jwt:{ISSUER}#ci"
    assert Principal("ci", method="local").id == "local:ci"
    ids = {Principal("ci", method=m, issuer=i).id for m, i in
           (("token", None), ("jwt", ISSUER), ("jwt", "https://other.example"), ("local", None))}  # fmt: skip
    assert len(ids) == 4


# --- anonymous rate limits ----------------------------------------------------------------------------------------


async def test_anonymous_callers_are_limited_by_address_across_sessions_and_eras(tmp_path: Path) -> None:
    guarded = Guarded(policy(tmp_path, limits='[limits]\nper_principal = "3/minute"\n'))
    app = guarded.app
    open_prompt = completion({"type": "ref/prompt", "name": "open_prompt"}, "w")
    statuses = []
    for _ in range(2):  # a new session is no new caller
        session = await open_session(app, {})
        response = await app.post({"jsonrpc": "2.0", "id": 9, "method": "completion/complete", "params": open_prompt},
                                  session=session, accept="application/json")  # fmt: skip
        statuses.append(response.status)
    for request_id in range(2):  # and a 2026-07-28 request, which has no session at all, takes from the same bucket
        message = modern(request_id, "completion/complete", open_prompt)
        response = await app.post(message, version=None, accept="application/json", headers=headers_for(message))
        statuses.append(response.status)
    assert statuses == [200, 200, 200, 429]
    elsewhere = AsgiClient(app.app, client=("192.0.2.7", 40000))  # another address is another caller
    message = modern(7, "completion/complete", open_prompt)
    response = await elsewhere.post(message, version=None, accept="application/json", headers=headers_for(message))
    assert response.status == 200


async def test_anonymous_2026_callers_with_no_known_address_share_one_bucket_and_are_audited_with_no_session(
    tmp_path: Path,
) -> None:
    path = policy(tmp_path, limits='[limits]\nper_principal = "2/minute"\n')
    path.write_text(path.read_text() + f'\n[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n')
    guarded = Guarded(path)
    unknown = AsgiClient(guarded.app.app, client=None)  # type: ignore[arg-type]  # a Unix socket: no address
    open_prompt = completion({"type": "ref/prompt", "name": "open_prompt"}, "w")
    statuses = []
    for request_id in range(3):  # each request has a peer of its own, and none is a new caller for it
        message = modern(request_id, "completion/complete", open_prompt)
        response = await unknown.post(message, version=None, accept="application/json", headers=headers_for(message))
        statuses.append(response.status)
    assert statuses == [200, 200, 429]
    records = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    calls = [r for r in records if r.get("event") == "call"]
    assert [(r["session"], r["decision"]) for r in calls] == [(None, "allowed"), (None, "allowed"), (None, "refused")]


# --- the audit trail --------------------------------------------------------------------------------------------


async def test_completions_are_audited_allowed_and_refused_with_the_full_identity(
    tmp_path: Path, signer: tuple[Any, Path]
) -> None:
    key, jwks = signer
    path = policy(tmp_path, jwks, hide=False)
    path.write_text(path.read_text() + f'\n[audit]\nfile = "{tmp_path / "audit.jsonl"}"\n')
    guarded = Guarded(path)
    assert (await complete(guarded, "2026", completion(PROMPT), "reader-key"))[0] == 200
    assert (await complete(guarded, "2025", completion(TEMPLATE), "nobody-key"))[0] == 403
    assert (await complete(guarded, "2026", completion(PROMPT), bearer_jwt(key, "reader", scope="secrets:read")))[
        0
    ] == 200
    records = [orjson.loads(line) for line in (tmp_path / "audit.jsonl").read_bytes().splitlines()]
    calls = [r for r in records if r.get("event") == "call"]
    assert [(r["tool"], r["principal"], r["auth"], r.get("issuer"), r["decision"], r["outcome"]) for r in calls] == [
        ("completion:prompt:secret_prompt", "reader", "token", None, "allowed", "ok"),
        ("completion:resource:vault://{name}", "nobody", "token", None, "refused", "refused"),
        ("completion:prompt:secret_prompt", "reader", "jwt", ISSUER, "allowed", "ok"),
    ]
    assert calls[0]["arguments"] == {"topic": "p"} and calls[0]["security_level"] == 5


@pytest.mark.parametrize("era", ["2025", "2026"])
async def test_completion_values_are_sanitised(tmp_path: Path, era: str) -> None:
    deck = Deck("hostile")

    @deck.prompt(
        complete={"topic": lambda value, context: ["\x1b[2J\x1b]8;;https://evil.example\x07click\u202e", "ok"]}
    )
    def pick(topic: str) -> str:
        return topic

    deck.apply_policy(policy(tmp_path))
    guarded = Guarded.__new__(Guarded)
    guarded.app, guarded.ran = AsgiClient(HttpApp(deck)), []
    status, reply = await complete(guarded, era, completion({"type": "ref/prompt", "name": "pick"}, ""), None)
    assert status == 200 and reply["result"]["completion"]["values"] == ["click", "ok"], reply
