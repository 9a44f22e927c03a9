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
    verdict: str  # PASS, FAIL or SKIP (every check skipped by the suite itself), without --strict
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
    "suite-skips-it": Case(
        checks(check("SKIPPED", "later", errorMessage="Skipped: no harness yet")),
        0,
        "SKIP",
        "the suite skips every check (1): later: Skipped: no harness yet",
    ),
    "one-skipped-check": Case(checks(check("SUCCESS"), check("SKIPPED", "later")), 0, "PASS", "1/1 checks"),
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
    skipped = sum(case.verdict == "SKIP" for case in CASES.values())
    assert closing_counts(every_case) == (passing, len(CASES) - passing - skipped, skipped)
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


# --- baselines (--baseline FILE, the suite's --expected-failures format) ----------------------------------------------

BASELINE = """# whole scenarios, and single checks
server:
  - failure                      # fails: expected
  - genuine-pass                 # passes: a stale entry
  - "failure-without-message:bare"  # the one failing check: expected
  - warning:check                # a check that succeeds: stale
"""


def test_a_baseline_excuses_listed_failures_and_fails_stale_entries(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.yml"
    baseline.write_text(BASELINE)
    names = ("failure", "genuine-pass", "failure-without-message", "warning", "zero-checks")
    done = run_script(tmp_path, "--baseline", str(baseline), *(arg for name in names for arg in ("--scenario", name)))
    lines = {line.split()[1]: line.split()[0] for line in done.stdout.splitlines()[1:-2]}
    assert lines == {
        "failure": "XFAIL",
        "genuine-pass": "FAIL",
        "failure-without-message": "XFAIL",
        "warning": "FAIL",
        "zero-checks": "FAIL",
    }, done.stdout
    assert "stale baseline entry: the scenario passes now" in done.stdout
    assert "stale baseline entry check: it passes" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "0 passed, 3 failed, 2 expected failures"
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("server:\n  - failure\n  oops\n", "baseline.yml:3: expected 'server:' or '  - SCENARIO[:CHECK-ID]'"),
        ("server:\n  - no-such-scenario\n", "names 'no-such-scenario', not a server scenario of this suite"),
    ],
)
def test_a_bad_baseline_stops_the_run_with_one_line(tmp_path: Path, text: str, says: str) -> None:
    baseline = tmp_path / "baseline.yml"
    baseline.write_text(text)
    done = run_script(tmp_path, "--baseline", str(baseline), "--scenario", "failure")
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert says in done.stderr


# --- suite 0.2 (--spec-version): one run of the suite for every scenario ------------------------------------------------

FAKE_MODERN_RUNNER = """
import json, os, sys
from pathlib import Path

SCORED = {scored!r}
NOT_SCORED = {not_scored!r}
args = sys.argv[1:]
if args[:2] == ["list", "--requirements"]:
    print(f"Required for {{args[2]}} (frozen):\\n\\nServer scenarios (test against a server):")
    print("".join(f"  - {{name}}\\n" for name in SCORED))
    print("Client scenarios (test against a client):\\n  - initialize\\n\\nRun and reported, but never scored:")
    print(f"  pending ({{len(NOT_SCORED)}}):")
    print("".join(f"    - {{name}} [server]\\n" for name in NOT_SCORED) + "    - a-client-one [client]")
    sys.exit(0)
assert args[args.index("--requirements") + 1] == "2026-07-28" and "--timeout" in args, args
out = Path(args[args.index("-o") + 1])
for name, status in {{**SCORED, **NOT_SCORED}}.items():
    if status is not None:
        where = out / f"server-{{name}}-2026-01-01T00-00-00-000Z"
        where.mkdir(parents=True)
        (where / "checks.json").write_text(json.dumps([{{"id": "c", "status": status}}]))
sys.exit(int(os.environ.get("FAKE_EXIT", "1")))
"""


def run_modern(
    tmp: Path, scored: dict[str, str | None], not_scored: dict[str, str | None], exit: int
) -> subprocess.CompletedProcess[str]:
    """The script at --spec-version 2026-07-28 with a fake suite that lists SCORED and NOT_SCORED (name: the one
    check's status, None for no results file) and exits ``exit`` after one run."""
    runner = tmp / "fake_modern_runner.py"
    runner.write_text(FAKE_MODERN_RUNNER.format(scored=scored, not_scored=not_scored))
    tooldeck = tmp / "fake_tooldeck"
    tooldeck.write_text(FAKE_TOOLDECK.format(python=sys.executable))
    tooldeck.chmod(0o755)
    env = {**os.environ, "TOOLDECK": str(tooldeck), "TOOLDECK_CONFORMANCE_RUNNER": f"{sys.executable} {runner}",
           "FAKE_EXIT": str(exit)}  # fmt: skip
    return subprocess.run(
        ["bash", str(SCRIPT), "--http", "--spec-version", "draft", "--out", str(tmp / "out")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip


def test_one_suite_run_gives_every_scenario_its_verdict(tmp_path: Path) -> None:
    done = run_modern(
        tmp_path, {"scored-pass": "SUCCESS", "scored-fail": "FAILURE", "scored-silent": None},
        {"pending-pass": "SUCCESS"}, exit=1,
    )  # fmt: skip
    lines = [line.split(None, 2) for line in done.stdout.splitlines()[1:-2]]
    assert [(verdict, name) for verdict, name, _ in lines] == [
        ("PASS", "scored-pass"), ("FAIL", "scored-fail"), ("FAIL", "scored-silent"), ("PASS", "pending-pass"),
    ], done.stdout + done.stderr  # fmt: skip
    assert lines[3][2] == "1/1 checks (not scored: pending)"
    assert lines[2][2].startswith("no results")
    assert (tmp_path / "out" / "scored-pass").is_dir() and not (tmp_path / "out" / ".raw").exists()
    assert [len(list((tmp_path / "out" / name).glob("*/checks.json"))) for name in ("scored-pass", "pending-pass")] == [
        1, 1,
    ]  # fmt: skip
    assert (done.stdout.strip().splitlines()[-1], done.returncode) == ("2 passed, 2 failed", 1)


@pytest.mark.parametrize(("exit", "closing"), [(1, "1 passed, 1 failed"), (0, "1 passed, 0 failed")])
def test_the_suites_failure_verdict_must_show_in_a_line(tmp_path: Path, exit: int, closing: str) -> None:
    # Every results file passes; if the suite still says a scored scenario failed, the run cannot pass.
    done = run_modern(tmp_path, {"scored-pass": "SUCCESS"}, {}, exit=exit)
    assert ("FAIL  the suite's verdict" in done.stdout) == (exit == 1), done.stdout + done.stderr
    assert (done.stdout.strip().splitlines()[-1], done.returncode) == (closing, exit)
