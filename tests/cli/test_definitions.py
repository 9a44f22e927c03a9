"""``tooldeck validate`` / ``tooldeck diff``, and a tool definition file served as it stands over stdio and HTTP."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from http_client import HttpClient, serve_http
from seeds import seed_calculator
from stdio_client import ROOT, TOOLDECK, StdioServer


def run(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def write(path: Path, document: Any) -> Path:
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path


# --- a definition file with its handlers: validated, and served as it stands -------------------------------------

ADD = f"""#!{sys.executable}
import json, os, sys
args = json.load(sys.stdin)
if os.environ["TOOLDECK_CAPABILITY"] == "divide":
    if args["b"] == 0:
        print("division by zero", file=sys.stderr)
        sys.exit(3)
    print(json.dumps({{"result": args["a"] / args["b"]}}))
else:
    print(json.dumps({{"result": args["a"] + args["b"]}}))
"""


@pytest.fixture
def served_file(tmp_path: Path) -> Path:
    script = tmp_path / "calc.py"
    script.write_text(ADD)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    document = seed_calculator()
    document["securityLevel"] = 0
    document["handler"] = {"command": ["./calc.py"], "timeout": 10}
    document["capabilities"][1] = {**document["capabilities"][0], "name": "divide", "description": "Divides"}
    return write(tmp_path / "calculator.json", document)


def test_the_seed_calculator_validates_with_the_handlers_it_is_served_with(served_file: Path) -> None:
    done = run("validate", str(served_file))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "1 definition valid (2 tools)\n")


SIGNATURES = """
def add(a, b):
    return {"result": a + b}

def subtract(a):  # no b
    return {"result": a}
