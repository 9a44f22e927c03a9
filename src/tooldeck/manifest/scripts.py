"""The files a command handler names — its program given as a path, and each argument naming a file in its working
directory — and their SHA-256 digests: part of the definition's digest (definition.py), and checked again before each
call (command.py), so that changing a script is a change the manager sees, not one made under a served version.

A program found on the PATH is not covered (it is the system's, not the definition's), nor is what a script reads or
runs by itself.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import Any

READ_CHUNK = 64 * 1024


def command_files(document: dict[str, Any], base_dir: str) -> dict[str, str]:
    """The files the command handlers of ``document`` name, relative to ``base_dir``, each with its SHA-256 (or why
    it has none: ``missing``, ``not a regular file``): the program when given as a path, and each argument that names
    a file in the command's working directory."""
    base_dir = os.path.abspath(base_dir)
    handlers = [document.get("handler"), *(capability.get("handler") for capability in document["capabilities"])]
    files: dict[str, str] = {}
    for handler in handlers:
        if not isinstance(handler, dict) or not isinstance(handler.get("command"), list):
            continue
        cwd = handler.get("cwd")
        directory = os.path.normpath(os.path.join(base_dir, cwd)) if isinstance(cwd, str) else base_dir
        for path in _candidates(handler["command"], directory, base_dir):
            files[os.path.relpath(path, base_dir)] = file_digest(path)
    return files


def _candidates(command: list[Any], cwd: str, base_dir: str) -> list[str]:
    """The absolute paths of the files ``command`` names (see the module's first lines)."""
    paths = []
    for position, word in enumerate(command):
        if not isinstance(word, str) or not word:
            continue
        if position == 0:
            if "/" in word:
                paths.append(os.path.normpath(os.path.join(base_dir, word)))
        elif not word.startswith("-") and os.path.isfile(os.path.join(cwd, word)):
            paths.append(os.path.normpath(os.path.join(cwd, word)))
    return paths


def named_files(command: list[str], cwd: str, base_dir: str, files: dict[str, str]) -> list[tuple[str, str]]:
    """The files ``command`` names with the digest ``files`` (a definition's) pinned for each: what a call checks."""
    named = []
    for path in _candidates(command, cwd, base_dir):
        pinned = files.get(os.path.relpath(path, base_dir))
        if pinned is not None:
            named.append((path, pinned))
    return named


def file_digest(path: str) -> str:
    """The SHA-256 of a regular file, read without following it anywhere a regular file is not."""
    try:
        found = os.stat(path)
    except OSError:
        return "missing"
    if not stat.S_ISREG(found.st_mode):
        return "not a regular file"
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(READ_CHUNK):
                sha.update(chunk)
    except OSError:
        return "missing"
    return sha.hexdigest()


def stat_key(path: str) -> tuple[int, ...] | None:
    """What changes when a file is written or replaced (None: it is gone), so a digest is taken again only then."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)
