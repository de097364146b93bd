"""Unified diffs as difflib writes them, for the hunk engine's table tests (test_hunks.py) and its
property tests (test_hunks_properties.py)."""

from __future__ import annotations

import difflib

from patcher.core import hunks


def make_diff(old: str, new: str, path: str = "pkg/m.py", n: int = 3) -> str:
    """A unified diff as difflib writes it, with the no-newline markers diff(1) adds."""
    out = [f"--- a/{path}\n", f"+++ b/{path}\n"]
    for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), n=n):
        if line.startswith(("---", "+++")):
            continue
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def roundtrip(old: str, new: str) -> hunks.FilePatch:
    (fp,) = hunks.parse(make_diff(old, new), "t")
    return fp
