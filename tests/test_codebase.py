"""House rules checked with every test run: lint, format, types, layering and start-up imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "tooldeck"
BIN = Path(sys.executable).parent

# Lower layers never import higher ones (ARCHITECTURE.md). Deck.run() reaches the transports lazily, on purpose.
LAYERS = ["protocol", "schema", "tools", "resources", "prompts", "tasks", "server", "transports"]
ALLOWED_UPWARD = {("server/deck.py", "transports")}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_ruff_lint() -> None:
    done = run(str(BIN / "ruff"), "check", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = run(str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy() -> None:
    done = run(str(BIN / "mypy"), "src/tooldeck")
    assert done.returncode == 0, done.stdout + done.stderr


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module:
            package = path.relative_to(SRC).parts
            base = list(package[: len(package) - node.level])
            found.add((base + node.module.split("."))[0] if base == [] else node.module.split(".")[0])
    return found


def test_lower_layers_never_import_higher_ones() -> None:
    problems = []
    for layer_index, layer in enumerate(LAYERS):
        for path in (SRC / layer).rglob("*.py"):
            relative = str(path.relative_to(SRC))
            for imported in _imports(path):
                upward = imported in LAYERS and LAYERS.index(imported) > layer_index
                if upward and (relative, imported) not in ALLOWED_UPWARD:
                    problems.append(f"{relative} imports {imported}")
    assert problems == []


def test_the_handshake_path_imports_stay_light() -> None:
    # What `tooldeck serve` needs before it can answer initialize: no event loop, no validator, no frameworks.
    code = (
        "import sys, tooldeck.cli, tooldeck.loader, tooldeck.demo, tooldeck.transports.stdio;print(sorted(sys.modules))"
    )
    done = run(sys.executable, "-c", code)
    modules = set(eval(done.stdout))
    heavy = {
        "pydantic",
        "jsonschema",
        "jsonschema_rs",
        "asyncio",
        "ssl",
        "concurrent.futures",
        "email",
        "http",
        "httpx",
        "starlette",
        "uvicorn",
        "anyio",
        "typing_extensions",
    }
    assert not (heavy & modules), heavy & modules
