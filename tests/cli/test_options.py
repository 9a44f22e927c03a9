"""The command line's argument types (cli/options.py): a bad value is one line naming the option, what it wants
and what was given, never argparse's ``invalid port value`` (which names a Python function)."""

from __future__ import annotations

import argparse
import subprocess

import pytest

from stdio_client import ROOT, TOOLDECK
from tooldeck.cli.options import node_id, port, positive_float, positive_int


@pytest.mark.parametrize(
    ("convert", "text", "value"),
    [
        (port, "8000", 8000),
        (port, "0", 0),
        (port, " 65535 ", 65535),
        (positive_int, "1", 1),
        (positive_int, "+42", 42),
        (positive_float, "0.5", 0.5),
        (positive_float, "10", 10.0),
        (node_id, "web-1", "web-1"),
        (node_id, "n_2", "n_2"),
    ],
)
def test_good_values(convert: object, text: str, value: float) -> None:
    assert convert(text) == value  # type: ignore[operator]


@pytest.mark.parametrize(
    ("convert", "text", "message"),
    [
        (port, "abc", "must be a port number from 0 to 65535, got 'abc'"),
        (port, "", "must be a port number from 0 to 65535, got ''"),
        (port, "70000", "must be a port number from 0 to 65535, got '70000'"),
        (port, "-1", "must be a port number from 0 to 65535, got '-1'"),
        (port, "80.5", "must be a port number from 0 to 65535, got '80.5'"),
        (port, "8_000", "must be a port number from 0 to 65535, got '8_000'"),
        (port, "٨٠", "must be a port number from 0 to 65535, got '٨٠'"),
        (positive_int, "many", "must be a whole number of 1 or more, got 'many'"),
        (positive_int, "0", "must be a whole number of 1 or more, got '0'"),
        (positive_int, "2.5", "must be a whole number of 1 or more, got '2.5'"),
        (positive_int, "+-3", "must be a whole number of 1 or more, got '+-3'"),
        (positive_float, "soon", "must be a positive number of seconds (like 10 or 0.5), got 'soon'"),
        (positive_float, "0", "must be a positive number of seconds (like 10 or 0.5), got '0'"),
        (positive_float, "-2", "must be a positive number of seconds (like 10 or 0.5), got '-2'"),
        (positive_float, "nan", "must be a positive number of seconds (like 10 or 0.5), got 'nan'"),
        (positive_float, "inf", "must be a positive number of seconds (like 10 or 0.5), got 'inf'"),
        (node_id, "web.1", "must be 1 to 64 letters, digits, '_' or '-', got 'web.1'"),
        (node_id, "", "must be 1 to 64 letters, digits, '_' or '-', got ''"),
        (node_id, "n" * 65, f"must be 1 to 64 letters, digits, '_' or '-', got '{'n' * 65}'"),
        (node_id, "wéb", "must be 1 to 64 letters, digits, '_' or '-', got 'wéb'"),
    ],
)
def test_bad_values_say_what_is_wanted(convert: object, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        convert(text)  # type: ignore[operator]
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--port", "abc"], "tooldeck serve: error: argument --port: must be a port number from 0 to 65535, got 'abc'"),
        (["--port", "99999"], "argument --port: must be a port number from 0 to 65535, got '99999'"),
        (["--max-connections", "lots"], "argument --max-connections: must be a whole number of 1 or more, got 'lots'"),
        (["--header-timeout", "x"], "argument --header-timeout: must be a positive number of seconds"),
        (["--node-id", "a b"], "argument --node-id: must be 1 to 64 letters, digits, '_' or '-', got 'a b'"),
    ],
)
def test_the_command_line_prints_one_plain_line(args: list[str], line: str) -> None:
    done = subprocess.run(
        [*TOOLDECK, "serve", "--http", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert line in last
    assert "invalid" not in done.stderr and "_port" not in done.stderr and "Traceback" not in done.stderr
