"""``tooldeck audit verify``: its one-line verdicts, exit codes and JSON, run as a real command."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import orjson

from stdio_client import ROOT, TOOLDECK
from tooldeck.security.audit import FileAuditSink, MemoryAuditSink, line_hash


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOLDECK, "audit", "verify", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def write_trail(tmp_path: Path, records: int, max_bytes: int | None = None) -> Path:
    path = tmp_path / "audit.jsonl"
    sink = FileAuditSink(path, max_bytes=max_bytes, backups=10)
    for n in range(records):
        sink.write({"event": "call", "tool": "deploy", "n": n})
    sink.close()
    return path


def test_an_intact_rotated_trail_given_in_any_order(tmp_path: Path) -> None:
    path = write_trail(tmp_path, 7, max_bytes=300)
    files = sorted(str(p) for p in tmp_path.glob("audit.jsonl*"))
    assert len(files) == 4
    head = line_hash(path.read_bytes().splitlines()[-1])
    done = run(*reversed(files))
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"ok: 7 records in 4 files, chain intact\nhead: {head}\n",
        "",
    )
    done = run("--json", *files)
    assert (done.returncode, orjson.loads(done.stdout)) == (
        0,
        {
            "ok": True,
            "records": 7,
            "files": 4,
            "problem": None,
            "breaks": [],
            "first_seq": 0,
            "head": head,
            "torn": None,
        },
    )


def test_the_first_problem_on_one_line_and_exit_1(tmp_path: Path) -> None:
    path = write_trail(tmp_path, 3)
    lines = path.read_bytes().splitlines()
    path.write_bytes(lines[0] + b"\n" + lines[1].replace(b'"n":1', b'"n":9') + b"\n" + lines[2] + b"\n")
    done = run(str(path))
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == f"{path}:2: record was edited (its hash does not match the next record's prev)\n"


def test_a_torn_last_line_is_noted_and_the_trail_reopened_without_it(tmp_path: Path) -> None:
    path = write_trail(tmp_path, 2)
    path.write_bytes(path.read_bytes()[:-5])  # the writer was killed in the middle of a write
    done = run(str(path))
    assert (done.returncode, done.stdout.splitlines()[0]) == (
        0,
        f"ok: 1 record in 1 file, chain intact; {path}:2: a record cut short by an interrupted write (116 bytes) is not "
        "counted (the server removes it when it reopens the trail)",
    )
    FileAuditSink(path).close()  # the next writer cuts it off, and records that it did
    done = run(str(path))
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "ok: 2 records in 1 file, chain intact")


def test_expect_head_and_allowed_breaks(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = MemoryAuditSink()  # a trail as writers before this one left it after a torn write
    sink.write({"event": "call", "n": 0})
    torn = b'{"seq":1,"prev":"'
    sink.write({"event": "chain-break", "line": 2, "lost_bytes": len(torn),
                "lost_sha256": hashlib.sha256(torn).hexdigest()})  # fmt: skip
    path.write_bytes(sink.lines[0] + b"\n" + torn + b"\n" + sink.lines[1] + b"\n")
    assert run(str(path)).stdout.startswith(f"{path}:2: truncated record (17 bytes) left by an interrupted write;")
    done = run("--allow-breaks", "--expect-head", "f" * 64, str(path))
    assert done.returncode == 1
    assert done.stdout.startswith(f"{path}:3: no record has the expected head {'f' * 64}: ")
    first = line_hash(path.read_bytes().splitlines()[0])
    done = run("--allow-breaks", "--expect-head", first, str(path))
    head = line_hash(path.read_bytes().splitlines()[-1])
    assert (done.returncode, done.stdout) == (
        0,
        f"ok: 2 records in 1 file, chain intact; 1 break allowed: {path}:2\nhead: {head}\n",
    )


def test_an_unreadable_file_is_exit_2_with_one_line(tmp_path: Path) -> None:
    write_trail(tmp_path, 1)
    done = run(str(tmp_path / "audit.jsonl"), str(tmp_path / "audit.jsonl.1"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"tooldeck: {tmp_path / 'audit.jsonl.1'}: cannot read: No such file or directory\n"


def test_the_printed_head_is_what_expect_head_takes(tmp_path: Path) -> None:
    path = write_trail(tmp_path, 3)
    done = run(str(path))
    ok, head = done.stdout.splitlines()
    assert (done.returncode, ok) == (0, "ok: 3 records in 1 file, chain intact")
    assert head == f"head: {line_hash(path.read_bytes().splitlines()[-1])}"
    sink = FileAuditSink(path)  # the trail goes on ...
    sink.write({"event": "call", "tool": "deploy", "n": 3})
    sink.close()
    done = run("--expect-head", head.removeprefix("head: "), str(path))  # ... and still holds the copied head
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "ok: 4 records in 1 file, chain intact")
    assert done.stdout.splitlines()[1] != head


async def test_a_fleet_keeps_one_trail_per_process_and_verify_checks_each(tmp_path: Path) -> None:
    # Two processes of one deck, sharing their backends and one policy: each writes audit.<node>.jsonl, never one
    # chain between two writers; verify takes all the files at once and names the trail that broke.
    from helpers import client
    from tooldeck import Deck
    from tooldeck.security.keys import MemoryKeyRing
    from tooldeck.security.policy import Policy
    from tooldeck.server.backends import Backends

    shared = Backends(shared=True, keys=MemoryKeyRing({"request-state": b"k" * 32, "cursor": b"c" * 32}))
    policy = Policy({"audit": {"file": str(tmp_path / "audit.jsonl")}})
    decks = [Deck("fleet", node_id=node, backends=shared) for node in ("web-1", "web-2")]
    for deck in decks:
        deck.add_tool(lambda: "ok", name="ping")
        deck.apply_policy(policy)
        async with client(deck) as c:
            for _ in range(3):
                await c.call_tool("ping")
        await deck.aclose()
        deck.apply_policy(Policy())  # closes the trail
    files = sorted(str(p) for p in tmp_path.glob("audit.*.jsonl*"))
    assert [Path(f).name for f in files] == ["audit.web-1.jsonl", "audit.web-2.jsonl"]
    done = run(*files)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == f"{files[0]}: ok: 3 records in 1 file, chain intact", done.stdout
    assert lines[2] == f"{files[1]}: ok: 3 records in 1 file, chain intact" and lines[3].startswith(
        f"{files[1]}: head: "
    )
    second = Path(files[1])
    records = second.read_bytes().splitlines()
    second.write_bytes(b"\n".join([records[0], records[2]]) + b"\n")  # a record of web-2's trail removed
    done = run(*files)
    assert done.returncode == 1 and f"{files[1]}:2:" in done.stdout and f"{files[0]}: ok" in done.stdout
    refused = run("--expect-head", "0" * 64, *files)
    assert refused.returncode == 2 and "check each trail with its own head" in refused.stderr
