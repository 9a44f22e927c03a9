"""The client commands against servers in other processes: a running ``tooldeck serve --http`` (with and without a
token from a policy file), and a server command after ``--`` spoken to over stdio."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from http_client import serve_http
from stdio_client import ROOT, TOOLDECK
from tooldeck.security.tokens import hash_token

DECK = "tests/cli/decks/client_deck.py"
SERVER = ["--", sys.executable, "-m", "tooldeck", "serve", DECK]
GUARDED = "tests/cli/decks/guarded_deck.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def one_line(done: subprocess.CompletedProcess[str], status: int, start: str) -> None:
    assert done.returncode == status, done.stderr
    assert done.stderr.startswith(start), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve_http(DECK, "--task-store", "memory") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    policy = tmp_path_factory.mktemp("policy") / "policy.toml"
    policy.write_text(
        f'[authentication]\nrequired = true\n\n[[authentication.tokens]]\nsubject = "ci"\n'
        f'sha256 = "{hash_token("right-token")}"\n'
    )
    with serve_http(DECK, "--task-store", "memory", "--policy", str(policy)) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The guarded deck over HTTP: the token "plain" has no scopes, "deployer" has deploy:write; anonymous callers
    may list and call what level 0 allows."""
    policy = tmp_path_factory.mktemp("guarded") / "policy.toml"
    policy.write_text(
        f'[[authentication.tokens]]\nsubject = "plain"\nsha256 = "{hash_token("plain")}"\n\n'
        f'[[authentication.tokens]]\nsubject = "deployer"\nsha256 = "{hash_token("deployer")}"\n'
        'scopes = ["deploy:write"]\n'
    )
    with serve_http(GUARDED, "--task-store", "memory", "--policy", str(policy)) as endpoint:
        yield endpoint


# --- a running HTTP server ------------------------------------------------------------------------------------


def test_http_every_command(url: str) -> None:
    tools = orjson.loads(run("tools", "--url", url, "--json").stdout)["tools"]
    assert [t["name"] for t in tools] == ["kinds", "greet", "build", "chatty", "hang", "fail"]  # every page
    assert run("call", "--url", url, "greet", "who=Ada").stdout == "hello Ada\n"
    listing = run("resources", "--url", url).stdout
    assert "config://app  config (application/json)" in listing and "users://{user_id}/profile" in listing
    assert run("read", "--url", url, "users://3/profile").stdout == "profile of 3\n"
    assert run("prompts", "--url", url).stdout.startswith("review(code, language?)")
    assert "Review this go code:\nx" in run("prompt", "--url", url, "review", "code=x", "language=go").stdout


def test_http_key_value_conversion_and_log_lines(url: str) -> None:
    done = run("call", "kinds", "count=3", "ratio=1", "flag=false", "tags=[]", "extra={}", "--url", url)
    assert orjson.loads(done.stdout)["count"] == [3, "int"]
    done = run("call", "--url", url, "chatty")
    assert (done.stdout, done.stderr) == ("done\n", "[warning] store: disk almost full\n")


def test_http_task_required_tool_runs_as_a_task(url: str) -> None:
    done = run("call", "--url", url, "build", "steps=3")
    assert (done.returncode, done.stdout) == (0, "built in 3 steps\n")
    lines = done.stderr.splitlines()
    assert lines[0].startswith("tooldeck: task ") and lines[0].endswith(": working"), done.stderr
    assert lines[-1].endswith(": completed"), done.stderr


def test_http_errors(url: str) -> None:
    one_line(run("call", "--url", url, "fail"), 1, "tooldeck: fail: the flux capacitor is broken")
    one_line(run("call", "--url", url, "nope"), 2, "tooldeck: unknown tool 'nope' (tools: kinds,")
    one_line(run("read", "--url", url, "nothing://here"), 2, "tooldeck: ")
    base = url.rsplit("/", 1)[0]
    one_line(run("tools", "--url", f"{base}/elsewhere"), 2, f"tooldeck: {base}/elsewhere: HTTP 404: no MCP endpoint")


