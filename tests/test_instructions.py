"""The instruction budgets: no hot path costs more than 3% over its baseline in ``benchmarks/instructions.json``
(``benchmarks/instructions.py --check``, counted under callgrind). Without valgrind the check is skipped in one line,
unless ``$TOOLDECK_REQUIRE_VALGRIND`` is set (``.ci/run`` sets it, and installs valgrind)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "instructions.py"


def test_no_hot_path_costs_more_than_3_percent_over_its_baseline() -> None:
    if shutil.which("valgrind") is None:
        if os.environ.get("TOOLDECK_REQUIRE_VALGRIND"):
            pytest.fail("valgrind is not installed and $TOOLDECK_REQUIRE_VALGRIND is set (.ci/run installs it)",
                        pytrace=False)  # fmt: skip
        pytest.skip("valgrind is not installed: instruction budgets unchecked (set $TOOLDECK_REQUIRE_VALGRIND to fail)")
    src = ROOT / "src"
    path = os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}  # the checkout's tooldeck, as the suite imports it
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    # The parent names the tooldeck it imported; each measured child exits with an error if its own is another.
    assert f"tooldeck from {src / 'tooldeck'};" in done.stdout, done.stdout + done.stderr
    if done.returncode:
        lines = (done.stdout + done.stderr).strip().splitlines()
        pytest.fail(lines[-1] + "\n" + "\n".join(lines[:-1]), pytrace=False)


def load_script(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts benchmarks/ first; undone at teardown
    spec = importlib.util.spec_from_file_location("instructions_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_check_fails_naming_each_path_over_its_budget_and_by_how_much(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    instructions = load_script(monkeypatch)
    baseline = tmp_path / "instructions.json"
    paths = {"http-session": 100_000, "stdio-session": 100_000, "http-list-1003": 100_000}
    baseline.write_text(json.dumps({"versions": {"python": "3.11.7"}, "instructions_per_call": paths}))
    found = {"http-session": 103_500.0, "stdio-session": 102_900.0, "http-list-1003": 90_000.0}
    assert instructions.check(found, baseline) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("instruction budget exceeded: http-session grew 3.5% (100,000 -> 103,500 ")
    assert "stdio-session" not in out[-1] and "http-list-1003" not in out[-1]
    assert [line.split()[:2] for line in out[:3]] == [["OVER", "http-session"], ["ok", "stdio-session"],
                                                      ["low", "http-list-1003"]]  # fmt: skip
    assert instructions.check({"http-session": 103_000.0}, baseline) == 0
    baseline.write_text(json.dumps({"versions": {"python": "3.11.7", "orjson": "0.1"}, "calls": {"http-session": 50},
                                    "instructions_per_call": paths}))  # fmt: skip
    assert instructions.check({"http-session": 104_000.0}, baseline, calls=300) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "the baseline was measured with orjson 0.1, this is " in last  # what else differs is said with it
    assert "http-session was measured with 300 calls, its baseline with 50" in last


BREAKDOWN = ROOT / "benchmarks" / "breakdown.py"
CUTS = [("stdio-session", "floor"), ("stdio-session", "transport"), ("stdio-session", "dispatch"),
        ("stdio-session", "pipeline"), ("http-session", "floor"), ("http-session", "transport"),
        ("http-session", "dispatch"), ("http-session", "pipeline"), ("http-stateless", "floor"),
        ("http-stateless", "transport"), ("http-stateless", "dispatch"), ("http-stateless", "pipeline"),
        ("http-secured", "whole"), ("http-secured", "on-no-audit")]  # fmt: skip


@pytest.mark.parametrize(("path", "cut"), CUTS, ids=[f"{path}-{cut}" for path, cut in CUTS])
def test_each_cut_of_the_breakdown_answers_every_call_as_the_deck_does(path: str, cut: str) -> None:
    """``benchmarks/breakdown.py``'s children, without valgrind: each cut answers the 200 warm-up calls with the
    deck's own replies (the child checks each and exits 1 on a wrong one), and a seam it replaces that was renamed
    fails it (``replace``)."""
    src = ROOT / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(BREAKDOWN), "--child", path, cut, "3"], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