"""


@pytest.mark.parametrize(
    ("handlers", "expected"),
    [
        ({}, [
            "{file}: $.capabilities[0]: capability 'add' has no handler: add \"handler\" to it (or to the tool), or "
            "bind a function with @deck.implements('calculator.add') before loading the definition",
            "{file}: $.capabilities[1]: capability 'subtract' has no handler: add \"handler\" to it (or to the tool), "
            "or bind a function with @deck.implements('calculator.subtract') before loading the definition",
        ]),
        ({"handler": "no_such_module:add"}, [
            "{file}: $.handler: handler 'no_such_module:add': no module named 'no_such_module' (looked beside the "
            "definition, in {dir}, and on sys.path)",
        ] * 2),
        ({"capabilities": {0: "calc_impl:add", 1: "calc_impl:subtract"}}, [
            "{file}: $.capabilities[1]: calc_impl:subtract: does not take parameter 'b' of the capability (add it, or "
            "**kwargs)",
        ]),
        ({"handler": {"command": ["./missing.sh"]}}, [
            "{file}: $.handler: command './missing.sh': no such file (looked in {dir}/missing.sh)",
        ] * 2),
    ],
)  # fmt: skip
def test_validate_refuses_what_serve_refuses_with_the_same_lines(
    tmp_path: Path, handlers: dict[str, Any], expected: list[str]
) -> None:
    (tmp_path / "calc_impl.py").write_text(SIGNATURES)
    document = seed_calculator()
    if "handler" in handlers:
        document["handler"] = handlers["handler"]
    for index, handler in handlers.get("capabilities", {}).items():
        document["capabilities"][index]["handler"] = handler
    path = write(tmp_path / "calculator.json", document)
    lines = [line.format(file=path, dir=tmp_path).replace("calc_impl:subtract:", "subtract:") for line in expected]
    validated = run("validate", str(path))
    assert (validated.returncode, validated.stdout.splitlines()) == (1, lines)
    served = run("tools", str(path))  # serve's loading, through a client command: the same lines
    assert (served.returncode, served.stderr) == (2, "tooldeck: " + "\n".join(lines) + "\n")
    directory = run("validate", str(tmp_path))  # a directory: the same again, as serve DIR loads it
    assert (directory.returncode, directory.stdout.splitlines()) == (1, lines)


def test_validate_with_a_deck_checks_against_its_bindings(tmp_path: Path) -> None:
    path = write(tmp_path / "calculator.json", seed_calculator())
    (tmp_path / "app.py").write_text(
        "from tooldeck import Deck\n"
        "deck = Deck('math')\n"
        "@deck.implements('calculator.add')\n"
        "def add(a: float, b: float) -> dict:\n"
        "    return {'result': a + b}\n"
        "@deck.implements('calculator.subtract')\n"
        "def subtract(a: float) -> dict:\n"
        "    return {'result': a}\n"
    )
    done = run("validate", "--deck", str(tmp_path / "app.py"), str(path))
    assert (done.returncode, done.stdout) == (
        1,
        f"{path}: $.capabilities[1]: subtract: does not take parameter 'b' of the capability (add it, or **kwargs)\n",
    )
    (tmp_path / "app.py").write_text(
        (tmp_path / "app.py").read_text().replace("(a: float) ->", "(a: float, b: float) ->")
    )
    done = run("validate", "--deck", str(tmp_path / "app.py"), str(path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "1 definition valid (2 tools)\n")


def test_validate_prints_every_problem_with_file_and_path(tmp_path: Path) -> None:
    broken = seed_calculator()
    broken["capabilities"][1]["parameters"][0]["type"] = "numbr"
    broken["securityLevel"] = 11
    bad = write(tmp_path / "calculator.json", broken)
    (tmp_path / "other.yaml").write_text("id: [unclosed\n")
    done = run("validate", str(bad), str(tmp_path / "other.yaml"), str(tmp_path / "missing.json"))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f'{bad}: $.capabilities[1].parameters[0].type: expected one of "string", "number", "boolean", "object", '
        f'"array", "any", got a string',
        f"{bad}: $.securityLevel: expected a number <= 10, got an integer",
        f"{tmp_path / 'other.yaml'}: $: not valid YAML: did not find expected ',' or ']' at line 2, column 1",
        f"{tmp_path / 'missing.json'}: $: no such file",
    ]
    assert done.stderr == "4 problems in 3 files\n"


def test_validate_json_is_for_ci(served_file: Path) -> None:
    first = served_file
    second = write(first.parent / "second.json", orjson.loads(first.read_bytes()))  # the same id twice
    done = run("validate", "--json", str(first.parent))
    assert done.returncode == 1
    assert orjson.loads(done.stdout) == {
        "valid": False,
        "files": 2,
        "problems": [{"file": str(second), "path": "$.id", "message": f"id 'calculator' is also defined in {first}"}],
    }
    second.unlink()
    done = run("validate", "--json", str(first.parent))
    assert (done.returncode, orjson.loads(done.stdout)) == (0, {"valid": True, "files": 1, "problems": []})


def test_validate_reads_a_directory_as_serve_does(tmp_path: Path) -> None:
    (tmp_path / "served").mkdir()
    write(tmp_path / "secret.json", {"PASSWORD": "hunter2"})
    os.symlink(tmp_path / "secret.json", tmp_path / "served" / "calc.json")
    os.mkfifo(tmp_path / "served" / "pipe.json")
    expected = [
        f"{tmp_path / 'served' / 'calc.json'}: $: leads outside the directory (a symbolic link); only files inside the "
        "watched directory are read",
        f"{tmp_path / 'served' / 'pipe.json'}: $: is a named pipe (FIFO), not a regular file; only regular files are "
        "read",
    ]
    done = run("validate", str(tmp_path / "served"))
    assert (done.returncode, done.stdout.splitlines()) == (1, expected)
    served = run("tools", str(tmp_path / "served"))
    assert (served.returncode, served.stderr) == (2, "tooldeck: " + "\n".join(expected) + "\n")


def test_validate_an_empty_directory_is_a_problem(tmp_path: Path) -> None:
    done = run("validate", str(tmp_path))
    assert done.returncode == 1
    assert done.stdout == f"{tmp_path}: $: no tool definition files (.json, .yaml, .yml) in this directory\n"


def test_diff_names_the_breaking_change_and_the_bump_it_needs(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", seed_calculator())
    changed = seed_calculator()
    changed["version"] = "1.1.0"
    del changed["capabilities"][1]
    changed["capabilities"][0]["parameters"].append({"name": "c", "type": "number"})
    new = write(tmp_path / "new.json", changed)
    done = run("diff", str(old), str(new))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "major  $.capabilities[1]: capability 'subtract' removed",
        "minor  $.capabilities[0].parameters[2]: optional parameter 'c' added to 'add'",
        "required bump: major; 1.0.0 -> 1.1.0 is a minor bump",
        "refused: 1.0.0 -> 1.1.0 is a minor bump, but capability 'subtract' removed ($.capabilities[1]) needs a "
        "major one (2.0.0)",
    ]
    changed["version"] = "2.0.0"
    write(new, changed)
    done = run("diff", "--json", str(old), str(new))
    assert done.returncode == 0
    report = orjson.loads(done.stdout)
    assert (report["required"], report["bump"], report["ok"]) == ("major", "major", True)
    assert [c["level"] for c in report["changes"]] == ["major", "minor"]


def test_diff_refuses_two_different_tools_and_broken_files(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", seed_calculator())
    other = write(tmp_path / "other.json", {**seed_calculator(), "id": "abacus"})
    done = run("diff", str(old), str(other))
    assert (done.returncode, done.stderr) == (
        2,
        f"tooldeck: {other}: id 'abacus' is not 'calculator': these are different tools, not two versions\n",
    )
    done = run("diff", str(old), str(tmp_path / "nope.json"))
    assert (done.returncode, done.stderr) == (2, f"tooldeck: {tmp_path / 'nope.json'}: $: no such file\n")


def test_serve_a_definition_file_over_stdio(served_file: Path) -> None:
    with StdioServer("serve", str(served_file)) as server:
        init = server.initialize()
        assert init["result"]["serverInfo"]["name"] == "calculator"
        tools = server.request("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == ["calculator.add", "calculator.divide"]
        reply = server.request("tools/call", {"name": "calculator.add", "arguments": {"a": 2, "b": 3}})
        assert reply["result"]["structuredContent"] == {"result": 5}
        reply = server.request("tools/call", {"name": "calculator.divide", "arguments": {"a": 1, "b": 0}})
        assert reply["result"]["isError"] is True
        (content,) = reply["result"]["content"]
        text = content["text"]  # the program's stderr stays in the server log, under the reference given
        match = re.fullmatch(
            r"command './calc.py' exited with status 3 \(details in the server log, ref ([0-9a-f]{8})\)", text
        )
        assert match is not None, text
        logged = server.wait_for_stderr(f"[ref {match.group(1)}]")
        assert (
            f"tool calculator.divide: command './calc.py' exited with status 3 [ref {match.group(1)}]; stderr: "
            "division by zero" in logged
        )


def test_serve_a_definition_file_over_http(served_file: Path) -> None:
    with serve_http(str(served_file)) as url, HttpClient(url) as http:
        session = http.initialize()
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "calculator.divide", "arguments": {"a": 9, "b": 3}}}  # fmt: skip
        response = http.post(call, session=session, headers={"accept": "application/json, text/event-stream"})
        assert response.status_code == 200
        body = response.text
        assert '"structuredContent":{"result":3.0}' in body


def test_serving_a_definition_without_handlers_is_one_clear_line(tmp_path: Path) -> None:
    path = write(tmp_path / "calculator.json", seed_calculator())
    done = run("tools", str(path))
    assert done.returncode == 2
    assert done.stderr == (
        f"tooldeck: {path}: $.capabilities[0]: capability 'add' has no handler: add \"handler\" to it (or to the "
        "tool), or bind a function with @deck.implements('calculator.add') before loading the definition\n"
        f"{path}: $.capabilities[1]: capability 'subtract' has no handler: add \"handler\" to it (or to the tool), or "
        "bind a function with @deck.implements('calculator.subtract') before loading the definition\n"
    )


def test_serving_a_directory_without_definitions_is_one_clear_line(tmp_path: Path) -> None:
    done = run("tools", str(tmp_path))
    assert (done.returncode, done.stderr) == (
        2,
        f"tooldeck: {tmp_path}: is a directory with no tool definition files (.json, .yaml, .yml) in it, which is "
        "what a directory serves; a TARGET is a Python file (path/app.py[:NAME]), a module (package.module[:NAME]), "
        "a tool definition file (.json, .yaml, .yml) or a directory of tool definition files\n",
    )


def test_relative_paths_in_messages(tmp_path: Path) -> None:
    write(tmp_path / "calculator.json", {**seed_calculator(), "version": "1.0"})
    done = run("validate", "calculator.json", cwd=str(tmp_path))
    assert done.stdout == "calculator.json: $.version: is not a semantic version (MAJOR.MINOR.PATCH, like 1.0.0)\n"
    assert os.path.exists(tmp_path / "calculator.json")
