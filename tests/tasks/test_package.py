"""The tasks package: its exported names, its place in the layers, and what importing it costs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tooldeck.tasks

SRC = Path(__file__).resolve().parents[2] / "src" / "tooldeck"


def test_exported_names() -> None:
    assert sorted(tooldeck.tasks.__all__) == [
        "MemoryTaskStore",
        "PollInterval",
        "STATUSES",
        "SqliteTaskStore",
        "TERMINAL",
        "TaskRecord",
        "TaskStore",
        "TaskStoreError",
        "UnknownCursorError",
        "can_move",
        "new_task_id",
    ]
    for name in tooldeck.tasks.__all__:
        assert getattr(tooldeck.tasks, name) is not None


def _imported_modules(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_tasks_never_import_the_server_or_the_transports() -> None:
    for path in (SRC / "tasks").glob("*.py"):
        for module in _imported_modules(path, top_level_only=False):
            assert not module.lstrip(".").startswith(("server", "transports")), f"{path.name} imports {module}"
            assert not module.startswith(("tooldeck.server", "tooldeck.transports")), f"{path.name} imports {module}"


def test_only_sqlite_py_imports_sqlite3_and_record_and_store_import_no_asyncio() -> None:
    for path in (SRC / "tasks").glob("*.py"):
        modules = _imported_modules(path, top_level_only=False)
        assert ("sqlite3" in modules) is (path.name == "sqlite.py"), path.name
        if path.name in ("record.py", "store.py"):
            assert "asyncio" not in _imported_modules(path, top_level_only=True), path.name


def test_importing_the_package_loads_neither_asyncio_nor_sqlite3() -> None:
    code = "import sys, tooldeck.tasks; print(sorted(m for m in ('asyncio', 'sqlite3', 'secrets') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
