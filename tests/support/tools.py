"""External checkers the suite relies on: skipped on a developer machine that lacks them,
a failure in CI (CI=true, as GitHub Actions and most CI services set), where a silent skip
would turn the check off for everyone."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(present: bool, what: str) -> None:
    if present:
        return
    if in_ci():
        pytest.fail(f"{what} is not installed, and CI must run this check (install it in the CI image)")
    pytest.skip(f"{what} is not installed")
