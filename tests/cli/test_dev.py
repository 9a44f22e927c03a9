"""``tooldeck dev``: a real server restarted by real file changes, watched from its stderr and over HTTP."""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from http_client import HttpClient, free_port, initialize_message
from stdio_client import ROOT, TOOLDECK
from tooldeck.cli.dev import watched_paths
from tooldeck.protocol.errors import TargetError

INSPECTOR = "npx @modelcontextprotocol/inspector --transport http --server-url"


def deck_source(*tools: str, broken: bool = False) -> str:
    lines = ["from tooldeck import Deck", "", 'deck = Deck("dev-deck", version="0.1.0")', ""]
    for name in tools:
        lines += ["@deck.tool", f"def {name}() -> str:", f"    return {name!r}", ""]
    if broken:
        lines.append("x = (")
    return "\n".join(lines) + "\n"


class Dev:
    """``tooldeck dev`` in a subprocess; its stderr is read as it arrives."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str], sigint_ignored: bool = False) -> None:
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        self.proc = subprocess.Popen([*TOOLDECK, "dev", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, **env},
                                     start_new_session=True, preexec_fn=ignore)  # its own process group, with its server child  # fmt: skip
        self.stderr = ""

    def read(self, timeout: float) -> bool:
        """Read what stderr has within ``timeout`` seconds; False if nothing came."""
        assert self.proc.stderr is not None
        ready, _, _ = select.select([self.proc.stderr], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(self.proc.stderr.fileno(), 65536)
        if not chunk:
            raise EOFError(f"tooldeck dev closed stderr; exit {self.proc.wait()}; stderr:\n{self.stderr}")
        self.stderr += chunk.decode(errors="replace")
        return True

    def wait_for(self, done: Callable[[str], bool], what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.stderr):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.read(remaining):
                raise TimeoutError(f"no {what} within {timeout}s; stderr:\n{self.stderr}")

    def wait_for_banners(self, count: int) -> None:
        self.wait_for(lambda text: text.count(f"{INSPECTOR} ") >= count and text.endswith("\n"), f"banner {count}")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        try:
            while self.read(30):  # until stderr closes: the server child has exited too
                pass
        except EOFError:
            pass
        return self.proc.wait(30)

    def kill(self) -> None:
        """After a failed test: the dev process and its server child (their process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@pytest.fixture
def dev_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "NO_COLOR": "1"}


@pytest.fixture
def running(tmp_path: Path, dev_env: dict[str, str]) -> Iterator[tuple[Dev, str, Path]]:
    project = tmp_path / "project"
    project.mkdir()
    deck = project / "deck.py"
    deck.write_text(deck_source("one"))
    port = free_port()
    dev = Dev("deck.py", "--port", str(port), cwd=project, env=dev_env)
    try:
        yield dev, f"http://127.0.0.1:{port}/mcp", deck
    finally:
        dev.kill()


def tool_names(url: str) -> list[str] | None:
    """tools/list of a fresh session, or None while no server answers, or while the one answering is stopping for a
    restart (a stopping server opens no session: 503) or was replaced between two requests (the session is gone: 404)."""
    with HttpClient(url, timeout=5) as http:
        try:
            init = http.post(initialize_message(), version=None)
            if init.status_code != 200:
                assert init.status_code == 503, init.text
                return None
            session = init.headers["mcp-session-id"]
            for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):  # fmt: skip
                reply = http.post(message, session=session)
                if reply.status_code in (404, 503):
                    return None
                assert reply.status_code in (200, 202), reply.text
        except httpx.TransportError:  # no server listened, or it was stopped for a restart meanwhile
            http.checker.expect_no_messages()
            return None
    return [tool["name"] for tool in reply.json()["result"]["tools"]]


def poll_tools(dev: Dev, url: str, expected: list[str], timeout: float = 30.0) -> None:
    """Ask the server until tools/list is ``expected``; between tries, wait for the server's next output."""
    deadline = time.monotonic() + timeout
    while (names := tool_names(url)) != expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"tools/list is {names}, not {expected}; stderr:\n{dev.stderr}")
        dev.read(0.1)  # a restart announces itself on stderr: wake up for it (or poll again shortly)


def test_dev_restarts_on_change_and_waits_out_a_broken_edit(running: tuple[Dev, str, Path]) -> None:
    dev, url, deck = running
    dev.wait_for_banners(1)
    assert dev.stderr.startswith(f"tooldeck dev: watching {deck.parent} (.py .json .yaml .yml .toml)")
    assert f"tooldeck: dev-deck 0.1.0 on {url} (Streamable HTTP)\n" in dev.stderr
    assert f"  inspector: {INSPECTOR} {url}\n" in dev.stderr
    assert tool_names(url) == ["one"]

    deck.write_text(deck_source("one", "two"))  # a new tool
    poll_tools(dev, url, ["one", "two"])
    dev.wait_for_banners(2)  # a banner on every start
    assert "tooldeck dev: deck.py changed; restarting\n" in dev.stderr

    deck.write_text(deck_source("one", "two", broken=True))  # a syntax error: one line, and dev keeps waiting
    dev.wait_for(lambda text: "SyntaxError" in text and text.endswith("\n"), "syntax error")
    (error,) = [line for line in dev.stderr.splitlines() if "SyntaxError" in line]
    assert error.startswith(f"tooldeck: deck.py:{deck_source('one', 'two').count(chr(10)) + 1}: SyntaxError: ")
    assert "Traceback" not in dev.stderr
    assert dev.proc.poll() is None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(url.split(":")[2].split("/")[0])), timeout=2).close()

    deck.write_text(deck_source("one", "two", "three"))  # mended: served again, on the same URL
    poll_tools(dev, url, ["one", "two", "three"])
    dev.wait_for_banners(3)

    assert dev.stop(signal.SIGTERM) == 0
    assert "Traceback" not in dev.stderr
    assert tool_names(url) is None  # the server child is gone too


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_dev_stops_with_status_0(running: tuple[Dev, str, Path], signum: int) -> None:
    dev, url, _ = running
    dev.wait_for_banners(1)
    assert dev.stop(signum) == 0
    assert "Traceback" not in dev.stderr and "KeyboardInterrupt" not in dev.stderr, dev.stderr
    assert tool_names(url) is None


