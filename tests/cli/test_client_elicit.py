"""``tooldeck call`` answers a server's form elicitation from the terminal: the message and one prompt per field,
typed values converted; Ctrl-D declines; without a terminal the capability is not offered. A level-8 tool's
confirmation is given this way."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_client import serve_http
from stdio_client import ROOT, TOOLDECK
from tooldeck.security.tokens import hash_token

DECK = '''
from tooldeck import Context, Deck

deck = Deck("asking")

FORM = {"type": "object", "properties": {
    "nights": {"type": "integer", "title": "Nights"},
    "breakfast": {"type": "boolean"},
    "room": {"type": "string", "enum": ["single", "double"]},
    "note": {"type": "string"},
}, "required": ["nights", "room"]}


@deck.tool
async def book(city: str, ctx: Context) -> str:
    """Book a stay."""
    answer = await ctx.elicit(f"How long in {city}? \\x1b[31mred\\x1b[0m", FORM)
    if not answer.accepted:
        return f"abandoned ({answer.action})"
    return f"{answer.content}"


@deck.tool(security_level=8)
def wipe(disk: str) -> str:
    """Erase a disk."""
    return f"wiped {disk}"
'''


class Terminal:
    """A command with stdin and stderr on a pseudo-terminal and stdout on a pipe."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen([*TOOLDECK, *args], stdin=slave, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT)
        os.close(slave)
        self.seen = bytearray()

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.seen.decode(errors="replace"))
            if found:
                return found
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} in {self.seen.decode(errors='replace')!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                assert data, f"the terminal closed before {pattern!r}: {self.seen.decode(errors='replace')!r}"
                self.seen += data

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> tuple[int, str]:
        assert self.proc.stdout is not None
        stdout = self.proc.stdout.read().decode()
        status = self.proc.wait(timeout=60)
        while select.select([self.master], [], [], 0)[0]:  # what the terminal got after the last expect
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            self.seen += data
        os.close(self.master)
        return status, stdout


@pytest.fixture
def deck(tmp_path: Path) -> Path:
    path = tmp_path / "asking.py"
    path.write_text(DECK)
    return path


def test_a_form_is_answered_field_by_field_with_types_and_retries(deck: Path) -> None:
    term = Terminal("call", str(deck), "book", "city=Oslo")
    term.expect(r"How long in Oslo\? red")  # the server's escape sequences never reach the terminal
    assert b"\x1b[31m" not in term.seen
    term.expect(r"Nights \(a whole number\): ")
    term.type("three\n")
    term.expect(r"a whole number, like 3")
    term.type("3\n")
    term.expect(r"breakfast \(y/n, optional\): ")
    term.type("y\n")
    term.expect(r"room \(single \| double\): ")
    term.type("suite\n")
    term.expect(r"one of: single, double")
    term.type("double\n")
    term.expect(r"note \(text, optional\): ")
    term.type("\n")
    status, stdout = term.finish()
    assert (status, stdout) == (0, "{'nights': 3, 'breakfast': True, 'room': 'double'}\n")


def test_end_of_input_declines(deck: Path) -> None:
    term = Terminal("call", str(deck), "book", "city=Oslo")
    term.expect(r"Nights \(a whole number\): ")
    term.type("\x04")  # Ctrl-D
    status, stdout = term.finish()
    assert (status, stdout) == (0, "abandoned (decline)\n")


def test_without_a_terminal_no_elicitation_is_offered(deck: Path) -> None:
    done = subprocess.run([*TOOLDECK, "call", str(deck), "book", "city=Oslo"], capture_output=True, text=True,
                          cwd=ROOT, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert done.returncode == 1
    assert "elicitation" in done.stderr and done.stdout == ""


def test_a_level_8_tool_is_confirmed_with_the_code_the_server_shows(deck: Path) -> None:
    term = Terminal("call", str(deck), "wipe", "disk=sdb")
    code = term.expect(r"enter the code (\d{6})").group(1)
    term.expect(r"Confirmation code \(text\): ")
    term.type(f"{code}\n")
    status, stdout = term.finish()
    assert (status, stdout) == (0, "wiped sdb\n"), term.seen.decode(errors="replace")


def test_a_wrong_confirmation_code_does_not_run_the_tool(deck: Path) -> None:
    term = Terminal("call", str(deck), "wipe", "disk=sdb")
    code = term.expect(r"enter the code (\d{6})").group(1)
    term.expect(r"Confirmation code \(text\): ")
    term.type(f"{(int(code) + 1) % 1_000_000:06d}\n")
    status, stdout = term.finish()
    assert (status, stdout) == (1, "")
    assert "the confirmation code does not match this call" in term.seen.decode(errors="replace")


@pytest.fixture
def remote(deck: Path, tmp_path: Path) -> Iterator[str]:
    """The same deck over Streamable HTTP (a 2025-11-25 session, as ``tooldeck call --url`` opens), in a process of its
    own, with an API key (level 8 needs an authenticated caller); the confirmation waits up to 120 s (the default),
    far longer than the tests give the question to arrive."""
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[authentication.tokens]]\nsubject = "ops"\nsha256 = "{hash_token("ops-key")}"\n')
    with serve_http(str(deck), "--policy", str(policy)) as endpoint:
        yield endpoint


def test_a_level_8_confirmation_reaches_an_http_client_at_once_and_runs_when_accepted(remote: str) -> None:
    # The question must arrive while the call waits for it: before, a tool without a Context answered nothing on
    # the POST until confirm_timeout ran out, and then the question and the refusal together.
    term = Terminal("call", "--url", remote, "--token", "ops-key", "wipe", "disk=sdb")
    code = term.expect(r"enter the code (\d{6})", timeout=30).group(1)
    term.expect(r"Confirmation code \(text\): ")
    term.type(f"{code}\n")
    status, stdout = term.finish()
    assert (status, stdout) == (0, "wiped sdb\n"), term.seen.decode(errors="replace")


def test_a_level_8_confirmation_declined_over_http_does_not_run_the_tool(remote: str) -> None:
    term = Terminal("call", "--url", remote, "--token", "ops-key", "wipe", "disk=sdb")
    term.expect(r"Confirmation code \(text\): ", timeout=30)
    term.type("\x04")  # Ctrl-D declines
    status, stdout = term.finish()
    assert (status, stdout) == (1, ""), term.seen.decode(errors="replace")
    assert "the user did not confirm it (decline)" in term.seen.decode(errors="replace")
