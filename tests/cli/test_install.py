"""``tooldeck install``: run as a real command with HOME (and XDG_CONFIG_HOME) in a temporary directory, for every
host; merging, backups, refusals, dry runs, and the written command started as a host would start it."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK, checked_replies, handshake
from tooldeck.cli.hosts import HOSTS, config_path

DECK = '''
import os
from tooldeck import Deck

deck = Deck("greeter", version="1.0.0")

@deck.tool
def greet(name: str) -> str:
    """Greet someone with $GREETING (hello by default).

    Args:
        name: who to greet.
    """
    return f"{os.environ.get('GREETING', 'hello')}, {name}"
'''

# Where each host's file lands on Linux, relative to HOME (XDG_CONFIG_HOME is HOME/xdg in these tests).
LINUX = {
    "claude-desktop": ("xdg/Claude/claude_desktop_config.json", "mcpServers", False),
    "claude-code": (".claude.json", "mcpServers", True),
    "cursor": (".cursor/mcp.json", "mcpServers", False),
    "vscode": ("xdg/Code/User/mcp.json", "servers", True),
    "gemini-cli": (".gemini/settings.json", "mcpServers", False),
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def deck_file(tmp_path: Path) -> Path:
    path = tmp_path / "project" / "greeter.py"
    path.parent.mkdir()
    path.write_text(DECK)
    return path


def install(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("APPDATA", "XDG_CONFIG_HOME")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg"))
    return subprocess.run(
        [*TOOLDECK, "install", *args], capture_output=True, text=True, cwd=cwd or home, env=env, timeout=60
    )


def expected_entry(deck_file: Path, typed: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if typed else {}
    entry["command"] = sys.executable
    entry["args"] = ["-m", "tooldeck", "serve", str(deck_file)]
    if env:
        entry["env"] = env
    return entry


def test_every_host_of_the_table_is_tested() -> None:
    assert set(LINUX) == set(HOSTS)


@pytest.mark.parametrize("host", sorted(LINUX))
def test_a_new_config_for_each_host(host: str, home: Path, deck_file: Path) -> None:
    relative, key, typed = LINUX[host]
    # A relative target, from the deck's directory: the entry holds the absolute path.
    done = install(home, host, "greeter.py", "--env", "GREETING=hi", cwd=deck_file.parent)
    path = home / relative
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"added server 'greeter' to {path}; restart {HOSTS[host].title} to load it\n"
    assert orjson.loads(path.read_bytes()) == {key: {"greeter": expected_entry(deck_file, typed, {"GREETING": "hi"})}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # env values may be secrets
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no backup of nothing, no temporary file


@pytest.mark.parametrize("host", sorted(LINUX))
def test_merging_keeps_every_other_server_and_key(host: str, home: Path, deck_file: Path) -> None:
    relative, key, typed = LINUX[host]
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    other = {"command": "npx", "args": ["-y", "other-server"], "env": {"TOKEN": "x"}}
    # Other keys of every kind, a number too big for 64 bits and an escaped character: all must come back.
    text = (
        f'{{"theme": "dark", "projects": {{"/p": {{"mcpServers": {{"local": {{}}}}}}}}, "{key}": {{"other": '
        f'{orjson.dumps(other).decode()}}}, "big": 123456789012345678901234567890, "unicode": "\\u03a9mega"}}'
    )
    original = json.loads(text)
    path.write_text(text)
    path.chmod(0o644)
    done = install(home, host, str(deck_file))
    backup = path.with_name(path.name + ".bak")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        f"added server 'greeter' to {path} (the previous file is kept as {backup}); "
        f"restart {HOSTS[host].title} to load it\n"
    )
    written = json.loads(path.read_text())
    assert written == {**original, key: {"other": other, "greeter": expected_entry(deck_file, typed)}}
    assert list(written) == list(original)  # the keys stay in their order
    assert backup.read_text() == text  # the file as it was, byte for byte
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the file's own permissions are kept


def test_an_entry_of_the_same_name_is_replaced_and_said_so(home: Path, deck_file: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    old = {"mcpServers": {"greeter": {"command": "old"}, "other": {"command": "keep"}}}
    path.write_bytes(orjson.dumps(old))
    done = install(home, "cursor", str(deck_file), "--env", "A=1", "--env", "B=x=y")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"replaced the existing server 'greeter' in {path} (the previous file is kept")
    assert orjson.loads(path.read_bytes()) == {
        "mcpServers": {
            "greeter": expected_entry(deck_file, False, {"A": "1", "B": "x=y"}),
            "other": {"command": "keep"},
        }
    }
    assert orjson.loads(path.with_name("mcp.json.bak").read_bytes()) == old


def test_name_option_and_a_deck_in_a_module(home: Path) -> None:
    done = install(home, "gemini-cli", "tooldeck.demo", "--name", "demo")
    path = home / ".gemini" / "settings.json"
    assert done.returncode == 0, done.stderr
    assert orjson.loads(path.read_bytes())["mcpServers"]["demo"]["args"] == ["-m", "tooldeck", "serve", "tooldeck.demo"]


def test_a_symlinked_config_is_updated_where_it_lives(home: Path, deck_file: Path) -> None:
    real = home / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"numStartups": 3}')
    (home / ".claude.json").symlink_to(real)
    assert install(home, "claude-code", str(deck_file)).returncode == 0
    assert (home / ".claude.json").is_symlink()
    assert orjson.loads(real.read_bytes())["mcpServers"]["greeter"]["type"] == "stdio"
    assert orjson.loads(real.read_bytes())["numStartups"] == 3


@pytest.mark.parametrize(
    ("host", "content", "message"),
    [
        ("vscode", '{"servers": {"a": 1},\n  oops}', "{path}:2:3: not valid JSON with comments: Expecting property name "
         "enclosed in double quotes; mend the file or move it away, then run install again (nothing was written)"),
        ("vscode", '{\n  /* never closed\n  "servers": {}\n}', "{path}:2:3: not valid JSON with comments: "
         "Unterminated comment (comments are not read: remove them); mend the file or move it away, then run "
         "install again (nothing was written)"),
        ("cursor", '{"mcpServers": {"a": 1},\n  oops}', "{path}:2:3: not valid JSON: Expecting property name "
         "enclosed in double quotes; mend the file or move it away, then run install again (nothing was written)"),
        ("cursor", '{\n  // my servers\n  "mcpServers": {}\n}', "{path}:2:3: not valid JSON: Expecting property name "
         "enclosed in double quotes (comments are not read: remove them); mend the file or move it away, then run "
         "install again (nothing was written)"),  # a plain JSON host: comments are not its format
        ("vscode", "[1, 2]", "{path}: expected a JSON object at the top, found an array; nothing was written"),
        ("vscode", '{"servers": ["a"]}', '{path}: "servers" is an array, expected an object of servers by name; '
         "nothing was written"),
    ],
)  # fmt: skip
def test_a_config_that_cannot_be_merged_is_refused_and_left_alone(
    host: str, content: str, message: str, home: Path, deck_file: Path
) -> None:
    path = home / LINUX[host][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    for extra in ((), ("--dry-run",)):
        done = install(home, host, str(deck_file), *extra)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"tooldeck: {message.format(path=path)}\n"
        assert path.read_text() == content
        assert [p.name for p in path.parent.iterdir()] == [path.name]  # no backup, no temporary file


# VS Code's mcp.json as VS Code writes it (tabs, "inputs"), with what its users add: comments, trailing commas.
VSCODE_MCP_JSON = """\
{
\t// Servers for this machine; see https://code.visualstudio.com/docs/copilot/chat/mcp-servers
\t"servers": {
\t\t"other": {
\t\t\t"type": "stdio", /* started by VS Code */
\t\t\t"command": "npx",
\t\t\t"args": ["-y", "other-server",], // pinned below
\t\t},
\t},
\t"inputs": [],
}
"""


def test_vscode_json_with_comments_is_merged_keeping_them(home: Path, deck_file: Path) -> None:
    path = home / LINUX["vscode"][0]
    path.parent.mkdir(parents=True)
    path.write_text(VSCODE_MCP_JSON)
    done = install(home, "vscode", str(deck_file), "--env", "GREETING=hi")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    entry = "\n\t\t".join(json.dumps(expected_entry(deck_file, True, {"GREETING": "hi"}), indent="\t").splitlines())
    assert path.read_text() == VSCODE_MCP_JSON.replace(
        "\t\t},\n\t},", f'\t\t}},\n\t\t"greeter": {entry},\n\t}},'
    )  # the new entry after the last one, as the file writes them (tabs, a trailing comma); nothing else changed
    assert path.with_name("mcp.json.bak").read_text() == VSCODE_MCP_JSON

    done = install(home, "vscode", str(deck_file), "--name", "greeter")  # replaced where it stands
    assert done.returncode == 0, done.stderr
    entry = "\n\t\t".join(json.dumps(expected_entry(deck_file, True), indent="\t").splitlines())
    assert path.read_text() == VSCODE_MCP_JSON.replace("\t\t},\n\t},", f'\t\t}},\n\t\t"greeter": {entry},\n\t}},')


@pytest.mark.parametrize(
    "content",
    [
        "{\n  // nothing here yet\n}\n",
        '{\n  "inputs": [] // none\n}\n',
        '{\r\n  "servers": {\r\n    "other": {"command": "x"} // keep\r\n  }\r\n}\r\n',
        '{"servers": {}, /* one line */}',
    ],
)
def test_vscode_files_of_other_shapes(content: str, home: Path, deck_file: Path) -> None:
    from tooldeck.cli.jsonc import loads

    path = home / LINUX["vscode"][0]
    path.parent.mkdir(parents=True)
    path.write_bytes(content.encode())
    done = install(home, "vscode", str(deck_file))
    assert done.returncode == 0, done.stderr
    written = path.read_bytes().decode()
    assert loads(written) == {**loads(content), "servers": {**loads(content).get("servers", {}),
                                                             "greeter": expected_entry(deck_file, True)}}  # fmt: skip
    for comment in re.findall(r"//[^\r\n]*|/\*.*?\*/", content):
        assert comment in written
    if "\r\n" in content:  # Windows line ends stay Windows line ends
        assert "\n" not in written.replace("\r\n", "")


def test_an_empty_config_file_is_treated_as_empty(home: Path, deck_file: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text("\n")
    assert install(home, "cursor", str(deck_file)).returncode == 0
    assert list(orjson.loads(path.read_bytes())["mcpServers"]) == ["greeter"]


def test_dry_run_prints_the_file_and_the_entry_and_writes_nothing(home: Path, deck_file: Path) -> None:
    done = install(home, "claude-desktop", str(deck_file), "--dry-run", "--env", "GREETING=hey")
    path = home / "xdg" / "Claude" / "claude_desktop_config.json"
    assert (done.returncode, done.stderr) == (0, "")
    first, rest = done.stdout.split("\n", 1)
    assert first == f"would add server 'greeter' to {path} (Claude Desktop); nothing written:"
    assert orjson.loads(rest) == {"mcpServers": {"greeter": expected_entry(deck_file, False, {"GREETING": "hey"})}}
    assert list(home.iterdir()) == []  # not even the directory
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"mcpServers": {"greeter": {"command": "old"}}}')
    done = install(home, "claude-desktop", str(deck_file), "--dry-run")
    assert done.stdout.startswith(f"would replace the existing server 'greeter' in {path} (Claude Desktop)")
    assert path.read_text() == '{"mcpServers": {"greeter": {"command": "old"}}}'
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_install_json_prints_the_standard_entry(home: Path, deck_file: Path) -> None:
    done = install(home, "json", str(deck_file), "--name", "hi", "--env", "GREETING=hi")
    assert (done.returncode, done.stderr) == (0, "")
    assert orjson.loads(done.stdout) == {"mcpServers": {"hi": expected_entry(deck_file, False, {"GREETING": "hi"})}}
    assert list(home.iterdir()) == []


def test_the_demo_deck_when_no_target_is_given(home: Path) -> None:
    done = install(home, "json")
    assert orjson.loads(done.stdout)["mcpServers"]["tooldeck-demo"]["args"][-1] == "tooldeck.demo"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["cursor", "x.py", "--env", "NOEQUALS"],
         "argument --env: expected KEY=VALUE, like --env API_KEY=secret, got 'NOEQUALS'"),
        (["cursor", "x.py", "--env", "=v"], "argument --env: expected KEY=VALUE, like --env API_KEY=secret, got '=v'"),
        (["claude", "x.py"], "argument HOST: invalid choice: 'claude'"),
    ],
)  # fmt: skip
def test_bad_usage(args: list[str], error: str, home: Path) -> None:
    done = install(home, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"tooldeck install: error: {error}" in done.stderr
    assert list(home.iterdir()) == []


def test_a_target_that_does_not_load_writes_nothing(home: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("from tooldeck import Deck\ndeck = Deck('b')\n1 / 0\n")
    done = install(home, "cursor", str(broken))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tooldeck: {broken}:3: ZeroDivisionError: division by zero\n"
    assert list(home.iterdir()) == []


def test_a_module_found_only_in_the_current_directory_gets_a_note(home: Path, deck_file: Path) -> None:
    done = install(home, "json", "greeter", cwd=deck_file.parent)
    assert done.returncode == 0
    assert done.stderr == (
        "tooldeck: note: greeter is imported from the current directory, which the host will not start in; give "
        f"the file's path instead, or add --env PYTHONPATH={deck_file.parent}\n"
    )


def test_the_written_command_starts_the_server_as_a_host_would(home: Path, deck_file: Path, tmp_path: Path) -> None:
    """The entry, run from another directory with its env: initialize, then a call that sees the env value."""
    assert install(home, "claude-code", str(deck_file), "--env", "GREETING=ahoy").returncode == 0
    entry = orjson.loads((home / ".claude.json").read_bytes())["mcpServers"]["greeter"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sent = [*handshake(), {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "greet", "arguments": {"name": "Ada"}}}]  # fmt: skip
    done = subprocess.run(
        [entry["command"], *entry["args"]],
        input=b"".join(orjson.dumps(m) + b"\n" for m in sent),
        capture_output=True,
        cwd=elsewhere,
        env={**os.environ, **entry["env"]},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    init, call = checked_replies(done.stdout.splitlines(), sent)
    assert init["result"]["serverInfo"]["name"] == "greeter"
    assert call["result"]["content"] == [{"type": "text", "text": "ahoy, Ada"}]


@pytest.mark.parametrize(
    ("platform", "environ", "claude", "vscode"),
    [
        ("darwin", {}, "Library/Application Support/Claude/claude_desktop_config.json",
         "Library/Application Support/Code/User/mcp.json"),
        ("linux", {}, ".config/Claude/claude_desktop_config.json", ".config/Code/User/mcp.json"),
        ("linux", {"XDG_CONFIG_HOME": "/xdg"}, "/xdg/Claude/claude_desktop_config.json", "/xdg/Code/User/mcp.json"),
        ("win32", {"APPDATA": "/appdata"}, "/appdata/Claude/claude_desktop_config.json",
         "/appdata/Code/User/mcp.json"),
        ("win32", {}, "AppData/Roaming/Claude/claude_desktop_config.json", "AppData/Roaming/Code/User/mcp.json"),
    ],
)  # fmt: skip
def test_the_config_file_of_each_platform(platform: str, environ: dict[str, str], claude: str, vscode: str) -> None:
    home = Path("/home/me")
    assert config_path(HOSTS["claude-desktop"], platform, environ, home) == home / claude
    assert config_path(HOSTS["vscode"], platform, environ, home) == home / vscode
    for host, relative in (("claude-code", ".claude.json"), ("cursor", ".cursor/mcp.json"),
                           ("gemini-cli", ".gemini/settings.json")):  # fmt: skip
        assert config_path(HOSTS[host], platform, environ, home) == home / relative


# --- the README's "Connect a host" section, run as written ----------------------------------------------------------

README = (Path(ROOT) / "README.md").read_text()
SECTION = README.split("\n## Connect a host\n", 1)[1].split("\n## ", 1)[0]
INSPECTOR = ["npx", "@modelcontextprotocol/inspector"]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """The README's opening deck, saved as app.py the way the section says."""
    (tmp_path / "weather").mkdir()
    path = tmp_path / "weather" / "app.py"
    path.write_text(re.findall(r"```python\n(.*?)```", README, re.S)[0])
    return path


