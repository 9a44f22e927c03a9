"""The resources and prompts packages are on the server's start-up path and sit beside tools in the layers."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import modules_added_by

SRC = Path(__file__).resolve().parents[2] / "src" / "tooldeck"

# Nothing here should load an event loop, the validator, inspect (ast, dis, tokenize) or a URL library.
NOT_IMPORTED = ("asyncio", "inspect", "dataclasses", "jsonschema_rs", "urllib.parse", "pydantic", "email")


def test_importing_the_packages_loads_nothing_heavy() -> None:
    added = modules_added_by(
        "import tooldeck.resources.registry, tooldeck.resources.contents, tooldeck.resources.completion\n"
        "import tooldeck.prompts.registry, tooldeck.prompts.messages",
        preload="import orjson",
        forget=NOT_IMPORTED,
    )
    assert [name for name in NOT_IMPORTED if name in added] == []


def _imported_packages(path: Path) -> set[str]:
    """``tooldeck.<package>.<module>`` names imported by a module (relative imports resolved)."""
    found = set()
    package = ["tooldeck", *path.relative_to(SRC).parts[:-1]]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module:
            base = package[: len(package) - node.level + 1]
            found.add(".".join([*base, node.module]))
    return found


def test_layering() -> None:
    allowed_below = {"tooldeck.protocol", "tooldeck.schema", "tooldeck.tools.content", "tooldeck.tools.tool"}
    shared = {"tooldeck.resources.arguments", "tooldeck.resources.completion"}
    problems = []
    for package in ("resources", "prompts"):
        for path in sorted((SRC / package).glob("*.py")):
            for name in _imported_packages(path):
                own = name.startswith(f"tooldeck.{package}.")
                lower = any(name == low or name.startswith(low + ".") for low in allowed_below)
                if not (own or lower or (package == "prompts" and name in shared)):
                    problems.append(f"{package}/{path.name} imports {name}")
    for name in shared:  # the shared modules import nothing else from resources, so prompts pulls in no more
        path = SRC / "resources" / f"{name.rsplit('.', 1)[1]}.py"
        problems += [f"{path.name} imports {n}" for n in _imported_packages(path) if n.startswith("tooldeck.resources")]
    assert problems == []
