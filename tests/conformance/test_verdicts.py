"""scripts/conformance.sh's verdicts, with a fake suite (TOOLDECK_CONFORMANCE_RUNNER) that writes crafted results.

A scenario passes only if the runner exited 0 and its checks.json parses, holds a SUCCESS and no FAILURE (and, with
--strict, no WARNING). The fake runner answers `list --server` with the cases below and, for `server --scenario
NAME -o DIR`, writes the case's text where the real suite writes its results, then exits with the case's status.
The server under test is a stand-in too (any HTTP answer will do), so these tests see the script alone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "conformance.sh"
LINE = re.compile(r"^(PASS|FAIL|SKIP)  (\S+) +(.*)$")
CLOSING = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$")

FAKE_TOOLDECK = """#!{python}
# Stands in for `tooldeck serve DECK --http --host HOST --port PORT`: the script only needs an HTTP answer.
import http.server, sys

args = sys.argv[1:]
address = (args[args.index("--host") + 1], int(args[args.index("--port") + 1]))
http.server.HTTPServer(address, http.server.BaseHTTPRequestHandler).serve_forever()
"""

FAKE_RUNNER = """
import json, sys
from pathlib import Path

CASES = json.loads({cases!r})
args = sys.argv[1:]
if args == ["list", "--server"]:
    print("Available server scenarios:")
    for name in CASES:
        print(f"  - {{name}}: a crafted result")
    sys.exit(0)
name, out = args[args.index("--scenario") + 1], Path(args[args.index("-o") + 1])
results, status = CASES[name]
for second, text in enumerate([] if results is None else results.split("\f")):  # \f: one more results file
    where = out / f"server-{{name}}-2026-01-01T00-00-{{second:02}}-000Z"  # as the real suite names its directories
    where.mkdir(parents=True)
    (where / "checks.json").write_text(text)
sys.exit(status)
"""


def check(status: str, id: str = "check", **fields: str) -> dict[str, str]:
    return {"id": id, "name": id, "description": f"{id} description", "status": status, **fields}


def checks(*items: dict[str, str]) -> str:
    return json.dumps(list(items), indent=2)


class Case(NamedTuple):
    results: str | None  # the checks.json text (a form feed starts another file); None: the runner writes none
    status: int  # the runner's exit status
    verdict: str  # PASS or FAIL, without --strict
    says: str  # a fragment of the scenario's line


CASES = {
    "genuine-pass": Case(checks(check("SUCCESS", "a"), check("SUCCESS", "b")), 0, "PASS", "2/2 checks"),
    "zero-checks": Case("[]", 0, "FAIL", "no check succeeded"),
    "only-info": Case(checks(check("INFO")), 0, "FAIL", "no check succeeded"),
    "unparsable": Case("{not json", 0, "FAIL", "unparsable results"),
    "failure-in-unparsable-text": Case(
        '[{"id": "x", "status": "SUCCESS"}, {"id": "y", "status": "FAILURE", "errorMessage": "boom"}',
        0,
        "FAIL",
        "unparsable results",
    ),
    "not-a-list": Case(json.dumps({"status": "SUCCESS"}), 0, "FAIL", "unparsable results: not a list of checks"),
    "empty-file": Case("", 0, "FAIL", "unparsable results"),
    "passing-file-but-runner-failed": Case(checks(check("SUCCESS")), 1, "FAIL", "the runner exited 1"),
    "passing-file-but-runner-timed-out": Case(checks(check("SUCCESS")), 124, "FAIL", "timed out"),
    "no-results-file": Case(None, 0, "FAIL", "no results"),
    "two-results-files": Case(f"{checks(check('SUCCESS'))}\f{checks(check('SUCCESS'))}", 0, "FAIL", "2 results files"),
    "failure": Case(
        checks(check("SUCCESS"), check("FAILURE", "bad", errorMessage="wrong\nsecond line")),
        1,
        "FAIL",
        "1/2 checks: bad: wrong",
    ),
    "failure-without-message": Case(
        checks(check("SUCCESS"), {"id": "bare", "status": "FAILURE"}), 1, "FAIL", "1/2 checks: bare"
    ),
    "warning": Case(checks(check("SUCCESS"), check("WARNING", "meh")), 0, "PASS", "1/1 checks, 1 warning(s): meh"),
}


def run_script(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    runner = tmp / "fake_runner.py"
    cases = {name: [case.results, case.status] for name, case in CASES.items()}
    runner.write_text(FAKE_RUNNER.format(cases=json.dumps(cases)))
    tooldeck = tmp / "fake_tooldeck"
    tooldeck.write_text(FAKE_TOOLDECK.format(python=sys.executable))
    tooldeck.chmod(0o755)
    env = {**os.environ, "TOOLDECK": str(tooldeck), "TOOLDECK_CONFORMANCE_RUNNER": f"{sys.executable} {runner}"}
    return subprocess.run(
        ["bash", str(SCRIPT), "--http", "--out", str(tmp / "out"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def scenario_lines(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    lines = {}
    for line in done.stdout.splitlines():
        if match := LINE.match(line):
            verdict, name, text = match.groups()
            lines[name] = (verdict, text)
    return lines


def closing_counts(done: subprocess.CompletedProcess[str]) -> tuple[int, int, int]:
    lines = done.stdout.strip().splitlines()
    match = CLOSING.match(lines[-1]) if lines else None
    assert match is not None, done.stdout + done.stderr
    passed, failed, skipped = match.groups()
    return int(passed), int(failed), int(skipped or 0)


@pytest.fixture(scope="module")
def every_case(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path_factory.mktemp("every_case"), "--suite", "all")


@pytest.mark.parametrize("name", CASES)
def test_each_scenario_gets_its_verdict(every_case: subprocess.CompletedProcess[str], name: str) -> None:
    lines = scenario_lines(every_case)
    assert name in lines, every_case.stdout + every_case.stderr
    verdict, text = lines[name]
    assert (verdict, CASES[name].says in text) == (CASES[name].verdict, True), text


def test_the_closing_line_counts_the_verdicts_and_a_failure_fails_the_run(
    every_case: subprocess.CompletedProcess[str],
) -> None:
    passing = sum(case.verdict == "PASS" for case in CASES.values())
    assert closing_counts(every_case) == (passing, len(CASES) - passing, 0)
    assert every_case.returncode == 1, every_case.stdout + every_case.stderr


def test_a_run_of_genuine_passes_exits_0(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--scenario", "genuine-pass", "--scenario", "warning")
    assert closing_counts(done) == (2, 0, 0), done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr


def test_strict_fails_a_warning(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--strict", "--scenario", "warning", "--scenario", "genuine-pass")
    lines = scenario_lines(done)
    assert lines["warning"] == ("FAIL", "1/1 checks, 1 warning(s): meh: meh description"), done.stdout
    assert lines["genuine-pass"][0] == "PASS", done.stdout
    assert closing_counts(done) == (1, 1, 0)
    assert done.returncode == 1


def test_a_suite_that_selects_no_scenario_cannot_pass(tmp_path: Path) -> None:
    # The tools suite picks scenarios by name; the fake suite has none of those names.
    done = run_script(tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert "the 'tools' suite selects none of the suite's" in done.stderr