def section_commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", SECTION, re.S)
    return [shlex.split(line) for block in blocks for line in block.splitlines() if line.strip()]


def inspector_target(words: list[str], cwd: Path) -> tuple[list[str], dict[str, str], str | None]:
    """The stdio command an Inspector command line starts, its environment, and the --method it sends."""
    options = words[len(INSPECTOR) :]
    method = options[options.index("--method") + 1] if "--method" in options else None
    if "--config" in options:
        servers = orjson.loads((cwd / options[options.index("--config") + 1]).read_bytes())["mcpServers"]
        entry = servers[options[options.index("--server") + 1]]
        return [entry["command"], *entry["args"]], entry.get("env", {}), method
    options = [word for word in options if word != "--cli"]
    target = list(itertools.takewhile(lambda word: not word.startswith("-"), options))
    assert target[0] == ".venv/bin/tooldeck"  # the venv's own command, run here from the test's venv
    return [str(Path(sys.executable).parent / "tooldeck"), *target[1:]], {}, method


def test_the_readme_commands_run_as_written(app: Path, home: Path) -> None:
    commands = section_commands()
    assert [words[:2] for words in commands] == [
        ["tooldeck", "install"], ["tooldeck", "install"], ["tooldeck", "install"],
        INSPECTOR, INSPECTOR, ["tooldeck", "install"], INSPECTOR, ["tooldeck", "inspect"],
    ]  # fmt: skip
    cwd = app.parent
    for words in commands:
        if words[0] == "tooldeck":
            redirect = words[words.index(">") + 1] if ">" in words else None
            words = words[: words.index(">")] if redirect else words
            done = install(home, *words[2:], cwd=cwd) if words[1] == "install" else None
            if done is None:
                done = subprocess.run([*TOOLDECK, *words[1:]], capture_output=True, text=True, cwd=cwd, timeout=60)
            assert done.returncode == 0, (words, done.stderr)
            if redirect:
                (cwd / redirect).write_text(done.stdout)
            continue
        command, env, method = inspector_target(words, cwd)
        sent: list[Any] = [*handshake()]
        if method is not None:
            sent.append({"jsonrpc": "2.0", "id": 2, "method": method})
        done_bytes = subprocess.run(
            command,
            input=b"".join(orjson.dumps(m) + b"\n" for m in sent),
            capture_output=True,
            cwd=cwd,
            env={**os.environ, **env},
            timeout=60,
        )
        replies = checked_replies(done_bytes.stdout.splitlines(), sent)
        assert replies[0]["result"]["serverInfo"]["name"] == "weather", done_bytes.stderr
        if method == "tools/list":
            assert [tool["name"] for tool in replies[1]["result"]["tools"]] == ["forecast"]
    desktop = orjson.loads((home / "xdg" / "Claude" / "claude_desktop_config.json").read_bytes())
    assert desktop["mcpServers"]["weather"]["args"] == ["-m", "tooldeck", "serve", str(app)]
    cursor = orjson.loads((home / ".cursor" / "mcp.json").read_bytes())
    assert cursor["mcpServers"]["weather-dev"]["env"] == {"API_KEY": "secret"}
    assert not (home / "xdg" / "Code").exists()  # the vscode line is a dry run


