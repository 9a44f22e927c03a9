"""A directory of tool definition files, served through the manager and followed as it changes.

Each file's changes reach the manager as one batch (the OS's file events, collected by watchfiles): new and changed
files are read, checked and applied together; a deleted file unregisters its definition. A file that becomes
invalid, or whose change the version rules refuse, is reported on one log line per problem (file, JSON path, what)
and its previous version keeps serving; the other files of the batch are applied without it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from .definition import SUFFIXES, Definition, DefinitionError, Problem, definition_files, load_definition
from .manager import ToolManager

log = logging.getLogger("tooldeck.manifest")


class DirectoryWatcher:
    """Serves ``directory``'s definition files through ``manager``: ``load()`` once, then ``await watch()``."""

    def __init__(self, manager: ToolManager, directory: str | os.PathLike[str]) -> None:
        self.manager = manager
        self.directory = os.fspath(directory)
        self.files: dict[str, str] = {}  # path -> id of the definition it serves

    def load(self) -> list[Problem]:
        """Apply every file of the directory; the problems of those that could not be applied (already logged)."""
        return self.update(definition_files(self.directory), ())

    async def watch(self) -> None:
        """Follow the directory until cancelled."""
        import watchfiles

        async for changes in watchfiles.awatch(self.directory, watch_filter=_is_definition, recursive=False):
            changed: set[str] = set()
            deleted: set[str] = set()
            for change, path in changes:
                (deleted if change == watchfiles.Change.deleted else changed).add(self._path(path))
            self.update(sorted(changed - deleted), sorted(deleted))

    def _path(self, path: str) -> str:
        """A file as this watcher names it (in its directory as given), whatever form the OS event had."""
        return os.path.join(self.directory, os.path.basename(path))

    def update(self, changed: Iterable[str], deleted: Iterable[str]) -> list[Problem]:
        """Apply one batch of file changes; returns (and logs) the problems that kept files from being applied."""
        problems: list[Problem] = []
        candidates: dict[str, Definition] = {}  # path -> definition
        deleted = list(deleted)
        for path in changed:
            if not os.path.exists(path):  # created and deleted within one batch
                deleted.append(path)
                continue
            try:
                candidates[path] = load_definition(path)
            except DefinitionError as exc:
                problems.extend(exc.problems)
        owners = {tool_id: path for path, tool_id in self.files.items() if path not in deleted}
        for path, definition in list(candidates.items()):
            owner = owners.get(definition.id)
            if owner is not None and owner != path:
                problems.append(Problem(path, "$.id", f"id {definition.id!r} is already served from {owner}"))
                del candidates[path]
        # A deleted file's definition goes, unless another file of the batch now serves its id.
        gone = {self.files.pop(path) for path in deleted if path in self.files}
        new_ids = {definition.id for definition in candidates.values()}
        remove = sorted(tool_id for tool_id in gone if tool_id not in new_ids and tool_id in self.manager)
        for path in self._apply(candidates, remove, problems):
            self.files[path] = candidates[path].id
        for problem in problems:
            tool_id = candidates[problem.file].id if problem.file in candidates else self.files.get(problem.file)
            served = self.manager.get(tool_id) if tool_id else None
            log.error("%s%s", problem, f" (still serving {served.label})" if served is not None else "")
        return problems

    def _apply(self, candidates: dict[str, Definition], remove: list[str], problems: list[Problem]) -> set[str]:
        """Apply the batch; files the manager refuses are dropped and the rest applied, so one bad file never holds
        back the others. Returns the files applied."""
        pending = dict(candidates)
        while pending or remove:
            try:
                self.manager.apply(pending.values(), remove=remove)
                return set(pending)
            except DefinitionError as exc:
                problems.extend(exc.problems)
                refused = {problem.file for problem in exc.problems}
                kept = {path: d for path, d in pending.items() if path not in refused}
                still = [tool_id for tool_id in remove if tool_id in self.manager]
                if len(kept) == len(pending) and still == remove:
                    return set()  # no one file to blame: the batch waits for the next change
                pending, remove = kept, still
        return set()


def _is_definition(change: object, path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(SUFFIXES) and not name.startswith(".")
