"""``tooldeck validate`` and ``tooldeck diff``: tool definition files checked, and two versions compared, for people
and for CI (``--json``).

validate: exit 0 when every file is valid, 1 when any has a problem (each printed as ``file: $.path: message``).
diff: exit 0 when NEW's version covers the change from OLD, 1 when it does not, 2 when a file cannot be read.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import orjson

from ..manifest.definition import DefinitionError, Problem, definition_files, load_definition
from ..manifest.manager import read_definitions
from ..protocol.errors import TargetError

if TYPE_CHECKING:
    import argparse


def validate(args: argparse.Namespace) -> int:
    paths: list[str] = []
    problems: list[Problem] = []
    for path in args.files:
        if os.path.isdir(path):
            found = definition_files(path)
            if not found:
                problems.append(Problem(path, "$", "no tool definition files (.json, .yaml, .yml) in this directory"))
            paths.extend(found)
        else:
            paths.append(path)
    definitions, found_problems = read_definitions(paths)
    problems.extend(found_problems)
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
