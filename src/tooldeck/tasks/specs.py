"""Where a deck's tasks are kept, by spec: ``memory`` or ``sqlite:PATH`` (``tooldeck serve --task-store``), checked
before anything is opened; and where ``tooldeck serve --http`` keeps them when told nothing."""

from __future__ import annotations

from .memory import MemoryTaskStore
from .store import TaskStore


def check_store_spec(spec: str) -> str:
    """``memory`` or ``sqlite:PATH``; anything else raises ValueError saying what is accepted."""
    if spec == "memory":
        return spec
    kind, sep, path = spec.partition(":")
    if kind != "sqlite" or not sep or not path:
        raise ValueError(f"task store {spec!r}: use 'memory' or 'sqlite:PATH'")
    import os

    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"task store {spec!r}: the directory {directory} does not exist")
    if os.path.isdir(path):
        raise ValueError(
            f"task store {spec!r}: {path} is a directory; give the database file, e.g. sqlite:{path}/tasks.sqlite3"
        )
    return spec


async def open_store(spec: str) -> TaskStore:
    if check_store_spec(spec) == "memory":
        return MemoryTaskStore()
    from ..tasks.sqlite import SqliteTaskStore

    return await SqliteTaskStore.open(spec.partition(":")[2])


def default_store_path(deck_name: str) -> str:
    """Where `tooldeck serve --http` keeps tasks by default: $XDG_STATE_HOME/tooldeck/<deck>-tasks.sqlite3."""
    import os
    import re

    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    directory = os.path.join(state, "tooldeck")
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, re.sub(r"[^A-Za-z0-9_.-]", "_", deck_name) + "-tasks.sqlite3")
