"""The README's "Running: stdio and the command line" section runs as written: every command of its examples, in a
folder holding what the README says it holds (server.py, the opening deck; app.py, the opening deck with the
section's own additions), and its command reference lists every command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from http_client import serve_http
from stdio_client import ROOT, TOOLDECK, handshake
from tooldeck.security.tokens import hash_token

README = (Path(ROOT) / "README.md").read_text()
SECTION = README.split("## Running: stdio and the command line\n", 1)[1].split("\n## ", 1)[0]
SERVE_BLOCK, CLIENT_BLOCK = re.findall(r"```bash\n(.*?)```", SECTION, re.S)
OPENING = re.findall(r"```python\n(.*?)```", README, re.S)[0]

# What app.py adds to the opening deck for the read and prompt examples: the README's own block, placed above the
# opening deck's ``if __name__ == "__main__":`` lines, as the README says.
(ADDITIONS,) = re.findall(r"```python\n(# app\.py: .*?)```", SECTION, re.S)
MAIN = 'if __name__ == "__main__":'
TOKEN = "readme-token"


def lines(block: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in block.strip().splitlines()]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("readme")
    opening, main, rest = OPENING.partition(MAIN)
    assert main, "the opening deck ends with its main lines"
    (where / "app.py").write_text(f"{opening}{ADDITIONS}\n{main}{rest}")
    (where / "server.py").write_text(OPENING)
    (where / "policy.toml").write_text(
        f'[authentication]\nrequired = true\n\n[[authentication.tokens]]\nsubject = "me"\nsha256 = "{hash_token(TOKEN)}"\n'
    )
    return where


@pytest.fixture(scope="module")
def url(folder: Path) -> Iterator[str]:
    with serve_http(str(folder / "app.py"), "--policy", str(folder / "policy.toml"), "--task-store", "memory") as at:
        yield at


def command(words: list[str], folder: Path, url: str = "") -> list[str]:
    assert words[0] == "tooldeck"
    out = []
    for word in words[1:]:
        word = {"$TOKEN": TOKEN, "python": sys.executable}.get(word, word)
        if url and word.startswith("http://127.0.0.1:8000/"):
            word = url  # the example's server, on the port the test could get
        out.append(word)
    return [*TOOLDECK, *out]


@pytest.mark.parametrize("words", lines(SERVE_BLOCK), ids=" ".join)
def test_each_serve_example_answers_initialize(words: list[str], folder: Path) -> None:
    sent = b"".join(orjson.dumps(m) + b"\n" for m in handshake())
    done = subprocess.run(
        command(words, folder), input=sent, capture_output=True, cwd=folder, timeout=60,
        env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (reply,) = [orjson.loads(line) for line in done.stdout.splitlines()]
    expected = "weather" if "app.py" in " ".join(words) else "tooldeck-demo"
    assert reply["result"]["serverInfo"]["name"] == expected


EXPECTED_STDOUT = {
    "calculate": lambda out: out == "14.0\n",
    "convert_units": lambda out: orjson.loads(out)["result"] == 212.0 and out.startswith("{\n  "),
    "count_primes limit=20000000": lambda out: orjson.loads(out)["count"] == 1270607,
    "--task": lambda out: orjson.loads(out) == {"limit": 1000, "count": 168, "largest": 997},
    "days=2": lambda out: orjson.loads(out) == {"city": "Oslo", "celsius": 21.5},
    "resources": lambda out: out == "config://app  app_config (application/json)\n",
    "read": lambda out: out == '{"theme":"dark"}\n',
    "prompt": lambda out: out == "# Ask for a code review.\n\n[user]\nReview this python code:\nprint(1)\n",
    "--url": lambda out: orjson.loads(out) == {"city": "Oslo", "celsius": 21.5},
    "server.py": lambda out: out == "forecast(city: string, days: integer = 1) -> object\n    Forecast for a city.\n",
    "tools": lambda out: out.startswith("calculate(expression: string) -> number\n"),
}


@pytest.mark.parametrize("words", lines(CLIENT_BLOCK), ids=" ".join)
def test_each_client_example_runs_as_written(words: list[str], folder: Path, url: str) -> None:
    done = subprocess.run(command(words, folder, url), capture_output=True, text=True, cwd=folder, timeout=60)
    assert done.returncode == 0, done.stderr
    line = " ".join(words)
    check = next(check for key, check in EXPECTED_STDOUT.items() if key in line)  # the first that fits
    assert check(done.stdout), done.stdout
    if "--task" in words:
        assert done.stderr.rstrip().endswith(": completed")


def test_every_example_has_its_expectation() -> None:
    for words in lines(CLIENT_BLOCK):
        assert any(key in " ".join(words) for key in EXPECTED_STDOUT), words


def test_the_reference_lists_every_command() -> None:
    table = SECTION.split("### Command reference", 1)[1]
    rows = re.findall(r"^\| `tooldeck ([^`]*)` \|", table, re.M)
    names = {row.split()[0] if row.split()[0] != "audit" else "audit verify" for row in rows}
    done = subprocess.run([*TOOLDECK, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    commands = set(re.findall(r"^    ([a-z]+) ", done.stdout, re.M)) - {"audit"} | {"audit verify", "--version"}
    assert names == commands
    for name in names:
        done = subprocess.run([*TOOLDECK, *name.split(), "--help"], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, (name, done.stderr)


def test_the_additions_are_the_readmes_own_resource_and_prompt() -> None:
    resources = README.split("## Resources\n", 1)[1].split("\n## ", 1)[0]
    prompts = README.split("## Prompts and completion\n", 1)[1].split("\n## ", 1)[0]
    resource, prompt = ADDITIONS.split("\n\n@deck.prompt")
    resource = resource.split("\n\n", 1)[1]  # after the comment and the import
    assert resource.strip() in resources
    assert f"@deck.prompt{prompt}".strip() in prompts
