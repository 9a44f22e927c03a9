"""The resources and prompts packages are on the server's start-up path and sit beside tools in the layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tooldeck"

# Nothing here should load an event loop, the validator, inspect (ast, dis, tokenize) or a URL library.
NOT_IMPORTED = ("asyncio", "inspect", "dataclasses", "jsonschema_rs", "urllib.parse", "pydantic", "email")

SCRIPT = """
import importlib.util, sys, types

# tooldeck/__init__.py imports the whole server; load the subpackages without it.
package = types.ModuleType("tooldeck")
package.__path__ = list(importlib.util.find_spec("tooldeck").submodule_search_locations)
sys.modules["tooldeck"] = package

import orjson  # orjson itself imports some of these today; forget them so that a re-import would show
for name in NOT_IMPORTED:
    sys.modules.pop(name, None)

import tooldeck.resources.registry, tooldeck.resources.contents, tooldeck.resources.completion
import tooldeck.prompts.registry, tooldeck.prompts.messages

print(sorted(name for name in NOT_IMPORTED if name in sys.modules))
"""


def test_importing_the_packages_loads_nothing_heavy() -> None:
    script = f"NOT_IMPORTED = {NOT_IMPORTED!r}\n{SCRIPT}"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert ast.literal_eval(done.stdout) == []


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
