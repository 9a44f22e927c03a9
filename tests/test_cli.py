"""The ``tooldeck`` command: tools, call, and one clear line for every bad target."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from stdio_client import ROOT, TOOLDECK

NOISY = "tests/transports/decks/noisy.py"


def run(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_tools_lists_signatures() -> None:
    done = run("tools", "tooldeck.demo")
    assert done.returncode == 0, done.stderr
    assert "calculate(expression: string) -> number" in done.stdout
    assert "hash_text(text: string, algorithm: 'md5' | 'sha1' | 'sha256' | 'sha512' | 'blake2b' = \"sha256\")" in (
        done.stdout
    )


def test_tools_json_is_the_wire_listing() -> None:
    done = run("tools", NOISY, "--json")
    assert done.returncode == 0
    assert [t["name"] for t in orjson.loads(done.stdout)["tools"]] == ["shout", "wait", "add"]


def test_call_prints_structured_content() -> None:
    done = run("call", "tooldeck.demo", "convert_units", '{"value": 100, "from_unit": "C", "to_unit": "F"}')
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {
        "value": 100.0,
        "from_unit": "C",
        "to_unit": "F",
        "result": 212.0,
        "quantity": "temperature",
    }


def test_call_tool_error_exits_1_with_the_message() -> None:
    done = run("call", "tooldeck.demo", "calculate", '{"expression": "1/0"}')
    assert done.returncode == 1
    assert "cannot evaluate '1/0'" in done.stderr


def test_call_invalid_arguments_exits_1() -> None:
    done = run("call", "tooldeck.demo", "calculate", '{"expr": "1"}')
    assert done.returncode == 1
    assert "Invalid arguments for tool 'calculate'" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("call", "tooldeck.demo", "nope"), "tooldeck: unknown tool 'nope' (tools: calculate,"),
        (("call", "tooldeck.demo", "calculate", "{bad json"), "tooldeck: arguments are not valid JSON"),
        (("call", "tooldeck.demo", "calculate", "[1]"), "tooldeck: arguments must be a JSON object"),
        (("tools", "missing_file.py"), "tooldeck: missing_file.py: no such file"),
        (("tools", "no_such_module_xyz"), "tooldeck: no_such_module_xyz: no such module"),
        (("tools", "tooldeck.demo:nothing"), "tooldeck: tooldeck.demo: has no attribute 'nothing'"),
        (("tools", "tooldeck.demo:calculate"), "tooldeck: tooldeck.demo:calculate: calling it failed"),
        (("tools", "tooldeck.protocol.errors"), "tooldeck: tooldeck.protocol.errors: no Deck found"),
        (("tools", "deck.yaml"), "tooldeck: deck.yaml: $: no such file"),
        (("serve", "missing_file.py"), "tooldeck: missing_file.py: no such file"),
    ],
)
def test_bad_input_is_one_clear_line(args: tuple[str, ...], message: str) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_broken_target_files_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "syntax.py").write_text("from tooldeck import Deck\ndeck = Deck('x'\n")
    (tmp_path / "raises.py").write_text("x = 1\nraise RuntimeError('config missing')\n")
    (tmp_path / "two.py").write_text("from tooldeck import Deck\na = Deck('a')\nb = Deck('b')\n")
    (tmp_path / "notdeck.py").write_text("deck = 42\n")
    (tmp_path / "bad_tool.py").write_text(
        "from tooldeck import Deck\ndeck = Deck('x')\n@deck.tool(name='bad name')\ndef f() -> None: ...\n"
    )
    expected = {
        "syntax.py": "syntax.py:2: SyntaxError",
        "raises.py": "raises.py:2: RuntimeError: config missing",
        "two.py": "two.py: several Decks (a, b); choose one as",
        "notdeck.py": "notdeck.py: no Deck found",
        "bad_tool.py": "bad_tool.py:3: RegistrationError: invalid tool name 'bad name'",
    }
    for name, message in expected.items():
        done = run("tools", name, cwd=str(tmp_path))
        assert done.returncode == 2, (name, done.stderr)
        assert message in done.stderr, (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    done = run("tools", "two.py:b", cwd=str(tmp_path))
    assert done.returncode == 0


def test_factory_targets(tmp_path: Path) -> None:
    (tmp_path / "factory.py").write_text(
        "from tooldeck import Deck\n"
        "def make():\n"
        "    deck = Deck('made')\n"
        "    deck.add_tool(lambda: 'x', name='made_tool')\n"
        "    return deck\n"
    )
    done = run("tools", "factory.py:make", cwd=str(tmp_path))
    assert done.returncode == 0
    assert done.stdout.startswith("made_tool()")


REGISTERED = "INFO tooldeck.manifest: tool definition calculator: registered"  # the demo deck's one INFO line


@pytest.mark.parametrize(
    "args",
    [
        ("--log-level", "info", "tools"),  # before the command, as always
        ("tools", "--log-level", "info"),
        ("tools", "tooldeck.demo", "--log-level", "info"),  # among the client command's words
        ("call", "calculate", "expression=1+1", "--log-level", "info"),
        ("serve", "--log-level", "info"),
        ("serve", "--quiet", "--log-level", "info", "tooldeck.demo"),
    ],
    ids=" ".join,
)
def test_the_log_level_may_follow_the_command(args: tuple[str, ...]) -> None:
    done = subprocess.run([*TOOLDECK, *args], input="", capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert REGISTERED in done.stderr
    quiet = [word for word in args if word not in ("--log-level", "info")]
    done = subprocess.run([*TOOLDECK, *quiet], input="", capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (done.returncode, REGISTERED in done.stderr) == (0, False), done.stderr  # the default: warning


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "src/tooldeck/calculator.json", "--deck", "tooldeck.demo", "--log-level", "debug"),
        ("diff", "--log-level", "debug", "src/tooldeck/calculator.json", "src/tooldeck/calculator.json"),
        ("audit", "verify", "--log-level", "error", "/nonexistent/audit.jsonl"),
        ("inspect", "--log-level", "debug", "tooldeck.demo"),
        ("install", "json", "--log-level", "debug"),
    ],
    ids=" ".join,
)
def test_every_command_takes_the_log_level(args: tuple[str, ...]) -> None:
    done = run(*args)
    assert "unrecognized arguments" not in done.stderr and done.returncode in (0, 2), done.stderr
    if args[0] == "audit":
        assert done.stderr == "tooldeck: /nonexistent/audit.jsonl: cannot read: No such file or directory\n"
    else:
        assert done.returncode == 0, done.stderr


def test_a_bad_log_level_after_the_command_is_refused_by_name() -> None:
    done = run("tools", "--log-level", "loud")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith(
        "tooldeck tools: error: argument --log-level: invalid choice: 'loud'"
    )
