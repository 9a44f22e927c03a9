"""DirectoryWatcher: batches of file changes applied through the manager (broken and refused files keep their previous
version serving), and `tooldeck serve DIR --watch` following a real directory over stdio."""

from __future__ import annotations

import logging
import textwrap
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
