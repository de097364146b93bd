"""The house checks: ruff on the code, the probes, the tests and the benchmarks; mypy on patcher/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tools

ROOT = Path(__file__).resolve().parent.parent


def test_code_probes_tests_and_benchmarks_are_lint_clean():
    # The ruff of this interpreter's environment (a virtualenv's is not on PATH unless activated).
    tools.require(importlib.util.find_spec("ruff") is not None, "ruff")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "-q", "patcher", "patches", "tests", "benchmarks"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_patcher_type_checks():
    tools.require(importlib.util.find_spec("mypy") is not None, "mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "patcher"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_missing_checker_fails_in_ci_and_skips_elsewhere(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="nochecker"):
        tools.require(False, "nochecker")
    tools.require(True, "nochecker")  # present: neither


def test_every_guarantee_break_still_finds_its_line_and_names_real_tests():
    """benchmarks/guarantee_breaks.py prints STALE for a line the code no longer has, and then
    proves nothing about it: four entries had gone stale as the code moved on. Checked here, in
    seconds, so the next change that moves such a line says so."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import guarantee_breaks
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert len(guarantee_breaks.BREAKS) > 20
    for name, rel, old, new, tests in guarantee_breaks.BREAKS:
        assert (ROOT / rel).read_text().count(old) == 1, f"{name}: {old!r} is not found once in {rel}"
        assert old != new, name
        for test in tests.split():
            file, func = test.split("::")
            assert f"def {func}(" in (ROOT / "tests" / file).read_text(), f"{name}: no test {test}"
