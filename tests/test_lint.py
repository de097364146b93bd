"""The house checks: ruff on the code and the probes, mypy on patcher/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff():
    r = subprocess.run(["ruff", "check", "-q", "patcher", "patches"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy():
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "patcher"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
