"""patcher/errors.py: every error carries what failed, what was wanted, what was found and a hint."""

from __future__ import annotations

from patcher.errors import PatcherError


def test_patcher_error_has_what_wanted_found_hint():
    err = PatcherError("x failed", wanted="w", found="f", hint="h")
    assert (err.what, err.wanted, err.found, err.hint, err.exit_code) == ("x failed", "w", "f", "h", 2)
