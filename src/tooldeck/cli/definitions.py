"""``tooldeck validate`` and ``tooldeck diff``: tool definition files checked, and two versions compared, for people
and for CI (``--json``).

validate: exit 0 when every file is valid, 1 when any has a problem (each printed as ``file: $.path: message``). A
file is checked as ``tooldeck serve`` loads it, through the same code (read, schema and rules, then the manager's
check, which imports handler modules, checks their signatures and finds commands): what validate passes, serve
serves. ``--deck TARGET`` checks against that deck's ``@deck.implements`` bindings, as its ``load_manifest`` would.
diff: exit 0 when NEW's version covers the change from OLD, 1 when it does not, 2 when a file cannot be read.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import orjson

from ..manifest.definition import Definition, DefinitionError, Problem, definition_files, load_definition
from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse

    from ..manifest.manager import ToolManager


def validate(args: argparse.Namespace) -> int:
    paths: list[str] = []
    problems: list[Problem] = []
    definitions: list[Definition] = []
    for path in args.files:
        directory = os.path.isdir(path)
        found = definition_files(path) if directory else [path]
        if directory and not found:
            problems.append(Problem(path, "$", "no tool definition files (.json, .yaml, .yml) in this directory"))
        for file in found:
            try:  # read as serve reads it: a file of a directory must stay inside it
                definitions.append(load_definition(file, within=path if directory else None))
            except DefinitionError as exc:
                problems.extend(exc.problems)
        paths.extend(found)
    problems.extend(_manager(getattr(args, "deck", None)).check(definitions))
    if args.json:
        report = {"valid": not problems, "files": len(paths), "problems": [p.to_json() for p in problems]}
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for problem in problems:
            print(problem)
        bad = len({problem.file for problem in problems})
        if problems:
            print(f"{_count(len(problems), 'problem')} in {_count(bad, 'file')}", file=sys.stderr)
        else:
            tools = sum(len(d.capabilities) for d in definitions)
            print(f"{_count(len(definitions), 'definition')} valid ({_count(tools, 'tool')})", file=sys.stderr)
    return 1 if problems else 0


def _manager(target: str | None) -> ToolManager:
    """The manager the files are checked against: a new deck's (handlers must then be in the files, as for ``serve
    DIR``), or TARGET's, with its bindings."""
    from ..deck import Deck

    if target is None:
        return Deck("validate").manager
    from ..loader import load_deck

    return load_deck(target).manager


def diff(args: argparse.Namespace) -> int:
    from ..manifest.changes import check_upgrade

    old, new = _load(args.old), _load(args.new)
    if old.id != new.id:
        raise TargetError(f"{args.new}: id {new.id!r} is not {old.id!r}: these are different tools, not two versions")
    verdict = check_upgrade(old.document, new.document)
    if args.json:
        report: dict[str, Any] = {
            "id": old.id,
            "old": old.version,
            "new": new.version,
            "required": verdict.required,
            "bump": verdict.bump,
            "ok": verdict.ok,
            "message": verdict.message,
            "changes": [{"level": c.level, "path": c.path, "message": c.message} for c in verdict.changes],
        }
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0 if verdict.ok else 1
    for change in verdict.changes:
        print(f"{change.level:<5}  {change.path}: {change.message}")
    if not verdict.changes:
        print("no change")
    needed = verdict.required or "none"
    print(f"required bump: {needed}; {old.version} -> {new.version} is {_article(verdict.bump)}")
    print(("ok: " if verdict.ok else "refused: ") + verdict.message)
    return 0 if verdict.ok else 1


def _load(path: str) -> Any:
    try:
        return load_definition(path)
    except DefinitionError as exc:
        raise TargetError(str(exc)) from None  # every problem, a line each


def _article(bump: str) -> str:
    return {"none": "the same version", "downgrade": "a lower version"}.get(bump, f"a {bump} bump")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
