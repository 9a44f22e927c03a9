"""The official MCP conformance suite against examples/conformance_deck.py, driven by scripts/conformance.sh.

The script installs its pinned npm tools on first use (about 15 s), so these tests need npm and node: without them
they fail, they do not skip. Every scenario of the pinned suite must pass, warnings counting as failures.
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