def test_http_server_not_running() -> None:
    from http_client import free_port

    where = f"http://127.0.0.1:{free_port()}/mcp"
    one_line(run("tools", "--url", where), 2, f"tooldeck: cannot connect to {where}: connection refused or unreachable")
    one_line(run("tools", "--url", "ftp://x/mcp"), 2, "tooldeck: ftp://x/mcp: not an http:// or https:// URL")


def test_http_with_a_token(secured: str) -> None:
    done = run("call", "--url", secured, "--token", "right-token", "greet", "who=ci")
    assert (done.returncode, done.stdout) == (0, "hello ci\n"), done.stderr
    done = run("tools", "--url", secured, "--header", "Authorization: Bearer right-token")
    assert done.returncode == 0 and done.stdout.startswith("kinds("), done.stderr


def test_http_a_wrong_token_is_one_line(secured: str) -> None:
    done = run("call", "--url", secured, "--token", "wrong-token", "greet", "who=ci")
    one_line(done, 2, f"tooldeck: {secured}: HTTP 401 Unauthorized: the token was refused: check --token")
    done = run("tools", "--url", secured)
    one_line(done, 2, f"tooldeck: {secured}: HTTP 401 Unauthorized: the server wants credentials: give --token")


# --- refusals: what the server said, not a guess ---------------------------------------------------------------


def test_http_a_missing_confirmation_is_called_one(guarded: str) -> None:
    done = run("call", "--url", guarded, "--token", "deployer", "launch", "target=moon")
    one_line(done, 2, f"tooldeck: {guarded}: HTTP 403 Forbidden: tool 'launch' needs per-call verification ")
    assert done.stderr == (
        f"tooldeck: {guarded}: HTTP 403 Forbidden: tool 'launch' needs per-call verification (security level 9); it "
        "needs a client that supports elicitation (to confirm the call); tooldeck call asks for a confirmation only "
        "when stdin and stderr are terminals: run it there and type the code it shows\n"
    )


def test_http_a_missing_scope_is_named_although_the_tool_is_not_listed(guarded: str) -> None:
    listed = run("tools", "--url", guarded, "--token", "plain")
    assert listed.stdout.splitlines() == ["launch(target: string) -> string", "    Needs the user's confirmation on "
                                          "every call.", "hello() -> string", "    Anyone may call it."]  # fmt: skip
    done = run("call", "--url", guarded, "--token", "plain", "deploy", "service=web")
    one_line(done, 2, f"tooldeck: {guarded}: HTTP 403 Forbidden: ")
    assert done.stderr == (
        f"tooldeck: {guarded}: HTTP 403 Forbidden: the token lacks a scope the call needs (deploy:write); the server "
        "says: tool 'deploy' needs the scope deploy:write (security level 5); ask for a token that grants "
        "deploy:write\n"
    )
    done = run("call", "--url", guarded, "--token", "deployer", "deploy", "service=web")
    assert (done.returncode, done.stdout) == (0, "deployed web\n"), done.stderr


def test_http_credentials_missing_and_unknown_tools(guarded: str) -> None:
    done = run("call", "--url", guarded, "deploy", "service=web")  # anonymous: the tool is hidden, the call 401
    assert done.stderr == (
        f"tooldeck: {guarded}: HTTP 401 Unauthorized: the server wants credentials: give --token TOKEN (or --header "
        "'Authorization: ...'); the server says: tool 'deploy' needs an authenticated caller (security level 5); "
        "send credentials\n"
    )
    assert done.returncode == 2
    one_line(run("call", "--url", guarded, "--token", "plain", "nope"), 2,
             "tooldeck: unknown tool 'nope' (tools: launch, hello)")  # fmt: skip


