"""DirectoryWatcher: batches of file changes applied through the manager (broken and refused files keep their previous
version serving), and `tooldeck serve DIR --watch` following a real directory over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from stdio_client import StdioServer
from tooldeck import Deck
from tooldeck.manifest.definition import digest
from tooldeck.manifest.watch import DirectoryWatcher

IMPL = """
def add(a, b):
    return {"result": a + b}

def scale(x, factor=2):
    return {"result": x * factor}

def hello(who):
    return f"hello, {who}"
"""


def definition(
    tool_id: str = "calc", version: str = "1.0.0", capabilities: tuple[str, ...] = ("add",), **extra: Any
) -> dict[str, Any]:
    known = {
        "add": {
            "name": "add",
            "description": "Adds two numbers",
            "parameters": [
                {"name": "a", "type": "number", "required": True},
                {"name": "b", "type": "number", "required": True},
            ],
            "return": {"schema": {"type": "object", "properties": {"result": {"type": "number"}}}},
            "handler": "watch_impl:add",
        },
        "scale": {
            "name": "scale",
            "description": "Scales a number",
            "parameters": [{"name": "x", "type": "number", "required": True}, {"name": "factor", "type": "number"}],
            "handler": "watch_impl:scale",
        },
    }
    return {
        "id": tool_id,
        "name": tool_id.title(),
        "version": version,
        "description": f"The {tool_id} tool",
        "capabilities": [known[name] for name in capabilities],
        **extra,
    }


def write(path: Path, document: Any) -> Path:
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "watch_impl.py").write_text(IMPL)
    return tmp_path


def served(deck: Deck) -> dict[str, str | None]:
    return {tool.name: tool.version for tool in deck.tools}


def test_load_serves_every_file_and_skips_a_broken_one(folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(folder / "calc.json", definition())
    (folder / "broken.json").write_text('{"id": "broken",')
    (folder / ".hidden.json").write_text("not even looked at")
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    with caplog.at_level(logging.ERROR, "tooldeck.manifest"):
        problems = watcher.load()
    assert served(deck) == {"calc.add": "1.0.0"}
    assert [str(p) for p in problems] == [
        f"{folder / 'broken.json'}: $: not valid JSON: unexpected end of data at line 1, column 17"
    ]
    assert caplog.messages == [str(problems[0])]
    assert watcher.files == {str(folder / "calc.json"): "calc"}


def test_a_change_upgrades_and_a_broken_or_refused_change_keeps_the_old_version(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(folder / "calc.json", definition())
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    watcher.load()
    write(path, definition(version="1.1.0", capabilities=("add", "scale")))
    assert watcher.update([str(path)], []) == []
    assert served(deck) == {"calc.add": "1.1.0", "calc.scale": "1.1.0"}

    path.write_text('{"id": "calc", "version": 2')  # a half-written save
    with caplog.at_level(logging.ERROR, "tooldeck.manifest"):
        problems = watcher.update([str(path)], [])
    assert len(problems) == 1 and problems[0].path == "$"
    assert caplog.messages[-1].endswith("(still serving calc@1.1.0)")
    assert served(deck) == {"calc.add": "1.1.0", "calc.scale": "1.1.0"}

    write(path, definition(version="1.2.0", capabilities=("add",)))  # a removed capability needs a major bump
    problems = watcher.update([str(path)], [])
    assert [(p.path, p.message) for p in problems] == [
        (
            "$.version",
            "1.1.0 -> 1.2.0 is a minor bump, but capability 'scale' removed ($.capabilities[1]) needs a "
            "major one (2.0.0)",
        )
    ]
    assert served(deck) == {"calc.add": "1.1.0", "calc.scale": "1.1.0"}

    write(path, definition(version="2.0.0", capabilities=("add",)))
    assert watcher.update([str(path)], []) == []
    assert served(deck) == {"calc.add": "2.0.0"}


def test_a_deleted_file_unregisters_and_a_renamed_one_does_not(folder: Path) -> None:
    calc = write(folder / "calc.json", definition())
    other = write(folder / "other.yaml", definition("other"))
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    watcher.load()
    assert set(served(deck)) == {"calc.add", "other.add"}

    renamed = folder / "calculator.json"
    calc.rename(renamed)
    assert watcher.update([str(renamed)], [str(calc)]) == []
    assert set(served(deck)) == {"calc.add", "other.add"}
    assert watcher.files == {str(renamed): "calc", str(other): "other"}

    other.unlink()
    assert watcher.update([], [str(other)]) == []
    assert set(served(deck)) == {"calc.add"}


def test_in_one_batch_a_bad_file_does_not_hold_back_the_good_ones(folder: Path) -> None:
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    good = write(folder / "good.json", definition("good"))
    clash = write(folder / "clash.json", definition("good", version="9.0.0"))  # the same id from a second file
    bad = write(folder / "bad.json", {**definition("bad"), "securityLevel": 11})
    problems = watcher.update([str(bad), str(clash), str(good)], [])
    # Two files with one id: the first by name (clash.json) is served, the other is refused.
    assert sorted((Path(p.file).name, p.path) for p in problems) == [
        ("bad.json", "$.securityLevel"),
        ("good.json", "$.id"),
    ]
    assert served(deck) == {"good.add": "9.0.0"}
    problems = watcher.update([str(good)], [])  # a later change to the refused file: still refused
    assert [p.message for p in problems] == [f"id 'good' is already served from {clash}"]


def test_a_file_created_and_deleted_in_one_batch_changes_nothing(folder: Path) -> None:
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    assert watcher.update([str(folder / "gone.json")], []) == []
    assert served(deck) == {}


def test_refresh_takes_each_path_as_the_directory_holds_it(folder: Path) -> None:
    path = write(folder / "calc.json", definition())
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    watcher.load()
    path.unlink()  # deleted and written again before the batch is looked at: a change, not a deletion
    write(path, definition(version="1.1.0", capabilities=("add", "scale")))
    assert watcher.refresh([str(path)]) == []
    assert served(deck) == {"calc.add": "1.1.0", "calc.scale": "1.1.0"}
    path.unlink()
    assert watcher.refresh([str(path)]) == []
    assert served(deck) == {}


def test_an_id_deleted_and_added_back_lower_keeps_its_history(folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(folder / "calc.json", definition(version="2.0.0", securityLevel=9))
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    watcher.load()
    path.unlink()
    watcher.refresh([str(path)])
    assert served(deck) == {}
    write(folder / "calc-again.json", definition(version="0.0.1", securityLevel=0))  # under another name, too
    with caplog.at_level(logging.ERROR, "tooldeck.manifest"):
        problems = watcher.refresh([str(folder / "calc-again.json")])
    assert (
        [str(p) for p in problems]
        == caplog.messages
        == [
            f"{folder / 'calc-again.json'}: $.version: 2.0.0 -> 0.0.1 is a lower version: calc@2.0.0 was served until it "
            "was unregistered, and an id keeps its history across that (only rollback goes back)"
        ]
    )
    assert served(deck) == {}
    write(folder / "calc-again.json", definition(version="2.0.0", securityLevel=9))  # what it was: welcome back
    assert watcher.refresh([str(folder / "calc-again.json")]) == []
    assert served(deck) == {"calc.add": "2.0.0"}


SECRET = "hunter2-s3cr3t"


def test_a_link_out_of_the_directory_is_refused_and_no_file_is_ever_echoed(
    folder: Path, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shadow = elsewhere / "shadow"
    shadow.write_text("".join(f"user{n}:$6${SECRET}:19000:0:99999:7:::\n" for n in range(20)))
    write(elsewhere / "calc.json", definition())
    os.symlink(shadow, folder / "shadow.yaml")
    os.symlink(elsewhere / "calc.json", folder / "calc.json")
    (folder / "env.yaml").write_text(f"PASSWORD: {SECRET}\nid: {SECRET}\n")
    deck = Deck("watched")
    with caplog.at_level(logging.DEBUG, "tooldeck"):
        problems = DirectoryWatcher(deck.manager, folder).load()
    assert served(deck) == {}
    assert sorted((Path(p.file).name, p.path, p.message) for p in problems) == [
        ("calc.json", "$", "leads outside the directory (a symbolic link); only files inside the watched directory "
                           "are read"),
        ("env.yaml", "$", "missing required property 'capabilities'"),
        ("env.yaml", "$", "missing required property 'description'"),
        ("env.yaml", "$", "missing required property 'name'"),
        ("env.yaml", "$", "missing required property 'version'"),
        ("env.yaml", "$", "unexpected property at key 1 of 2 (a name the format does not have, not repeated here)"),
        ("shadow.yaml", "$", "leads outside the directory (a symbolic link); only files inside the watched "
                             "directory are read"),
    ]  # fmt: skip
    logged = "\n".join(caplog.messages)
    assert SECRET not in logged and "PASSWORD" not in logged and "user1" not in logged


def test_a_change_to_a_command_s_script_reads_its_definition_again(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = folder / "answer.py"
    script.write_text(f"#!{sys.executable}\nprint(1)\n")
    script.chmod(0o755)
    path = write(folder / "calc.json", definition(handler={"command": ["./answer.py"]}, capabilities=("scale",)))
    document = orjson.loads(path.read_bytes())
    del document["capabilities"][0]["handler"]
    write(path, document)
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    assert watcher.load() == []
    assert watcher.named == {str(script): {str(path)}}
    script.write_text(f"#!{sys.executable}\nprint(2)\n")
    with caplog.at_level(logging.ERROR, "tooldeck.manifest"):
        (problem,) = watcher.refresh([str(script)])
    assert problem.file == str(path) and problem.path == "$.version"
    assert problem.message.startswith("calc@1.0.0 was served with digest sha256:")
    assert caplog.messages[-1].endswith("(still serving calc@1.0.0)")
    write(path, {**document, "version": "1.0.1"})
    assert watcher.refresh([str(path)]) == []
    assert deck.manager.get("calc").version == "1.0.1"


async def test_the_watcher_goes_on_after_a_batch_fails(
    folder: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deck = Deck("watched")
    watcher = DirectoryWatcher(deck.manager, folder)
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    deck.tools.subscribe(lambda: loop.call_soon_threadsafe(changed.set))
    read = watcher.read
    failures: list[list[str]] = []

    def fail_once(paths: list[str]) -> Any:
        if not failures:
            failures.append(paths)
            raise RuntimeError("a bug")
        return read(paths)

    monkeypatch.setattr(watcher, "read", fail_once)
    task = asyncio.create_task(watcher.watch())
    try:
        for version in range(10):  # each write a new version, until the watcher (started meanwhile) applies one
            write(folder / "calc.json", definition(version=f"1.0.{version}"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 2.0)
            if changed.is_set():
                break
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert failures and "calc.add" in served(deck)
    assert any(m.startswith(f"watching {folder}: a batch of 1 changed files was not applied (RuntimeError)")
               for m in caplog.messages)  # fmt: skip


# --- over stdio, with the OS's file events ------------------------------------------------------------------------


def test_serve_watch_follows_the_directory_over_stdio(folder: Path) -> None:
    path = write(folder / "calc.json", definition())
    with StdioServer("serve", str(folder), "--watch") as server:  # changes are logged at the default level
        server.initialize()
        names = [t["name"] for t in server.request("tools/list")["result"]["tools"]]
        assert names == ["calc.add"]

        upgraded = definition(version="1.1.0", capabilities=("add", "scale"))
        changed = _until_list_changed(server, lambda: write(path, upgraded))
        assert changed["method"] == "notifications/tools/list_changed"
        tools = server.request("tools/list")["result"]["tools"]
        assert [(t["name"], t["_meta"]["tooldeck/version"]) for t in tools] == [
            ("calc.add", "1.1.0"),
            ("calc.scale", "1.1.0"),
        ]
        reply = server.request("tools/call", {"name": "calc.scale", "arguments": {"x": 21}})
        assert reply["result"]["content"] == [{"type": "text", "text": '{"result":42}'}]

        path.write_text("{")  # broken: logged, and 1.1.0 keeps serving
        logged = server.wait_for_stderr("(still serving calc@1.1.0)")
        assert (
            f"{path}: $: not valid JSON: unexpected end of data at line 1, column 2 (still serving calc@1.1.0)"
            in logged
        )
        reply = server.request("tools/call", {"name": "calc.add", "arguments": {"a": 1, "b": 2}})
        assert reply["result"]["structuredContent"] == {"result": 3}

        _until_list_changed(server, path.unlink)
        assert server.request("tools/list")["result"]["tools"] == []
        server.wait_for_stderr("tool definition calc: unregistered 1.1.0")


def _until_list_changed(server: StdioServer, change: Any, attempts: int = 5) -> Any:
    """Make ``change`` and wait for list_changed. The watcher starts watching moments after the server starts, so a
    change made before that is not seen: it is made again (a no-op for the manager when it was applied)."""
    for _ in range(attempts):
        try:
            change()
        except FileNotFoundError:
            pass  # a deletion that already happened
        try:
            message = server.read(timeout=2.0)
        except TimeoutError:
            continue
        assert message.get("method") == "notifications/tools/list_changed", message
        return message
    raise AssertionError(f"no list_changed; stderr: {server.stderr_so_far()}")


def test_serve_watch_needs_a_directory(folder: Path) -> None:
    path = write(folder / "calc.json", definition())
    with StdioServer("serve", str(path), "--watch") as server:
        assert server.wait() == 2
        assert server.stderr_so_far() == (
            f"tooldeck: {path}: is a file; --watch takes a directory of tool definition files (.json, .yaml, .yml)\n"
        )


def test_yaml_and_json_are_watched_alike(folder: Path) -> None:
    (folder / "calc.yaml").write_text(
        textwrap.dedent(
            """\
            id: calc
            name: Calc
            version: 1.0.0
            description: The calc tool
            capabilities:
              - name: add
                description: Adds two numbers
                parameters:
                  - {name: a, type: number, required: true}
                  - {name: b, type: number, required: true}
                return: {schema: {type: object, properties: {result: {type: number}}}}
                handler: watch_impl:add
            """
        )
    )
    deck = Deck("watched")
    DirectoryWatcher(deck.manager, folder).load()
    assert served(deck) == {"calc.add": "1.0.0"}
    assert deck.manager.get("calc").digest == digest(definition())  # the same definition as the JSON one


def test_serve_watch_over_http_announces_on_the_get_stream(folder: Path) -> None:
    import threading

    from http_client import HttpClient, serve_http

    path = write(folder / "calc.json", definition())
    upgraded = definition(version="1.1.0", capabilities=("add", "scale"))
    with serve_http(str(folder), "--watch") as url, HttpClient(url) as http:
        session = http.initialize()
        with http.stream(method="GET", session=session) as get:
            assert get.status_code == 200
            stop = threading.Event()

            def keep_saving() -> None:  # until the watcher (which starts moments after the server) has seen it
                while not stop.is_set():
                    write(path, upgraded)
                    stop.wait(0.5)

            saver = threading.Thread(target=keep_saving)
            saver.start()
            try:
                note = next(get.messages())
            finally:
                stop.set()
                saver.join()
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        with http.stream({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session=session) as listed:
            (reply,) = list(listed.messages())
        assert [t["name"] for t in reply["result"]["tools"]] == ["calc.add", "calc.scale"]


# --- what a watched directory may hold, over stdio with the OS's file events ----------------------------------------


def _watching(server: StdioServer, folder: Path) -> None:
    """Start the session and return once the watcher is seen applying a change (a probe definition)."""
    server.initialize()
    _until_list_changed(server, lambda: write(folder / "probe.json", definition("probe")))


def _names(server: StdioServer) -> list[tuple[str, str]]:
    tools = server.request("tools/list")["result"]["tools"]
    return sorted((t["name"], t["_meta"]["tooldeck/version"]) for t in tools)


def test_serve_watch_a_file_deleted_and_recreated_in_one_batch_stays_served(folder: Path) -> None:
    path = write(folder / "calc.json", definition())
    upgraded = orjson.dumps(definition(version="1.1.0", capabilities=("add", "scale")))
    with StdioServer("serve", str(folder), "--watch") as server:
        _watching(server, folder)

        def save_as_vim_does() -> None:  # the old file moved away, the new one written: one batch of events
            path.rename(folder / "calc.json~")
            path.write_bytes(upgraded)

        save_as_vim_does()
        assert server.read(timeout=10.0)["method"] == "notifications/tools/list_changed"
        server.wait_for_stderr("tool definition calc: upgraded 1.0.0 -> 1.1.0")
        assert _names(server) == [("calc.add", "1.1.0"), ("calc.scale", "1.1.0"), ("probe.add", "1.0.0")]

        path.unlink()  # rm + cp of the same version: nothing changes, and nothing is announced
        path.write_bytes(upgraded)
        write(folder / "probe.json", definition("probe", version="1.0.1"))  # a change after it, to wait on
        assert server.read(timeout=10.0)["method"] == "notifications/tools/list_changed"
        assert _names(server) == [("calc.add", "1.1.0"), ("calc.scale", "1.1.0"), ("probe.add", "1.0.1")]
        assert "unregistered" not in server.stderr_so_far()


def test_serve_watch_a_fifo_is_refused_without_waiting_on_it(folder: Path) -> None:
    with StdioServer("serve", str(folder), "--watch") as server:
        _watching(server, folder)
        os.mkfifo(folder / "pipe.json")  # no writer will ever open it: reading it would wait for ever
        logged = server.wait_for_stderr("pipe.json")
        assert (
            f"{folder / 'pipe.json'}: $: is a named pipe (FIFO), not a regular file; only regular files are " in logged
        )
        write(folder / "calc.json", definition())  # the watcher and the server still work
        assert server.read(timeout=10.0)["method"] == "notifications/tools/list_changed"
        assert _names(server) == [("calc.add", "1.0.0"), ("probe.add", "1.0.0")]


def test_serve_watch_a_symlink_to_dev_zero_is_refused_and_the_watcher_lives_on(folder: Path) -> None:
    with StdioServer("serve", str(folder), "--watch") as server:
        _watching(server, folder)
        os.symlink("/dev/zero", folder / "zero.json")
        logged = server.wait_for_stderr("zero.json")
        assert f"{folder / 'zero.json'}: $: leads outside the directory" in logged
        write(folder / "calc.json", definition())
        assert server.read(timeout=10.0)["method"] == "notifications/tools/list_changed"
        assert _names(server) == [("calc.add", "1.0.0"), ("probe.add", "1.0.0")]


def alias_bomb(levels: int = 8) -> str:
    """A YAML document of a few hundred bytes whose aliases expand to 10**levels leaves."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def test_serve_watch_a_yaml_alias_bomb_is_refused_and_the_server_keeps_answering(folder: Path) -> None:
    bomb = alias_bomb()
    assert len(bomb) < 600
    with StdioServer("serve", str(folder), "--watch") as server:
        _watching(server, folder)
        (folder / "bomb.yaml").write_text(bomb)
        logged = server.wait_for_stderr("bomb.yaml", timeout=5.0)
        assert (
            f"{folder / 'bomb.yaml'}: $: YAML anchors and aliases are not accepted (line 1, column 5): write the "
            "value out where it is used" in logged
        )
        started = time.monotonic()
        assert _names(server) == [("probe.add", "1.0.0")]
        assert time.monotonic() - started < 2.0