def test_the_readme_json_is_what_install_json_prints(app: Path, home: Path) -> None:
    (shown,) = re.findall(r"```json\n(.*?)```", SECTION, re.S)
    shown_entry = orjson.loads(shown)["mcpServers"]["weather"]
    real = orjson.loads(install(home, "json", "app.py", cwd=app.parent).stdout)
    real_entry = real["mcpServers"]["weather"]
    assert list(real) == ["mcpServers"] and list(real["mcpServers"]) == ["weather"]
    assert list(shown_entry) == list(real_entry) == ["command", "args"]
    assert shown_entry["command"].endswith("/.venv/bin/python") and real_entry["command"] == sys.executable
    assert shown_entry["args"][:-1] == real_entry["args"][:-1] == ["-m", "tooldeck", "serve"]
    assert shown_entry["args"][-1].endswith("/weather/app.py") and real_entry["args"][-1] == str(app)


def test_the_readme_table_names_every_host_and_its_format() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*) \| (.*) \|$", SECTION, re.M)
    assert [row[0] for row in rows] == list(HOSTS)
    for name, files, servers in rows:
        host = HOSTS[name]
        assert servers == f"`{host.key}`" + (', with `"type": "stdio"`' if host.typed else "")
        linux = config_path(host, "linux", {}, Path("~"))
        assert linux.name in files
