"""Tests for manifest/command.py: real programs written into tmp_path, run through a CommandHandler."""

from __future__ import annotations

import asyncio
import os
import re
import select
import shutil
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tooldeck.manifest.command import CommandHandler
from tooldeck.manifest.mapping import output_schema_of
from tooldeck.protocol.errors import RegistrationError, ToolError
from tooldeck.schema.validate import Validator

WHERE = "calculator.json: $.capabilities[0].handler"


def write_script(directory: Path, name: str, body: str, *, interpreter: str = sys.executable) -> Path:
    path = directory / name
    path.write_text(f"#!{interpreter}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def load(directory: Path, command: list[str], **spec: Any) -> CommandHandler:
    return CommandHandler(
        {"command": command, **spec}, base_dir=str(directory), tool="calc", capability="add", where=WHERE
    )


def ended_within(pid: int, timeout: float) -> bool:
    """Whether the process has ended (a zombie counts: this container's init does not reap them), waiting on its
    pidfd for at most ``timeout`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


async def wait_for_file(path: Path, timeout: float = 5.0) -> str:
    """The content of ``path`` once it exists (the programs below rename it into place whole)."""
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.01)
    return path.read_text()


def hanging_script(directory: Path) -> Path:
    """A bash script that starts a grandchild, says both pids, then hangs; the grandchild holds stdout open."""
    bash = shutil.which("bash")
    assert bash is not None
    pids = directory / "pids"
    body = f"""\
        sleep 60 &
        echo "$$ $!" > {pids}.tmp && mv {pids}.tmp {pids}
        echo starting >&2
        sleep 60
    """
    return write_script(directory, "hang.sh", body, interpreter=bash)


# --- results -----------------------------------------------------------------------------------------------------


async def test_arguments_go_in_as_json_and_json_output_comes_back_parsed(tmp_path: Path) -> None:
    write_script(
        tmp_path,
        "add.py",
        """\
        import json, sys
        args = json.load(sys.stdin)
        print(json.dumps({"sum": args["a"] + args["b"]}))
        """,
    )
    assert await load(tmp_path, ["./add.py"])(a=2, b=3) == {"sum": 5}


async def test_stdin_carries_the_arguments_as_one_json_object(tmp_path: Path) -> None:
    write_script(tmp_path, "echo.py", "import json, sys\nprint(json.dumps({'stdin': sys.stdin.read()}))\n")
    run = load(tmp_path, ["./echo.py"])
    assert await run(a=1, b="x", c=[True, None]) == {"stdin": '{"a":1,"b":"x","c":[true,null]}'}
    assert await run() == {"stdin": "{}"}


@pytest.mark.parametrize(
    ("written", "result"),
    [
        (b"hello world\n", "hello world"),
        (b"two\nlines\n", "two\nlines"),
        (b"not json {\n", "not json {"),
        (b"3\n", 3),
        (b'  ["a"]  \n\n', ["a"]),
        (b"", ""),
        (b"caf\xe9\n", "caf\ufffd"),
    ],
)
async def test_text_output_comes_back_as_text(tmp_path: Path, written: bytes, result: Any) -> None:
    write_script(tmp_path, "say.py", f"import sys\nsys.stdout.buffer.write({written!r})\n")
    assert await load(tmp_path, ["./say.py"])() == result


async def test_command_arguments_are_passed_as_written_without_a_shell(tmp_path: Path) -> None:
    write_script(tmp_path, "argv.py", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    run = load(tmp_path, ["./argv.py", "--flag", "two words", "$HOME", "*"])
    assert await run() == ["--flag", "two words", "$HOME", "*"]


async def test_arguments_never_reach_the_command_line_so_a_dash_is_no_option(tmp_path: Path) -> None:
    # the command line is the definition's, the same at every call; the values go on stdin only
    write_script(tmp_path, "argv.py", "import json, sys\nprint(json.dumps([sys.argv[1:], json.load(sys.stdin)]))\n")
    run = load(tmp_path, ["./argv.py", "--", "fixed"])
    hostile = {"path": "--output=source", "flags": "-rf", "words": "a b"}
    assert await run(**hostile) == [["--", "fixed"], hostile]
    assert run.environment().keys() >= {"TOOLDECK_TOOL", "TOOLDECK_CAPABILITY"}
    assert not any(value in run.environment().values() for value in hostile.values())


@pytest.mark.parametrize("word", ["{path}", "${path}", "$path", "--in={path}", "-i=$path"])
def test_a_command_word_that_expects_a_parameter_is_refused(tmp_path: Path, word: str) -> None:
    write_script(tmp_path, "ok.py", "print('ok')\n")
    with pytest.raises(RegistrationError) as caught:
        CommandHandler({"command": ["./ok.py", word]}, base_dir=str(tmp_path), tool="calc", capability="add",
                       where=WHERE, parameters=["path"])  # fmt: skip
    assert str(caught.value) == (
        f"{WHERE}: command[1] names parameter 'path', but arguments never reach the command line (a value starting "
        "with '-' would become an option there): the program reads them as one JSON object on stdin"
    )


@pytest.mark.parametrize("word", ["{other}", "$pathway", "path", "a {path} b", "$REGION"])
def test_command_words_that_name_no_parameter_pass(tmp_path: Path, word: str) -> None:
    write_script(tmp_path, "ok.py", "print('ok')\n")
    spec = {"command": ["./ok.py", word], "env": ["REGION"]}
    CommandHandler(spec, base_dir=str(tmp_path), tool="calc", capability="add", where=WHERE,
                   parameters=["path", "REGION"])  # fmt: skip


def output_of(schema: dict[str, Any], wraps: bool) -> tuple[Validator, bool]:
    """The output validator a capability with this return schema gets (see mapping.py)."""
    output, wrapped = output_schema_of(schema)
    assert output is not None and wrapped == wraps
    return Validator(output), wraps


@pytest.mark.parametrize(
    ("schema", "wraps", "written", "logged"),
    [
        ({"type": "integer"}, True, "PASSWORD=hunter2", '$.result: expected integer, got "PASSWORD=hunter2"'),
        ({"type": "object", "required": ["free"]}, False, '{"token": "hunter2"}',
         "$: missing required property 'free'"),
    ],
)  # fmt: skip
async def test_output_that_breaks_the_output_schema_is_logged_and_the_client_gets_a_reference(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, schema: dict[str, Any], wraps: bool, written: str, logged: str
) -> None:
    write_script(tmp_path, "leak.py", f"print({written!r})\n")
    run = CommandHandler({"command": ["./leak.py"]}, base_dir=str(tmp_path), tool="calc", capability="add",
                         where=WHERE, output=output_of(schema, wraps))  # fmt: skip
    with pytest.raises(ToolError) as caught:
        await run()
    told, line = failure(caught, caplog)
    assert told == "command './leak.py' wrote output that does not match the tool's outputSchema"
    assert "hunter2" not in str(caught.value)
    assert line.startswith("tool calc.add: command './leak.py' wrote output that does not match the outputSchema")
    assert line.endswith(f": {logged}")


async def test_output_that_fits_the_output_schema_comes_back(tmp_path: Path) -> None:
    write_script(tmp_path, "ok.py", "print(42)\n")
    run = CommandHandler({"command": ["./ok.py"]}, base_dir=str(tmp_path), tool="calc", capability="add",
                         where=WHERE, output=output_of({"type": "integer"}, True))  # fmt: skip
    assert await run() == 42


@pytest.mark.parametrize("closes_stdin_first", [False, True])
async def test_a_program_that_does_not_read_stdin_still_succeeds(tmp_path: Path, closes_stdin_first: bool) -> None:
    write_script(tmp_path, "deaf.py", f"import os\nif {closes_stdin_first}:\n    os.close(0)\nprint('ok')\n")
    # Far more than a pipe holds, so the write meets a closed pipe rather than fitting in the buffer.
    assert await load(tmp_path, ["./deaf.py"])(text="x" * 1_000_000) == "ok"


# --- failures ----------------------------------------------------------------------------------------------------


def failure(caught: pytest.ExceptionInfo[ToolError], caplog: pytest.LogCaptureFixture) -> tuple[str, str]:
    """What the client is told (without its reference) and the one log line that reference leads to."""
    match = re.fullmatch(r"(.*) \(details in the server log, ref ([0-9a-f]{8})\)", str(caught.value))
    assert match is not None, str(caught.value)
    told, ref = match.groups()
    logged = [record.getMessage() for record in caplog.records if f"[ref {ref}]" in record.getMessage()]
    assert len(logged) == 1, caplog.messages
    return told, logged[0]


@pytest.mark.parametrize(
    ("stderr", "shown"),
    [
        ("", "(empty)"),
        ("\n\n", "(empty)"),
        ("boom\n", "boom"),
        ("".join(f"line {n}\n" for n in range(1, 31)), " | ".join(f"line {n}" for n in range(21, 31))),
        ("filler\n" * 30_000 + "final error\n", " | ".join(["filler"] * 9 + ["final error"])),
        ("x" * 300 + "\n", "x" * 199 + "…"),
        ("PASSWORD=hunter2\x1b[2J\rforged\n", "PASSWORD=hunter2\\x1b[2J | forged"),  # control characters escaped
    ],
)
async def test_a_non_zero_exit_tells_the_client_a_reference_and_logs_the_last_lines_of_stderr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stderr: str, shown: str
) -> None:
    write_script(tmp_path, "fail.py", f"import sys\nsys.stderr.write({stderr!r})\nsys.exit(3)\n")
    with pytest.raises(ToolError) as caught:
        await load(tmp_path, ["./fail.py"])()
    told, logged = failure(caught, caplog)
    assert told == "command './fail.py' exited with status 3"
    assert logged.startswith("tool calc.add: command './fail.py' exited with status 3 [ref ")
    assert logged.endswith(f"]; stderr: {shown}")


async def test_a_program_killed_by_a_signal_says_which(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_script(
        tmp_path,
        "die.py",
        "import os, signal, sys\nprint('bye', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n",
    )
    with pytest.raises(ToolError) as caught:
        await load(tmp_path, ["./die.py"])()
    told, logged = failure(caught, caplog)
    assert told == "command './die.py' was killed by signal 9 (SIGKILL)"
    assert logged.endswith("]; stderr: bye")


async def test_a_time_out_ends_the_call_at_the_time_out_and_kills_the_whole_process_group(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hanging_script(tmp_path)
    run = load(tmp_path, ["./hang.sh"], timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ToolError) as caught:
        await run()
    took = time.monotonic() - started
    # Not before the time-out, and well before the script's own end (60 s) or twice the time-out: the time-out is
    # what ended it (the process start and the reaping are the rest).
    assert 1.0 <= took < 1.9, took
    told, logged = failure(caught, caplog)
    assert told == "command './hang.sh' timed out after 1 s"
    assert logged.endswith("]; stderr: starting")
    child, grandchild = (int(pid) for pid in (tmp_path / "pids").read_text().split())
    assert ended_within(child, 0)  # reaped before the call returned
    assert ended_within(grandchild, 2.0)


async def test_cancelling_the_call_kills_the_whole_process_group(tmp_path: Path) -> None:
    hanging_script(tmp_path)
    call = asyncio.ensure_future(load(tmp_path, ["./hang.sh"])())
    child, grandchild = (int(pid) for pid in (await wait_for_file(tmp_path / "pids")).split())
    assert not ended_within(grandchild, 0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert ended_within(child, 0)
    assert ended_within(grandchild, 2.0)


async def test_output_up_to_max_output_bytes_is_returned_whole(tmp_path: Path) -> None:
    write_script(tmp_path, "big.py", "print('x' * 1000, end='')\n")
    assert await load(tmp_path, ["./big.py"], max_output_bytes=1000)() == "x" * 1000


@pytest.mark.parametrize(("size", "limit"), [(1001, 1000), (3 * 65536, 65536 + 1)])
async def test_output_past_max_output_bytes_kills_the_command(tmp_path: Path, size: int, limit: int) -> None:
    # The program then hangs: only the kill can end the call before the time-out.
    body = f"import sys, time\nsys.stdout.write('x' * {size})\nsys.stdout.flush()\ntime.sleep(60)\n"
    write_script(tmp_path, "big.py", body)
    with pytest.raises(ToolError) as caught:
        await load(tmp_path, ["./big.py"], timeout=5, max_output_bytes=limit)()
    assert str(caught.value) == f"command './big.py' was killed: its output exceeded {limit} bytes (max_output_bytes)"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(os.unlink, "No such file or directory"), (lambda path: os.chmod(path, 0o644), "Permission denied")],
)
async def test_a_program_that_cannot_start_is_a_tool_error(tmp_path: Path, damage: Any, reason: str) -> None:
    path = write_script(tmp_path, "gone.py", "print('never')\n")
    run = load(tmp_path, ["./gone.py"])
    damage(path)
    with pytest.raises(ToolError) as caught:
        await run()
    assert str(caught.value) == f"command './gone.py' could not be started: {reason} ({path})"


# --- environment and working directory ---------------------------------------------------------------------------


async def test_the_environment_is_an_allow_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # also keeps the child Python from coercing (adding) LC_CTYPE
    monkeypatch.delenv("LC_CTYPE", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("API_BASE", "https://api.example")
    monkeypatch.setenv("TOOLDECK_TEST_SECRET", "s3cret")
    monkeypatch.delenv("TOOLDECK_TEST_UNSET", raising=False)
    write_script(tmp_path, "env.py", "import json, os\nprint(json.dumps(dict(os.environ)))\n")
    run = load(tmp_path, ["./env.py"], env=["API_BASE", "TOOLDECK_TEST_UNSET"])
    assert await run() == {
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "TMPDIR": str(tmp_path),
        "API_BASE": "https://api.example",
        "TOOLDECK_TOOL": "calc",
        "TOOLDECK_CAPABILITY": "add",
    }


@pytest.mark.parametrize(("cwd", "expected"), [(None, "."), ("work", "work"), ("work/../work/deeper", "work/deeper")])
async def test_the_working_directory_is_relative_to_the_definition(
    tmp_path: Path, cwd: str | None, expected: str
) -> None:
    (tmp_path / "work" / "deeper").mkdir(parents=True)
    write_script(tmp_path, "pwd.py", "import os\nprint(os.getcwd())\n")
    spec = {} if cwd is None else {"cwd": cwd}
    assert await load(tmp_path, ["./pwd.py"], **spec)() == str((tmp_path / expected).resolve())


async def test_a_path_command_is_found_from_the_definition_not_the_server_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scripts").mkdir()
    write_script(tmp_path / "scripts", "hi.py", "print('hi')\n")
    monkeypatch.chdir("/")
    run = load(tmp_path, ["scripts/hi.py"], cwd="scripts")
    assert run.program == str(tmp_path / "scripts" / "hi.py")
    assert await run() == "hi"
    assert await load(Path("/nonexistent"), [str(tmp_path / "scripts" / "hi.py")], cwd=str(tmp_path))() == "hi"


async def test_a_bare_name_is_looked_up_on_the_server_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "hello-tool", "print('hello from PATH')\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    run = load(tmp_path, ["hello-tool"])
    assert run.program == str(bin_dir / "hello-tool")
    assert await run() == "hello from PATH"


# --- refusals at load ---------------------------------------------------------------------------------------------


def test_load_time_refusals_name_the_place_and_the_program(tmp_path: Path) -> None:
    write_script(tmp_path, "ok.py", "print('ok')\n")
    (tmp_path / "plain.sh").write_text("echo hi\n")
    (tmp_path / "adir").mkdir()
    cases: list[tuple[list[str], dict[str, Any], str]] = [
        (["./missing.sh"], {}, f"command './missing.sh': no such file (looked in {tmp_path}/missing.sh)"),
        (["sub/../missing.sh"], {}, f"command 'sub/../missing.sh': no such file (looked in {tmp_path}/missing.sh)"),
        (["./plain.sh"], {}, "command './plain.sh': is not executable (chmod +x it)"),
        (["./adir"], {}, f"command './adir': is not a regular file ({tmp_path}/adir)"),
        (
            ["tooldeck-no-such-program"],
            {},
            "command 'tooldeck-no-such-program': not found on the server's PATH "
            "(write ./tooldeck-no-such-program for a file next to the definition)",
        ),
        (
            ["./ok.py"],
            {"cwd": "nowhere"},
            f"command './ok.py': cwd 'nowhere': no such directory (looked in {tmp_path}/nowhere)",
        ),
        (
            ["./ok.py"],
            {"cwd": "ok.py"},
            f"command './ok.py': cwd 'ok.py': is not a directory (looked in {tmp_path}/ok.py)",
        ),
        (["./ok.py"], {"timeout": 0}, "command './ok.py': timeout must be a positive number of seconds"),
        (["./ok.py"], {"max_output_bytes": 0}, "command './ok.py': max_output_bytes must be positive"),
        ([], {}, "command must be a non-empty list of non-empty strings"),
        (["./ok.py", ""], {}, "command must be a non-empty list of non-empty strings"),
    ]
    for command, spec, message in cases:
        with pytest.raises(RegistrationError) as caught:
            load(tmp_path, command, **spec)
        assert str(caught.value) == f"{WHERE}: {message}"


def test_defaults(tmp_path: Path) -> None:
    write_script(tmp_path, "ok.py", "print('ok')\n")
    run = load(tmp_path, ["./ok.py", "--flag"])
    assert (run.display, run.args, run.program, run.cwd) == (
        "./ok.py",
        ["--flag"],
        str(tmp_path / "ok.py"),
        str(tmp_path),
    )
    assert (run.timeout, run.max_output_bytes, run.env_names) == (30.0, 4 * 1024 * 1024, ())
    assert repr(run) == "CommandHandler('./ok.py')"
