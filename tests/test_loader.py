"""Finding the Deck a TARGET names (loader.py): every target that cannot be served is one line saying what it is
and what a TARGET may be — a directory is called a directory, a value that is not a Deck is named in JSON's words."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from stdio_client import TOOLDECK
from tooldeck import Deck
from tooldeck.loader import TARGETS, load_deck
from tooldeck.protocol.errors import TargetError


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "empty").mkdir()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "app.py").write_text("from tooldeck import Deck\ndeck = Deck('app')\n")
    (tmp_path / "values.py").write_text(
        "from tooldeck import Deck\nnumber = 3\ntext = 'x'\nnothing = None\nmain = Deck('main')\n"
        "def factory():\n    return [1]\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refusal(target: str, **options: bool) -> str:
    with pytest.raises(TargetError) as refused:
        load_deck(target, **options)
    return str(refused.value)


def test_a_directory_without_definitions_is_called_a_directory(place: Path) -> None:
    message = refusal("empty")
    assert message == (
        "empty: is a directory with no tool definition files (.json, .yaml, .yml) in it, which is what a directory "
        f"serves; {TARGETS}"
    )
    assert "no such file" not in message


def test_a_directory_of_python_code_points_at_a_file_in_it(place: Path) -> None:
    message = refusal("code")
    assert message.endswith("for Python code give the file that creates the Deck, e.g. code/app.py")
    assert load_deck("code/app.py").name == "app"  # and that advice works


@pytest.mark.parametrize("target", ["./empty:deck", "code/:deck"])
def test_a_directory_with_a_name_is_not_a_missing_file(place: Path, target: str) -> None:
    message = refusal(target)
    assert message.startswith(f"{target.rpartition(':')[0]}: is a directory, and :NAME picks a Deck in a Python file")
    assert "no such file" not in message and message.endswith(TARGETS)


def test_a_directory_without_init_taken_as_a_module(place: Path) -> None:
    assert refusal("empty:deck") == f"empty: is a directory without __init__.py, not a module; {TARGETS}"


def test_a_missing_file_says_where_it_was_looked_for(place: Path) -> None:
    assert refusal("missing.py") == f"missing.py: no such file (looked for in {os.getcwd()})"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("values.py:number", "values.py:number: is an integer, not a Deck (or a function returning one)"),
        ("values.py:text", "values.py:text: is a string, not a Deck (or a function returning one)"),
        ("values.py:nothing", "values.py:nothing: is null, not a Deck (or a function returning one)"),
        ("values.py:factory", "values.py:factory: returned an array, not a Deck"),
        ("values.py:absent", "values.py: has no attribute 'absent' (its Decks: main)"),
    ],
)
def test_a_name_that_is_not_a_deck_is_named_in_plain_words(place: Path, target: str, message: str) -> None:
    assert refusal(target) == message


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing", "missing: no such directory; --watch takes a directory of tool definition files"),
        ("values.py", "values.py: is a file; --watch takes a directory of tool definition files"),
    ],
)
def test_watch_says_what_the_target_is(place: Path, target: str, message: str) -> None:
    assert refusal(target, watch=True).startswith(message)


def test_the_good_targets_still_load(place: Path) -> None:
    assert isinstance(load_deck("values.py:main"), Deck)
    assert load_deck("values.py").name == "main"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["serve", "empty"], "tooldeck: empty: is a directory with no tool definition files"),
        (["serve", "./empty:deck"], "tooldeck: ./empty: is a directory, and :NAME picks a Deck"),
        (["serve", "values.py:number"], "tooldeck: values.py:number: is an integer, not a Deck"),
    ],
)
def test_the_command_prints_one_line_and_exits_2(place: Path, args: list[str], line: str) -> None:
    done = subprocess.run([*TOOLDECK, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.startswith(line), done.stderr
    assert len(done.stderr.splitlines()) == 1
