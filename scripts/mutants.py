"""mutants.py - the runner the mutation scripts share (definition_mutants.py, security_mutants.py).

A mutation changes one piece of text of one file under src/ (it must occur there exactly once) and names the tests
that should catch it. Each is tried on a scratch copy of src/, put first on PYTHONPATH for a pytest run of those
tests: a run that fails (or times out) caught it; one that passes means no test guards that check.

    main(MUTATIONS, sys.argv[1:], "security-mutants-")

Options of the scripts that call ``main``: names of mutations (only those run), ``--list`` (print them), ``--check``
(only see that every mutation's text is still in the tree once: a second, no tests run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 300  # seconds per mutation: a check that is gone may leave a test waiting (it then counts as caught)


class Mutation(NamedTuple):
    name: str
    file: str  # relative to the repository
    old: str  # text that occurs exactly once in the file
    new: str
    tests: list[str]  # pytest arguments


def found_once(mutation: Mutation, root: str = ROOT) -> bool:
    with open(os.path.join(root, mutation.file)) as handle:
        return handle.read().count(mutation.old) == 1


def failure(tests: list[str], src: str) -> str | None:
    """None if ``tests`` pass with ``src`` first on the path (bytecode left unwritten: see ``run``); else what failed
    first (pytest's summary line: the test and its error)."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE", *tests]
    env = {**os.environ, "PYTHONPATH": src, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR ")) and "::" in line]
    return (lines[0] if lines else (done.stdout + done.stderr).strip().splitlines()[-1])[:200]


def run(mutation: Mutation, scratch: str) -> str | None:
    """What caught the mutation ("": nothing did; None: the text to change was not found once). ``scratch`` holds a
    copy of src/ (``copy_src``); the mutated file is put back as it was afterwards."""
    target = os.path.join(scratch, mutation.file)
    with open(target) as handle:
        text = handle.read()
    if text.count(mutation.old) != 1:
        return None
    with open(target, "w") as handle:
        handle.write(text.replace(mutation.old, mutation.new))
    # No bytecode is written for the copy: two mutations of one file may have the same size within one second, and
    # a cached .pyc is trusted on size and whole-second mtime. A time-out counts as caught.
    try:
        return failure(mutation.tests, os.path.join(scratch, "src")) or ""
    finally:
        with open(target, "w") as handle:
            handle.write(text)


def copy_src(scratch: str) -> None:
    shutil.copytree(
        os.path.join(ROOT, "src"), os.path.join(scratch, "src"), ignore=shutil.ignore_patterns("__pycache__")
    )


def main(mutations: list[Mutation], names: list[str], prefix: str) -> int:
    names = list(names)
    if names == ["--list"]:
        for mutation in mutations:
            print(f"{mutation.name}  ({mutation.file})")
        return 0
    seen: set[str] = set()
    for mutation in mutations:
        if mutation.name in seen:
            print(f"two mutations are named {mutation.name!r}")
            return 2
        seen.add(mutation.name)
    if names == ["--check"]:
        missing = [mutation.name for mutation in mutations if not found_once(mutation)]
        print(
            f"{len(mutations) - len(missing)} of {len(mutations)} found once" + (f"; not: {missing}" if missing else "")
        )
        return 1 if missing else 0
    unknown = [name for name in names if name not in seen]
    if unknown:
        print(f"no mutation is named {unknown} (see --list)")
        return 2
    chosen = [mutation for mutation in mutations if not names or mutation.name in names]
    survivors: list[str] = []
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        copy_src(scratch)
        # Each selection must pass unmutated first: a test that fails anyway (or a file that is not there) would
        # "catch" every mutation.
        for tests in dict.fromkeys(tuple(mutation.tests) for mutation in chosen):
            failed = failure(list(tests), os.path.join(scratch, "src"))
            if failed is not None:
                print(f"the tests {' '.join(tests)} fail without any mutation: fix them first\n  {failed}")
                return 2
        for mutation in chosen:
            started = time.monotonic()
            caught = run(mutation, scratch)
            took = time.monotonic() - started
            word = "NOT FOUND" if caught is None else "caught" if caught else "SURVIVED"
            print(
                f"{word:9} {mutation.name} ({took:.0f} s)" + (f"\n          by {caught}" if caught else ""), flush=True
            )
            if not caught:
                survivors.append(mutation.name)
    print(f"{len(chosen) - len(survivors)} of {len(chosen)} caught" + (f"; not: {survivors}" if survivors else ""))
    return 1 if survivors else 0
