"""The four servers under test: how to start each one, and which versions it runs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SERVERS_DIR = BENCH / "servers"
VENVS = BENCH / ".venvs"

VERSION_PROBE = """
import importlib.metadata as m, json, platform
versions = {"python": platform.python_version()}
for name in %r:
    try:
        versions[name] = m.version(name)
    except m.PackageNotFoundError:
        versions[name] = None
print(json.dumps(versions))
"""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: tuple[str, ...]  # over stdio
    http_argv: tuple[str, ...]  # over Streamable HTTP at http://127.0.0.1:{port}/mcp, answering with JSON
    python: Path  # the interpreter of the server's venv, for version probes
    packages: tuple[str, ...]  # distributions whose versions the report names (absent ones are left out)
    tasks: bool = False  # implements 2025-11-25 tasks: gets the task round-trip row (stdio)
    modern: bool = False  # serves 2026-07-28 (stateless) requests: gets the modern rows (stdio and HTTP)
    source: Path | None = None  # a directory the server imports its package from first (PYTHONPATH), see run.py --src

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The server's environment: `base`, with `source` on PYTHONPATH when given."""
        return {**base, "PYTHONPATH": str(self.source)} if self.source is not None else dict(base)

    def versions(self) -> dict[str, str | None]:
        try:
            out = subprocess.run(
                [str(self.python), "-c", VERSION_PROBE % (self.packages,)],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
            return json.loads(out)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return {"error": str(exc)}


TOOLDECK_HTTP = ("--http", "--host", "127.0.0.1", "--port", "{port}", "--json-response")


def project_python() -> Path:
    return ROOT / ".venv" / "bin" / "python"


SPECS = (
    ServerSpec(
        "tooldeck",
        (str(ROOT / ".venv/bin/tooldeck"), "serve", str(SERVERS_DIR / "tooldeck_server.py")),
        (str(ROOT / ".venv/bin/tooldeck"), "serve", str(SERVERS_DIR / "tooldeck_server.py"), *TOOLDECK_HTTP),
        project_python(),
        ("tooldeck", "orjson", "jsonschema-rs", "uvicorn", "uvloop", "httptools"),
        tasks=True,
        modern=True,
    ),
    ServerSpec(
        "mcp",
        (str(VENVS / "mcp/bin/python"), str(SERVERS_DIR / "mcp_server.py")),
        (str(VENVS / "mcp/bin/python"), str(SERVERS_DIR / "mcp_server.py"), "--http", "{port}"),
        VENVS / "mcp/bin/python",
        ("mcp", "pydantic", "anyio", "starlette", "uvicorn", "h11", "uvloop", "httptools"),
        modern=True,  # mcp 2.3.0: serve_dual_era_loop (stdio), _streamable_http_modern (HTTP)
    ),
    ServerSpec(
        "fastmcp",
        (str(VENVS / "fastmcp/bin/python"), str(SERVERS_DIR / "fastmcp_server.py")),
        (str(VENVS / "fastmcp/bin/python"), str(SERVERS_DIR / "fastmcp_server.py"), "--http", "{port}"),
        VENVS / "fastmcp/bin/python",
        ("fastmcp", "mcp", "pydantic", "anyio", "starlette", "uvicorn", "h11", "uvloop", "httptools"),
        modern=True,  # through the mcp 2.3.0 it depends on, as mcp's own server
    ),
    ServerSpec(
        "floor",
        (str(project_python()), str(SERVERS_DIR / "floor_server.py")),
        (str(project_python()), str(SERVERS_DIR / "floor_http_server.py"), "{port}"),
        project_python(),
        ("orjson", "uvicorn", "uvloop", "httptools"),
    ),
)
NAMES = tuple(spec.name for spec in SPECS)


def tooldeck_git() -> dict[str, str | bool]:
    """The commit being measured, and whether src/ has uncommitted changes on top of it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"sha": git("rev-parse", "--short=12", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "src"))}
