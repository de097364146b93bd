"""The house checks: ruff on the code and the probes, mypy on patcher/."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tools

ROOT = Path(__file__).resolve().parent.parent


def test_ruff():
    tools.require(shutil.which("ruff") is not None, "ruff")
    r = subprocess.run(["ruff", "check", "-q", "patcher", "patches"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy():
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