def test_dev_port_0_keeps_one_port_across_restarts(tmp_path: Path, dev_env: dict[str, str]) -> None:
    (tmp_path / "deck.py").write_text(deck_source("one"))
    dev = Dev("deck.py", "--port", "0", cwd=tmp_path, env=dev_env)
    try:
        dev.wait_for_banners(1)
        url = dev.stderr.split(f"{INSPECTOR} ")[1].split("\n")[0]
        assert not url.endswith(":0/mcp")
        (tmp_path / "deck.py").write_text(deck_source("one", "two"))
        poll_tools(dev, url, ["one", "two"])
        assert dev.stop() == 0
    finally:
        dev.kill()


def test_dev_started_with_sigint_ignored_still_restarts_and_stops(tmp_path: Path, dev_env: dict[str, str]) -> None:
    # As `tooldeck dev app.py &` in a script: SIGINT arrives ignored. The server child must still stop at once on a
    # restart (else each one waits out the 10 s SIGINT timeout and a SIGKILL), and SIGINT still stops dev.
    (tmp_path / "deck.py").write_text(deck_source("one"))
    port = free_port()
    dev = Dev("deck.py", "--port", str(port), cwd=tmp_path, env=dev_env, sigint_ignored=True)
    try:
        dev.wait_for_banners(1)
        (tmp_path / "deck.py").write_text(deck_source("one", "two"))
        poll_tools(dev, f"http://127.0.0.1:{port}/mcp", ["one", "two"], timeout=8)
        assert dev.stop(signal.SIGINT) == 0
    finally:
        dev.kill()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("missing.py", "tooldeck: missing.py: no such file\n"),
        (
            "no_such_module_xyz",
            "tooldeck: no_such_module_xyz: no such module (give a path/file.py or an importable module)\n",
        ),
    ],
)
def test_dev_bad_target_is_one_line(tmp_path: Path, target: str, message: str) -> None:
    done = subprocess.run([*TOOLDECK, "dev", target], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr == message


def test_watched_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tools.py").write_text("")
    (tmp_path / "defs").mkdir()
    (tmp_path / "app.py").write_text("")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "policy.toml").write_text("")
    (tmp_path / "policy.toml").write_text("")
    assert watched_paths("app.py", None) == [str(tmp_path)]
    assert watched_paths("app.py:deck", None) == [str(tmp_path)]
    assert watched_paths("pkg.tools:deck", None) == [str(tmp_path / "pkg")]  # the package, not importing it
    assert "pkg.tools" not in sys.modules
    assert watched_paths("defs", None) == [str(tmp_path / "defs")]
    assert watched_paths("app.py", "policy.toml") == [str(tmp_path)]  # already under the watched directory
    assert watched_paths("pkg", "other/policy.toml") == [str(tmp_path / "pkg"), str(tmp_path / "other/policy.toml")]
    with pytest.raises(TargetError, match=r"^nope\.toml: no such policy file$"):
        watched_paths("app.py", "nope.toml")


def test_dev_help_names_its_options() -> None:
    done = subprocess.run([*TOOLDECK, "dev", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0
    assert all(option in done.stdout for option in ("TARGET", "--host", "--port", "--policy"))


def test_readme_dev_examples(tmp_path: Path, dev_env: dict[str, str]) -> None:
    readme = (Path(ROOT) / "README.md").read_text()
    section = readme.split("## Developing a deck: the banner and tooldeck dev\n", 1)[1].split("\n## ", 1)[0]
    (line,) = [line for line in section.splitlines() if line.startswith("tooldeck dev")]
    command = shlex.split(line.split("#")[0])
    assert command == ["tooldeck", "dev", "app.py"]
    (inspector,) = [line for line in section.splitlines() if line.startswith("npx ")]
    folder = tmp_path / "weather"
    folder.mkdir()
    (folder / "app.py").write_text(re.findall(r"```python\n(.*?)```", readme, re.S)[0])  # the opening example
    port = free_port()  # the README's command as written, on a free port instead of 8000
    dev = Dev(*command[2:], "--port", str(port), cwd=folder, env=dev_env)
    try:
        dev.wait_for_banners(1)
        assert f"tooldeck: weather 1.0.0 on http://127.0.0.1:{port}/mcp (Streamable HTTP)\n" in dev.stderr
        (printed,) = [line.strip() for line in dev.stderr.splitlines() if "npx " in line]
        assert printed.removeprefix("inspector: ") == inspector.replace(":8000/", f":{port}/")
        assert tool_names(f"http://127.0.0.1:{port}/mcp") == ["forecast"]
        assert dev.stop() == 0
    finally:
        dev.kill()
