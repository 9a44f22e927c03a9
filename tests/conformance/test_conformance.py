"""The official MCP conformance suite against examples/conformance_deck.py, driven by scripts/conformance.sh.

The script installs its pinned npm tools on first use (about 20 s), so these tests need npm and node: without them
they fail, they do not skip. Every scenario of suite 0.1.16 must pass, warnings counting as failures; so must every
scenario suite 0.2.0-alpha.12 runs at the 2025-11-25 wire (a dual-era server passes both wires), but for those
listed in baseline-2025-11-25.yml with their reasons. At the 2026-07-28 wire the same holds with
baseline-2026-07-28.yml (empty now: everything passes, the tasks extension's scenarios included, but the one the
suite itself skips).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "conformance.sh"
TOOLDECK = Path(sys.executable).parent / "tooldeck"
CLOSING = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$")
CLOSING_WITH_BASELINE = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) expected failures)?$")
VERDICT = re.compile(r"^(PASS|FAIL|XFAIL|SKIP) +(\S+) ")
# Scenarios whose every check the suite itself records as SKIPPED (the script reports them SKIP).
SUITE_SKIPS = {"tasks-status-notifications": "SKIP"}
LEGACY_BASELINE = Path(__file__).with_name("baseline-2025-11-25.yml")
MODERN_BASELINE = Path(__file__).with_name("baseline-2026-07-28.yml")
HTTP_TRANSPORT_SCENARIOS = {"dns-rebinding-protection", "server-sse-multiple-streams", "server-sse-polling"}


def conformance(*args: str, out: Path | None = None) -> subprocess.CompletedProcess[str]:
    missing = [tool for tool in ("npm", "node") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: scripts/conformance.sh installs the suite with npm")
    if out is not None:
        args = (*args, "--out", str(out))  # results kept where pytest keeps its temporary directories
    done = subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TOOLDECK": str(TOOLDECK)},
        timeout=900,
    )
    if done.returncode == 2:  # could not start: install, port or server trouble, not a conformance result
        pytest.fail(f"scripts/conformance.sh {' '.join(args)} did not run:\n{done.stdout}{done.stderr}")
    return done


def closing_counts(done: subprocess.CompletedProcess[str]) -> tuple[int, int, int]:
    lines = done.stdout.strip().splitlines()
    match = CLOSING.match(lines[-1]) if lines else None
    if match is None:
        pytest.fail(f"no closing 'N passed, M failed' line:\n{done.stdout}{done.stderr}")
    passed, failed, skipped = match.groups()
    return int(passed), int(failed), int(skipped or 0)


def suite(name: str) -> set[str]:
    return set(conformance("--list", "--suite", name).stdout.split())


@pytest.mark.slow
def test_every_scenario_passes_over_http_with_no_warnings(tmp_path: Path) -> None:
    scenarios = suite("all")
    assert len(scenarios) >= 32
    done = conformance("--http", "--suite", "all", "--strict", out=tmp_path)
    assert closing_counts(done) == (len(scenarios), 0, 0), done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_every_scenario_passes_over_stdio(tmp_path: Path) -> None:
    # Through the supergateway bridge the HTTP-transport scenarios would test the bridge, so the script skips them.
    scenarios = suite("all")
    assert scenarios >= HTTP_TRANSPORT_SCENARIOS
    done = conformance("--stdio", "--suite", "all", "--strict", out=tmp_path)
    expected = (len(scenarios) - len(HTTP_TRANSPORT_SCENARIOS), 0, len(HTTP_TRANSPORT_SCENARIOS))
    assert closing_counts(done) == expected, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr


# --- suite 0.2.0-alpha.12 at the 2025-11-25 wire: one run, read by the tests below ------------------------------------


@pytest.fixture(scope="module")
def legacy_wire_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    out = tmp_path_factory.mktemp("legacy-wire")
    return conformance(
        "--http", "--spec-version", "2025-11-25", "--strict", "--baseline", str(LEGACY_BASELINE), out=out
    )


def verdicts(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {m.group(2): m.group(1) for line in done.stdout.splitlines() if (m := VERDICT.match(line))}


def baseline_scenarios(baseline: Path = LEGACY_BASELINE) -> set[str]:
    entries = {line.strip()[2:].split("#")[0].strip().strip("'\"") for line in baseline.read_text().splitlines()
               if line.strip().startswith("- ")}  # fmt: skip
    return {entry.split(":")[0] for entry in entries}


@pytest.mark.slow
def test_the_new_suite_runs_the_whole_2025_11_25_requirement_set(
    legacy_wire_run: subprocess.CompletedProcess[str],
) -> None:
    # 30 scored scenarios and 3 run but not scored (server-session-lifecycle, json-schema-2020-12, server-sse-polling)
    required = set(conformance("--list", "--spec-version", "2025-11-25").stdout.split())
    assert len(required) == 33, sorted(required)
    assert set(verdicts(legacy_wire_run)) == required, legacy_wire_run.stdout + legacy_wire_run.stderr
    assert sum("(not scored: " in line for line in legacy_wire_run.stdout.splitlines()) == 3, legacy_wire_run.stdout


@pytest.mark.slow
def test_what_passes_at_the_legacy_wire_keeps_passing(legacy_wire_run: subprocess.CompletedProcess[str]) -> None:
    # Warnings count as failures (--strict); only the baseline's scenarios may fail, and they must (or it is stale).
    failing = {name: verdict for name, verdict in verdicts(legacy_wire_run).items() if verdict != "PASS"}
    assert failing == dict.fromkeys(baseline_scenarios(), "XFAIL"), legacy_wire_run.stdout
    lines = legacy_wire_run.stdout.strip().splitlines()
    match = CLOSING_WITH_BASELINE.match(lines[-1]) if lines else None
    assert match is not None, legacy_wire_run.stdout + legacy_wire_run.stderr
    assert (int(match.group(2)), legacy_wire_run.returncode) == (0, 0), legacy_wire_run.stdout + legacy_wire_run.stderr


# --- suite 0.2.0-alpha.12 at the 2026-07-28 wire ---------------------------------------------------------------------


@pytest.mark.slow
def test_what_passes_at_the_2026_07_28_wire_keeps_passing(tmp_path: Path) -> None:
    # 50 scenarios run (37 scored); only the baseline's may fail, and each of them must (or the entry is stale). The
    # ten tasks-extension scenarios run unscored: they pass too, but the one the suite skips itself.
    done = conformance("--http", "--spec-version", "2026-07-28", "--strict", "--baseline", str(MODERN_BASELINE),
                       out=tmp_path)  # fmt: skip
    assert len(verdicts(done)) == 50, done.stdout + done.stderr
    assert len([name for name in verdicts(done) if name.startswith("tasks-")]) == 10, done.stdout
    failing = {name: verdict for name, verdict in verdicts(done).items() if verdict != "PASS"}
    assert failing == {**dict.fromkeys(baseline_scenarios(MODERN_BASELINE), "XFAIL"), **SUITE_SKIPS}, done.stdout
    assert done.returncode == 0, done.stdout + done.stderr
