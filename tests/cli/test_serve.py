"""``tooldeck serve``'s start-up banner: a short block on stderr (never stdout), over stdio and HTTP; ``--quiet``."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from http_client import HttpClient, free_port, wait_for_port
from http_client import initialize_message as http_initialize
from stdio_client import ROOT, TOOLDECK, StdioServer, checked_replies, handshake
from tooldeck.cli import _plain_serve
from tooldeck.transports.http.server import endpoint_url

DECK = """\
from tooldeck import Deck

deck = Deck("banner-deck", version="2.3.4")


@deck.tool
def add(a: int, b: int) -> int:
    return a + b


@deck.tool
def ping() -> str:
    return "pong"


deck.add_resource("config://app", "{}")


@deck.resource_template("users://{name}")
def user(name: str) -> str:
    return name


@deck.prompt
def greet(name: str) -> str:
    return f"Hello {name}"
"""
INSPECTOR = "npx @modelcontextprotocol/inspector"
COUNTS = "2 tools, 1 resource, 1 resource template, 1 prompt"


@pytest.fixture
def deck(tmp_path: Path) -> Path:
    path = tmp_path / "banner_deck.py"
    path.write_text(DECK)
    return path


def serve(*args: str, input: bytes = b"", cwd: str = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*TOOLDECK, "serve", *args], input=input, capture_output=True, cwd=cwd, timeout=60)


def test_stdio_banner_is_on_stderr_and_stdout_carries_only_the_protocol(deck: Path) -> None:
    sent = [*handshake(), {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    done = serve(str(deck), input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    replies = checked_replies(lines, sent)
    assert [reply["id"] for reply in replies] == ["init", 2]  # the first line on stdout is initialize's reply
    assert replies[0]["result"]["serverInfo"]["name"] == "banner-deck"
    command = f"{sys.executable} -m tooldeck serve {deck}"
    assert done.stderr.decode() == (
        "tooldeck: banner-deck 2.3.4 on stdio\n"
        f"  {COUNTS}\n"
        "  tasks: memory\n"
        f"  host: tooldeck install claude-desktop {deck}\n"
        f"  inspector: {INSPECTOR} -- {command}\n"
    )


def test_the_inspector_command_on_the_banner_runs_the_same_server(tmp_path: Path) -> None:
    # The hint is what a person pastes: the command after the Inspector's name must serve the deck from anywhere,
    # even from a folder whose name a shell would split.
    (tmp_path / "my decks").mkdir()
    deck = tmp_path / "my decks" / "deck.py"
    deck.write_text(DECK)
    done = serve(str(deck), "--task-store", "memory")
    assert f"'{deck}'" in done.stderr.decode()
    hint = done.stderr.decode().splitlines()[-1]
    command = shlex.split(hint.removeprefix(f"  inspector: {INSPECTOR} -- "))
    sent = handshake()
    elsewhere = subprocess.run(command, input=b"".join(orjson.dumps(m) + b"\n" for m in sent), capture_output=True,
                               cwd=tmp_path.parent, timeout=60)  # fmt: skip
    assert elsewhere.returncode == 0, elsewhere.stderr
    (reply,) = checked_replies(elsewhere.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "banner-deck", "version": "2.3.4"}


@pytest.mark.parametrize("extra", [(), ("--max-message-bytes", "1000"), ("--task-store", "memory")])
def test_quiet_prints_nothing(deck: Path, extra: tuple[str, ...]) -> None:
    sent = handshake()
    done = serve(str(deck), "--quiet", *extra, input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    assert done.returncode == 0
    assert done.stderr == b""
    assert [r["id"] for r in checked_replies(done.stdout.splitlines(), sent)] == ["init"]


@pytest.mark.parametrize(
    ("argv", "quiet", "target"),
    [
        (["serve"], False, None),
        (["serve", "app.py"], False, "app.py"),
        (["serve", "app.py", "--quiet"], True, "app.py"),
        (["serve", "--quiet"], True, None),
        (["serve", "app.py", "--quiet", "--max-message-bytes", "10"], True, "app.py"),
    ],
)
def test_plain_serve_with_quiet_skips_argparse(argv: list[str], quiet: bool, target: str | None) -> None:
    args = _plain_serve(argv)
    assert args is not None
    assert (args.quiet, args.target) == (quiet, target)


def test_plain_serve_leaves_the_rest_to_argparse() -> None:
    assert _plain_serve(["serve", "app.py", "--quiet", "--quiet"]) is None
    assert _plain_serve(["serve", "--quiet", "app.py"]) is None
    assert _plain_serve(["serve", "app.py", "--http"]) is None


def test_http_banner_names_the_real_port_of_port_0(deck: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    with StdioServer("serve", str(deck), "--http", "--port", "0", env={"XDG_STATE_HOME": str(state)}) as server:
        text = server.wait_for_stderr("/mcp\n")  # the banner's last line, the Inspector's
        url = re.search(r"on (http://127\.0\.0\.1:(\d+)/mcp) \(Streamable HTTP\)", text)
        assert url is not None, text
        assert int(url.group(2)) != 0
        with HttpClient(url.group(1)) as http:
            session = http.initialize()
            reply = http.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=session).json()
            assert [tool["name"] for tool in reply["result"]["tools"]] == ["add", "ping"]
        server.proc.send_signal(signal.SIGTERM)
        assert server.wait() == 0
        store = state / "tooldeck" / "banner-deck-tasks.sqlite3"
        # The whole of stderr at the default log level: the banner, and no line of uvicorn's.
        assert server.stderr_so_far() == (
            f"tooldeck: banner-deck 2.3.4 on {url.group(1)} (Streamable HTTP)\n"
            f"  {COUNTS}\n"
            f"  tasks: SQLite {store} · auth: off\n"
            f"  inspector: {INSPECTOR} --transport http --server-url {url.group(1)}\n"
        )


def test_http_quiet_prints_nothing(deck: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([*TOOLDECK, "serve", str(deck), "--http", "--port", str(port), "--quiet",
                             "--task-store", "memory"], stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    try:
        wait_for_port(port, proc)
        with HttpClient(f"http://127.0.0.1:{port}/mcp") as http:
            http.initialize()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert stderr == b""


POLICY = """\
[authentication]
required = true

