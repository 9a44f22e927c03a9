"""Tests for manifest/reading.py: what a definition file may be (a regular file, inside its directory, at most
MAX_FILE_BYTES), YAML without anchors or aliases, a bounded depth, and refusals that never repeat the file's content —
each over real files, pipes, sockets, devices and symbolic links."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from seeds import seed_calculator
from tooldeck.manifest.definition import load_definition
from tooldeck.manifest.problems import DefinitionError
from tooldeck.manifest.reading import MAX_DEPTH, MAX_FILE_BYTES, read_bytes, read_document


def refusal(path: Path, **options: object) -> str:
    with pytest.raises(DefinitionError) as caught:
        load_definition(path, path.name, **options)  # type: ignore[arg-type]
    (problem,) = caught.value.problems
    return f"{problem.path}: {problem.message}"


# --- what a file may be ---------------------------------------------------------------------------------------------


def padded(size: int) -> bytes:
    """The seed calculator as JSON, padded with spaces to exactly ``size`` bytes."""
    data = json.dumps(seed_calculator()).encode()
    return data + b" " * (size - len(data))


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "calc.json"
    path.write_bytes(padded(MAX_FILE_BYTES))
    assert load_definition(path).id == "calculator"
    path.write_bytes(padded(MAX_FILE_BYTES + 1))
    assert refusal(path) == f"$: is larger than {MAX_FILE_BYTES} bytes, the limit for a definition file"


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock.json"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        yield path


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")  # no writer: opening it to read would wait for ever
    assert (
        refusal(tmp_path / "pipe.json") == "$: is a named pipe (FIFO), not a regular file; only regular files are read"
    )


def test_a_socket_is_refused(unix_socket: Path) -> None:
    assert refusal(unix_socket) == "$: is a socket, not a regular file; only regular files are read"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_is_refused_unread(tmp_path: Path) -> None:
    os.mknod(tmp_path / "zero.json", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's own numbers
    assert (
        refusal(tmp_path / "zero.json") == "$: is a character device, not a regular file; only regular files are read"
    )


def test_a_directory_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "dir.json").mkdir()
    assert refusal(tmp_path / "dir.json") == "$: is a directory, not a definition file"
    assert refusal(tmp_path / "gone.json") == "$: no such file"
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.json")
    assert refusal(tmp_path / "dangling.json") == "$: no such file"


# --- inside the directory -------------------------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A valid definition in a directory of its own, beside the served one."""
    (tmp_path / "other").mkdir()
    path = tmp_path / "other" / "calc.json"
    path.write_text(json.dumps(seed_calculator()))
    (tmp_path / "served").mkdir()
    return path


def test_a_link_out_of_the_directory_is_refused(tmp_path: Path, outside: Path) -> None:
    served = tmp_path / "served"
    os.symlink(outside, served / "calc.json")
    os.symlink("../other/calc.json", served / "relative.json")
    os.symlink("/dev/zero", served / "zero.json")
    for name in ("calc.json", "relative.json", "zero.json"):
        assert refusal(served / name, within=served) == (
            "$: leads outside the directory (a symbolic link); only files inside the watched directory are read"
        )
    assert load_definition(served / "calc.json").id == "calculator"  # named on its own, a link is followed


def test_a_link_inside_the_directory_is_followed(tmp_path: Path, outside: Path) -> None:
    served = tmp_path / "served"
    (served / "versions").mkdir()
    (served / "versions" / "calc-1.json").write_text(outside.read_text())
    os.symlink("versions/calc-1.json", served / "calc.json")
    assert load_definition(served / "calc.json", within=served).id == "calculator"
    os.symlink(served, tmp_path / "alias")  # the directory itself named through a link
    assert load_definition(tmp_path / "alias" / "calc.json", within=tmp_path / "alias").id == "calculator"


def test_a_link_to_the_directory_itself_is_refused(tmp_path: Path) -> None:
    os.symlink(".", tmp_path / "self.json")
    assert refusal(tmp_path / "self.json", within=tmp_path).startswith("$: leads outside the directory")


# --- YAML: no anchors, no aliases; a bounded depth ------------------------------------------------------------------


def alias_bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("id: &id calc\n", "line 1, column 5"),  # an anchor alone is refused too: nothing can use it
        ("base: {a: 1}\nmore:\n  <<: *base\n", "line 3, column 7"),  # an alias of nothing is no better
        (alias_bomb(9), "line 1, column 5"),  # 10**9 leaves in a few hundred bytes (last: should the check ever
        # go, the cases above fail first, and this one would run for minutes)
    ],
)
def test_yaml_anchors_and_aliases_are_refused_before_anything_is_built(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "calc.yaml").write_text(text)
    assert refusal(tmp_path / "calc.yaml") == (
        f"$: YAML anchors and aliases are not accepted ({where}): write the value out where it is used"
    )


def test_yaml_nested_past_the_depth_limit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "deep.yaml").write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert read_document(str(tmp_path / "deep.yaml"), "deep.yaml") == _nested(MAX_DEPTH)
    (tmp_path / "deep.yaml").write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert (
        refusal(tmp_path / "deep.yaml")
        == f"$: nested more than {MAX_DEPTH} levels deep (line 1, column {MAX_DEPTH + 1})"
    )


def test_json_nested_past_the_depth_limit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert read_document(str(tmp_path / "deep.json"), "deep.json") == _nested(MAX_DEPTH)
    (tmp_path / "deep.json").write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert refusal(tmp_path / "deep.json") == f"$: nested more than {MAX_DEPTH} levels deep"


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


# --- refusals never repeat the file -------------------------------------------------------------------------------

SECRET = "hunter2-s3cr3t"


def with_return_schema(schema: dict[str, object]) -> dict[str, object]:
    document = seed_calculator()
    document["capabilities"][0]["return"] = {"schema": schema}
    return document


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("env.yaml", f"PASSWORD: {SECRET}\nAPI_KEY: {SECRET}\n"),
        ("shadow.yaml", "".join(f"user{n}:$6${SECRET}:19000:0:99999:7:::\n" for n in range(20))),
        ("keys.yaml", f"{SECRET}: 1\n"),
        ("list.yaml", f"- {SECRET}\n- {SECRET}\n"),
        ("tag.yaml", f"!{SECRET} x\n"),
        ("escape.yaml", f'a: "{SECRET}\\q"\n'),
        ("broken.yaml", f"a: [{SECRET}\n"),
        ("numbers.yaml", f"{{1: {SECRET}}}\n"),
        ("values.json", json.dumps({**seed_calculator(), "version": SECRET, "securityLevel": SECRET})),
        ("keys.json", json.dumps({**seed_calculator(), SECRET: SECRET})),
        ("id.json", json.dumps({**seed_calculator(), "id": f"{SECRET} !"})),
        ("schema.json", json.dumps(with_return_schema({"type": SECRET, "$schema": SECRET}))),
        ("text.json", f"{SECRET}\n"),
    ],
)
def test_no_refusal_repeats_what_the_file_holds(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    assert caught.value.problems
    assert SECRET not in str(caught.value) and "PASSWORD" not in str(caught.value)
    assert "user1" not in str(caught.value)


def test_read_bytes_of_a_plain_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"{}")
    assert read_bytes(str(tmp_path / "a.json"), "a.json", within=str(tmp_path)) == b"{}"