def test_http_what_the_cli_reads_is_what_the_server_sends(guarded: str) -> None:
    from http_client import HttpClient, initialize_message

    with HttpClient(guarded) as http:
        bearer = {"authorization": "Bearer plain"}
        init = http.post(initialize_message(), version=None, headers=bearer)
        session = init.headers["mcp-session-id"]
        assert http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session,
                         headers=bearer).status_code == 202  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "deploy", "arguments": {}}}
        refused = http.post(call, session=session, headers=bearer)
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"].startswith('Bearer error="insufficient_scope", scope="deploy:write"')
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "launch", "arguments": {}}}
        refused = http.post(call, session=session, headers=bearer)
        assert refused.status_code == 403 and "www-authenticate" not in refused.headers
        assert "needs per-call verification" in refused.json()["error"]["message"]


STDIO_USER = f"{GUARDED}:stdio_user"


@pytest.mark.parametrize(
    ("before", "after"),
    [([STDIO_USER], []), ([], ["--", sys.executable, "-m", "tooldeck", "serve", STDIO_USER])],
    ids=["in process", "stdio"],
)
def test_refusals_in_process_and_over_stdio(before: list[str], after: list[str]) -> None:
    done = run("call", *before, "deploy", "service=web", *after)
    assert (done.returncode, done.stderr) == (
        2,
        "tooldeck: tool 'deploy' needs the scope deploy:write (security level 5); ask for a token that grants "
        "deploy:write\n",
    )
    done = run("call", *before, "launch", "target=moon", *after)
    assert (done.returncode, done.stderr) == (
        2,
        "tooldeck: tool 'launch' needs per-call verification (security level 9); it needs a client that supports "
        "elicitation (to confirm the call); tooldeck call asks for a confirmation only when stdin and stderr are "
        "terminals: run it there and type the code it shows\n",
    )
    one_line(run("call", *before, "nope", *after), 2, "tooldeck: unknown tool 'nope' (tools: launch, hello)")


# --- a server command over stdio ------------------------------------------------------------------------------


def test_stdio_every_command() -> None:
    tools = orjson.loads(run("tools", "--json", *SERVER).stdout)["tools"]
    assert [t["name"] for t in tools] == ["kinds", "greet", "build", "chatty", "hang", "fail"]
    assert run("call", "greet", "who=Ada", *SERVER).stdout == "hello Ada\n"
    assert "data://blob  blob (application/octet-stream)" in run("resources", *SERVER).stdout
    assert run("read", "users://5/profile", *SERVER).stdout == "profile of 5\n"
    assert run("prompts", *SERVER).stdout.startswith("review(code, language?)")
    assert run("prompt", "review", "code=y", *SERVER).stdout.endswith("Review this python code:\ny\n")


def test_stdio_the_demo_deck_and_a_task() -> None:
    done = run("call", "calculate", "expression=6*7", "--", sys.executable, "-m", "tooldeck", "serve")
    assert (done.returncode, done.stdout, done.stderr) == (0, "42.0\n", "")  # the child's stderr is kept quiet
    done = run("call", "build", "steps=2", *SERVER)
    assert (done.returncode, done.stdout) == (0, "built in 2 steps\n"), done.stderr
    assert done.stderr.splitlines()[-1].endswith(": completed")


def test_stdio_errors() -> None:
    one_line(run("call", "fail", *SERVER), 1, "tooldeck: fail: the flux capacitor is broken")
    one_line(run("tools", "--", "no-such-command-xyz"), 2, "tooldeck: cannot run 'no-such-command-xyz': ")
    failing = [sys.executable, "-c", "import sys; print('config missing', file=sys.stderr); sys.exit(3)"]
    done = run("tools", "--", *failing)
    one_line(done, 2, "tooldeck: the server command ")
    assert done.stderr.rstrip().endswith("exited with status 3 before answering: config missing")


def test_stdio_server_that_is_not_mcp(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text("import sys\nfor line in sys.stdin:\n    print('not json')\n")
    done = run("tools", "--", sys.executable, str(script))
    one_line(done, 2, "tooldeck: the server command wrote 'not json' on stdout, which is not an MCP message")