[[authentication.tokens]]
subject = "ci-bot"
sha256 = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

[audit]
file = "{audit}"
"""


def test_a_policy_with_an_audit_file_shows_where_it_goes(deck: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(audit=tmp_path / "audit.jsonl"))
    done = serve(str(deck), "--policy", str(policy), input=orjson.dumps(handshake()[0]) + b"\n")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    assert lines[2] == f"  tasks: memory · policy: {policy} · audit: {tmp_path / 'audit.jsonl'}"
    assert lines[4].endswith(f"serve {deck} --policy {policy}")  # the Inspector runs it under the same policy

    with StdioServer("serve", str(deck), "--http", "--port", "0", "--policy", str(policy), "--task-store",
                     "memory") as server:  # fmt: skip
        text = server.wait_for_stderr("/mcp\n")
    assert f"  tasks: memory · policy: {policy} · audit: {tmp_path / 'audit.jsonl'} · auth: required\n" in text


def test_audit_to_stderr_and_a_relative_audit_file(deck: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[audit]\nfile = "-"\n')
    done = serve(str(deck), "--policy", str(policy))
    assert done.stderr.decode().splitlines()[2].endswith("· audit: stderr")
    policy.write_text('[audit]\nfile = "logs.jsonl"\n')
    done = serve(str(deck), "--policy", "policy.toml", cwd=str(tmp_path))  # the file is opened from the cwd
    assert done.stderr.decode().splitlines()[2] == (
        f"  tasks: memory · policy: {policy} · audit: {tmp_path / 'logs.jsonl'}"
    )


def test_the_policy_files_paths_are_relative_to_it_wherever_the_server_starts(deck: Path, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "trail").mkdir(parents=True)
    (conf / "policy.toml").write_text('[audit]\nfile = "trail/audit.jsonl"\n')
    (tmp_path / "elsewhere").mkdir()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    sent = [*handshake(), call]
    done = serve(str(deck), "--policy", "../conf/policy.toml",
                 input=b"".join(orjson.dumps(m) + b"\n" for m in sent), cwd=str(tmp_path / "elsewhere"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert checked_replies(done.stdout.splitlines(), sent)[1]["result"]["structuredContent"] == {"result": 3}
    assert done.stderr.decode().splitlines()[2].endswith(f"· audit: {conf / 'trail' / 'audit.jsonl'}")
    (record,) = [orjson.loads(line) for line in (conf / "trail" / "audit.jsonl").read_bytes().splitlines()]
    assert record["tool"] == "add"
    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing written where the server was started


def test_an_audit_file_that_cannot_be_opened_is_one_line(deck: Path, tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text('[audit]\nfile = "missing/audit.jsonl"\n')
    done = serve(str(deck), "--policy", str(tmp_path / "policy.toml"))
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"tooldeck: {tmp_path / 'policy.toml'}: audit.file: {tmp_path / 'missing' / 'audit.jsonl'}: cannot be opened "
        "(No such file or directory)\n"
    )


JWT_POLICY = """\
[authentication.jwt]
issuer = "https://auth.example.com"
audience = "{audience}"
jwks = "keys/jwks.json"
"""


@pytest.mark.parametrize("http", [(), ("--http", "--port", "0")], ids=["stdio", "http"])
def test_a_missing_jwks_file_stops_the_start_with_one_line(deck: Path, tmp_path: Path, http: tuple[str, ...]) -> None:
    (tmp_path / "policy.toml").write_text(JWT_POLICY.format(audience="https://mcp.example.com/mcp"))
    done = serve(str(deck), "--policy", str(tmp_path / "policy.toml"), *http)
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"tooldeck: {tmp_path / 'policy.toml'}:4: authentication.jwt.jwks: JWKS {tmp_path / 'keys' / 'jwks.json'}: "
        "cannot be read (No such file or directory)\n"
    )


def test_an_audience_that_is_not_a_uri_is_one_line(deck: Path, tmp_path: Path, signer_jwks: Path) -> None:
    (tmp_path / "policy.toml").write_text(JWT_POLICY.format(audience="mcp-server"))
    done = serve(str(deck), "--policy", str(tmp_path / "policy.toml"), "--http", "--port", "0")
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == (
        f"tooldeck: {tmp_path / 'policy.toml'}: [authentication]: resource 'mcp-server' is not an absolute http(s) "
        "URI\n"
    )


@pytest.fixture
def signer_jwks(tmp_path: Path) -> Path:
    import json

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec

    public = jwt.algorithms.ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key(), as_dict=True)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "k1"}]}))
    return tmp_path / "keys" / "jwks.json"


@pytest.mark.parametrize(
    ("host", "url", "bound"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000/mcp", None),
        ("localhost", "http://localhost:8000/mcp", None),
        ("0.0.0.0", "http://127.0.0.1:8000/mcp", "0.0.0.0"),
        ("::", "http://[::1]:8000/mcp", "::"),
        ("::1", "http://[::1]:8000/mcp", None),
    ],
)
def test_endpoint_url(host: str, url: str, bound: str | None) -> None:
    assert endpoint_url(host, 8000) == (url, bound)


def readme_section() -> str:
    readme = (Path(ROOT) / "README.md").read_text()
    return readme.split("## Developing a deck: the banner and tooldeck dev\n", 1)[1].split("\n## ", 1)[0]


def readme_deck(tmp_path: Path) -> Path:
    """The README's opening example, saved as app.py in a folder of its own (the section's example deck)."""
    (example,) = re.findall(r"```python\n(.*?)```", (Path(ROOT) / "README.md").read_text(), re.S)[:1]
    folder = tmp_path / "weather"
    folder.mkdir()
    (folder / "app.py").write_text(example)
    return folder


def test_readme_banner_is_what_serve_prints(tmp_path: Path) -> None:
    folder = readme_deck(tmp_path)
    (shown,) = re.findall(r"```text\n(.*?)```", readme_section(), re.S)
    done = serve("app.py", cwd=str(folder))
    assert done.returncode == 0, done.stderr
    printed = done.stderr.decode().replace(sys.executable, "/home/me/.venv/bin/python")
    assert printed.replace(str(folder), "/home/me/weather") == shown


def test_readme_quiet_example(tmp_path: Path) -> None:
    folder = readme_deck(tmp_path)
    (line,) = [line for line in readme_section().splitlines() if line.startswith("tooldeck serve")]
    command = shlex.split(line.split("#")[0])
    assert command == ["tooldeck", "serve", "app.py", "--quiet"]
    sent = handshake()
    done = serve(*command[2:], input=b"".join(orjson.dumps(m) + b"\n" for m in sent), cwd=str(folder))
    assert (done.returncode, done.stderr) == (0, b"")
    assert [r["id"] for r in checked_replies(done.stdout.splitlines(), sent)] == ["init"]


def test_the_host_hint_is_a_command_that_works(deck: Path, tmp_path: Path) -> None:
    hint = serve(str(deck)).stderr.decode().splitlines()[3]
    command = shlex.split(hint.removeprefix("  host: "))
    assert command[:3] == ["tooldeck", "install", "claude-desktop"]
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    done = subprocess.run([*TOOLDECK, *command[1:], "--dry-run"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "banner-deck" in done.stdout and str(deck) in done.stdout


@pytest.mark.parametrize(("env", "bold"), [({}, True), ({"NO_COLOR": "1"}, False)])
def test_the_title_is_bold_only_on_a_terminal_without_no_color(deck: Path, env: dict[str, str], bold: bool) -> None:
    import pty

    primary, secondary = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")} | {"TERM": "xterm", **env}
    try:
        done = subprocess.run([*TOOLDECK, "serve", str(deck)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=secondary, cwd=ROOT, env=environ, timeout=60)  # fmt: skip
        assert done.returncode == 0
        os.close(secondary)
        secondary = -1
        text = b""
        while True:  # the child has exited: read the terminal until it is drained
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: no writer left
                break
            if not chunk:
                break
            text += chunk
    finally:
        os.close(primary)
        if secondary != -1:
            os.close(secondary)
    first = text.decode().splitlines()[0]
    assert first.startswith("\x1b[1mtooldeck: banner-deck 2.3.4 on stdio") is bold
    assert ("\x1b[" in text.decode()) is bold


@pytest.mark.parametrize("extra", [(), ("--http", "--port", "0")])
def test_a_short_state_key_in_the_environment_is_refused_at_start(deck: Path, extra: tuple[str, ...]) -> None:
    env = {**os.environ, "TOOLDECK_STATE_KEY": "too-short"}
    done = subprocess.run([*TOOLDECK, "serve", str(deck), *extra], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=60, input="")  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("tooldeck: $TOOLDECK_STATE_KEY must be at least 32 characters") and "got 9" in line


# --- naming a deck of tool definitions ------------------------------------------------------------------------------


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "defs"
    folder.mkdir()
    (folder / "greeting_impl.py").write_text("def hello(who: str) -> str:\n    return f'hello {who}'\n")
    definition = {"id": "greeting", "name": "Greeting", "version": "1.2.3", "description": "Says hello",
                  "capabilities": [{"name": "hello", "description": "Greets", "handler": "greeting_impl:hello",
                                    "parameters": [{"name": "who", "type": "string", "required": True}],
                                    "return": {"schema": {"type": "string"}}}]}  # fmt: skip
    (folder / "greeting.json").write_bytes(orjson.dumps(definition))
    return folder


@pytest.mark.parametrize("watch", [(), ("--watch",)], ids=["plain", "watch"])
def test_a_directory_served_under_the_name_and_version_given(definitions: Path, watch: tuple[str, ...]) -> None:
    sent = handshake()
    done = serve(str(definitions), *watch, "--name", "maths", "--deck-version", "2.1.0",
                 input=b"".join(orjson.dumps(m) + b"\n" for m in sent))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (reply,) = checked_replies(done.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "maths", "version": "2.1.0"}
    banner = done.stderr.decode().split("tooldeck: maths 2.1.0 on stdio\n", 1)[1].splitlines()  # after --watch's log
    assert banner[-1].endswith(f"serve {definitions} --name maths --deck-version 2.1.0")  # the Inspector's command


def test_without_the_options_a_directory_is_named_after_itself(definitions: Path) -> None:
    sent = handshake()
    done = serve(str(definitions), "--name", "maths", input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    (reply,) = checked_replies(done.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "maths", "version": "0.1.0"}
    done = serve(str(definitions), input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    (reply,) = checked_replies(done.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "defs", "version": "0.1.0"}
    one_file = str(definitions / "greeting.json")
    done = serve(one_file, input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    (reply,) = checked_replies(done.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "greeting", "version": "1.2.3", "description": "Says hello"}
    done = serve(one_file, "--deck-version", "9.9.9", input=b"".join(orjson.dumps(m) + b"\n" for m in sent))
    (reply,) = checked_replies(done.stdout.splitlines(), sent)
    assert reply["result"]["serverInfo"] == {"name": "greeting", "version": "9.9.9", "description": "Says hello"}


def test_the_name_and_version_over_http(definitions: Path) -> None:
    with StdioServer("serve", str(definitions), "--http", "--port", "0", "--task-store", "memory", "--name",
                     "maths", "--deck-version", "2.1.0") as server:  # fmt: skip
        text = server.wait_for_stderr("/mcp\n")
        found = re.match(r"tooldeck: maths 2\.1\.0 on (http://127\.0\.0\.1:\d+/mcp) ", text)
        assert found is not None, text
        with HttpClient(found.group(1)) as http:
            init = http.post(http_initialize(), version=None)
    assert init.json()["result"]["serverInfo"] == {"name": "maths", "version": "2.1.0"}


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("tooldeck.demo", "--name", "x"), "tooldeck: tooldeck.demo: --name names a deck served from tool definitions"),
        (
            ("--deck-version", "2", "--name", "x"),
            "tooldeck: tooldeck.demo: --name and --deck-version name a deck served from tool definitions",
        ),
    ],
)
def test_a_python_deck_names_itself(args: tuple[str, ...], line: str) -> None:
    done = serve(*args)
    assert done.returncode == 2
    assert done.stderr.decode().startswith(line)
    assert done.stderr.decode().rstrip().endswith('a Python deck is named in its code: Deck("name", version="1.0.0")')
    assert len(done.stderr.splitlines()) == 1


def test_a_blank_name_is_refused(definitions: Path) -> None:
    done = serve(str(definitions), "--name", " ")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1].endswith("argument --name: must not be blank, got ' '")
