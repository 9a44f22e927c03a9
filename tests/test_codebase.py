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

# The layers, lowest first (ARCHITECTURE.md). A module may import its own package and lower layers; the feature
# packages share a layer and never import each other; and nothing anywhere forms an import circle.
LAYERS: list[tuple[str, ...]] = [
    ("protocol",),
    ("engine",),  # shared state in Redis: imports only protocol (and redis), so every layer above may use it
    ("schema",),
    ("model",),
    ("tools", "resources", "prompts", "tasks"),
    ("manifest", "security"),
    ("server",),
    ("transports",),
    ("console",),  # the operator console: beside the facade, which turns it on (Deck.use_console)
    ("deck",),
    ("__init__",),  # the public names
    ("loader", "demo", "testing"),  # what the command line serves, and the testing client for users' tests
    ("cli",),
    ("__main__",),
]
MAX_LINES = 500


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_ruff_lint() -> None:
    done = run(str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "scripts")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = run(str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks", "scripts")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", ["definition_mutants.py", "security_mutants.py"])
def test_every_mutation_still_names_text_that_is_in_the_tree(script: str) -> None:
    # The mutation scripts are run by hand; a change that moves the text a mutation changes would leave that check
    # unguarded without anyone noticing, so each mutation's text is looked for here (no tests are run).
    done = run(sys.executable, str(ROOT / "scripts" / script), "--check")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy() -> None:
    done = run(str(BIN / "mypy"), "src/tooldeck")
    assert done.returncode == 0, done.stdout + done.stderr


def module_name(path: Path) -> str:
    parts = ["tooldeck", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {module_name(path): path for path in SRC.rglob("*.py")}
    assert "tooldeck.server.session" in found, f"the source tree moved from {SRC}: every check here would pass empty"
    return found


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """Every tooldeck module ``path`` imports, anywhere in it (module level, in functions, under TYPE_CHECKING),
    relative or absolute; ``from package import module`` counts as importing that module."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:  # an attribute of a module: the module
                name = name.rpartition(".")[0]
            if name.startswith("tooldeck") and name != here:
                found.add(name)
    return found


def layer_of(name: str) -> tuple[int, str]:
    top = name.split(".")[1] if name.count(".") else "__init__"
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index, top
    raise AssertionError(f"{name} is in no layer: add its package to LAYERS")


def test_lower_layers_never_import_higher_ones_and_features_never_import_each_other() -> None:
    known = modules()
    problems = []
    for name, path in sorted(known.items()):
        level, package = layer_of(name)
        for imported in sorted(imports_of(path, known)):
            their_level, their_package = layer_of(imported)
            if their_level > level or (their_level == level and their_package != package):
                problems.append(f"{name} imports {imported}")
    assert problems == []


def test_no_import_circle_anywhere() -> None:
    known = modules()
    graph = {name: imports_of(path, known) for name, path in known.items()}
    circles = [sorted(c) for c in strongly_connected(graph) if len(c) > 1]
    assert circles == []


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the strongly connected components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(sorted(c) for c in strongly_connected(graph) if len(c) > 1) == [["a", "b", "c"]]


def test_the_import_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    known = modules()
    probe = SRC / "server" / "pipeline.py"  # imports relative, absolute-style packages, and under TYPE_CHECKING
    found = imports_of(probe, known)
    assert {"tooldeck.server.context", "tooldeck.tools.call", "tooldeck.protocol.errors"} <= found
    assert "tooldeck.server.workers" in found  # only under TYPE_CHECKING


def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


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
