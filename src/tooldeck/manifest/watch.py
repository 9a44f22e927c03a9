"""A directory of tool definition files, served through the manager and followed as it changes.

The OS's file events (collected by watchfiles) arrive in batches, and a batch is applied as one change. What an
event says happened matters less than what the directory holds once the batch is in: a file deleted and written
again within one batch (vim's backup save, ``rm`` + ``cp``, a git checkout) is a changed file, not a deleted one, so
each path of a batch is looked at afresh: present, it is read, checked and applied with the others; gone, its
definition is unregistered. A change to a file a command handler names (a script beside the definitions) reads its
definitions again, since that file is part of their digest.

Files are read and parsed off the event loop (in a worker thread), under reading.py's rules: regular files only,
inside the directory, of bounded size, YAML without aliases; what was read is then applied on the loop, as every
other change of the registry is. A file that cannot be read, becomes invalid, or whose
change the version rules refuse, is reported on one log line per problem (file, JSON path, what; never the file's
content) and its previous version keeps serving; the other files of the batch are applied without it. A batch that
fails for any other reason is logged and the watcher goes on. With shared definitions (manifest/fleet.py) each batch
is committed fleet-wide, once, however many processes watch the directory: the others find it served already.
"""

from __future__ import annotations

import asyncio
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
        self.named: dict[str, set[str]] = {}  # a file a command names -> the definition files that name it

    def load(self) -> list[Problem]:
        """Apply every file of the directory; the problems of those that could not be applied (already logged)."""
        return self.refresh(definition_files(self.directory))

    async def watch(self) -> None:
        """Follow the directory until cancelled."""
        import watchfiles

        async for changes in watchfiles.awatch(self.directory, watch_filter=self._is_watched, recursive=False):
            paths = sorted({self._path(path) for _, path in changes})
            try:
                batch = await asyncio.to_thread(self.read, paths)
                await self.aapply(batch)
            except Exception as exc:  # one bad batch must not end the watching
                log.error("watching %s: a batch of %d changed files was not applied (%s); what was served before "
                          "keeps serving", self.directory, len(paths), type(exc).__name__, exc_info=True)  # fmt: skip

    def _path(self, path: str) -> str:
        """A file as this watcher names it (in its directory as given), whatever form the OS event had."""
        return os.path.join(self.directory, os.path.basename(path))

    def _is_watched(self, change: object, path: str) -> bool:
        return _is_definition(path) or os.path.normpath(self._path(path)) in self.named

    def refresh(self, paths: Iterable[str]) -> list[Problem]:
        """Apply one batch: each path as the directory holds it now (present: read and applied; gone: its definition
        unregistered); returns (and logs) the problems that kept files from being applied."""
        return self.apply(self.read(paths))

    def read(self, paths: Iterable[str]) -> Batch:
        """Read one batch (the part that touches the files: ``watch`` runs it in a worker thread)."""
        changed: set[str] = set()
        deleted: list[str] = []
        for path in paths:
            users = self.named.get(os.path.normpath(path))
            if users:  # a command's file: its definitions are read again
                changed.update(users)
            if not _is_definition(path):
                continue
            if os.path.lexists(path):
                changed.add(path)
            else:
                deleted.append(path)
        return self.read_files(sorted(changed), deleted)

    def read_files(self, changed: Iterable[str], deleted: Iterable[str]) -> Batch:
        """``changed`` files read and checked, ``deleted`` ones noted: a batch for ``apply``."""
        batch = Batch(list(deleted))
        for path in changed:
            if not os.path.lexists(path):  # gone by the time it is read
                batch.deleted.append(path)
                continue
            try:
                batch.candidates[path] = load_definition(path, within=self.directory)
            except DefinitionError as exc:
                batch.problems.extend(exc.problems)
        return batch

    def update(self, changed: Iterable[str], deleted: Iterable[str]) -> list[Problem]:
        """Apply ``changed`` files and forget ``deleted`` ones in one change; returns (and logs) the problems that
        kept files from being applied. (``refresh`` decides which is which from the directory itself.)"""
        return self.apply(self.read_files(changed, deleted))

    def apply(self, batch: Batch) -> list[Problem]:
        """Apply what ``read`` found, through the manager in one change; returns (and logs) the problems that kept
        files from being applied."""
        candidates, remove, problems = self._prepare(batch)
        return self._applied(self._apply(candidates, remove, problems), candidates, problems)

    async def aapply(self, batch: Batch) -> list[Problem]:
        """``apply``, through the manager's awaited form: what ``watch`` does, so that with shared definitions each
        batch is committed fleet-wide, once however many processes watch the directory (manifest/fleet.py)."""
        candidates, remove, problems = self._prepare(batch)
        pending = dict(candidates)
        applied: set[str] = set()
        while pending or remove:
            try:
                await self.manager.aapply(pending.values(), remove=remove)
                applied = set(pending)
                break
            except DefinitionError as exc:
                step = self._without_refused(exc, pending, remove, problems)
                if step is None:
                    break
                pending, remove = step
        return self._applied(applied, candidates, problems)

    def _prepare(self, batch: Batch) -> tuple[dict[str, Definition], list[str], list[Problem]]:
        problems, candidates, deleted = list(batch.problems), dict(batch.candidates), batch.deleted
        owners = {tool_id: path for path, tool_id in self.files.items() if path not in deleted}
        for path, definition in list(candidates.items()):
            owner = owners.get(definition.id)
            if owner is not None and owner != path:
                problems.append(Problem(path, "$.id", f"id {definition.id!r} is already served from {owner}"))
                del candidates[path]
        # A deleted file's definition goes, unless another file of the batch now serves its id.
        gone = {self.files.pop(path) for path in deleted if path in self.files}
        for path in deleted:
            self._forget_named(path)
        new_ids = {definition.id for definition in candidates.values()}
        remove = sorted(tool_id for tool_id in gone if tool_id not in new_ids and tool_id in self.manager)
        return candidates, remove, problems

    def _applied(self, applied: set[str], candidates: dict[str, Definition], problems: list[Problem]) -> list[Problem]:
        for path in applied:
            self.files[path] = candidates[path].id
            self._forget_named(path)
            for name in candidates[path].files:
                self.named.setdefault(os.path.normpath(os.path.join(candidates[path].base_dir, name)), set()).add(path)
        for problem in problems:
            tool_id = candidates[problem.file].id if problem.file in candidates else self.files.get(problem.file)
            served = self.manager.get(tool_id) if tool_id else None
            log.error("%s%s", problem, f" (still serving {served.label})" if served is not None else "")
        return problems

    def _forget_named(self, path: str) -> None:
        for named, users in list(self.named.items()):
            users.discard(path)
            if not users:
                del self.named[named]

    def _apply(self, candidates: dict[str, Definition], remove: list[str], problems: list[Problem]) -> set[str]:
        """Apply the batch; files the manager refuses are dropped and the rest applied, so one bad file never holds
        back the others. Returns the files applied."""
        pending = dict(candidates)
        while pending or remove:
            try:
                self.manager.apply(pending.values(), remove=remove)
                return set(pending)
            except DefinitionError as exc:
                step = self._without_refused(exc, pending, remove, problems)
                if step is None:
                    return set()
                pending, remove = step
        return set()

    def _without_refused(self, exc: DefinitionError, pending: dict[str, Definition], remove: list[str],
                         problems: list[Problem]) -> tuple[dict[str, Definition], list[str]] | None:  # fmt: skip
        """The batch again without the files ``exc`` refused; None when there is no one file to blame (the batch
        waits for the next change)."""
        problems.extend(exc.problems)
        refused = {problem.file for problem in exc.problems}
        kept = {path: d for path, d in pending.items() if path not in refused}
        still = [tool_id for tool_id in remove if tool_id in self.manager]
        if len(kept) == len(pending) and still == remove:
            return None
        return kept, still


class Batch:
    """One batch of changes as read: the definitions of the files that are there, the problems of those that could
    not be read, and the files that are gone."""

    __slots__ = ("candidates", "deleted", "problems")

    def __init__(self, deleted: list[str]) -> None:
        self.candidates: dict[str, Definition] = {}  # path -> definition
        self.problems: list[Problem] = []
        self.deleted = deleted


def _is_definition(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(SUFFIXES) and not name.startswith(".")
