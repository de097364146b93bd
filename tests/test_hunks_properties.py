"""Property tests of the hunk engine (patcher/core/hunks.py): hypothesis round trips on generated file
pairs, and GNU patch (fuzz 0) as an oracle on the same diffs. The table tests: test_hunks.py.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patcher.core import hunks
from patcher.core.hunks import FileState
from patcher.errors import HunkFailed
from tests.support import tools
from tests.support.diffs import make_diff, roundtrip
from tests.support.tiers import examples

lines = st.lists(st.sampled_from(["a", "b", "c", "def f():", "    return 1", "", "x = 1"]), max_size=30)


@st.composite
def file_pairs(draw):
    old = draw(lines)
    new = list(old)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["ins", "del", "mod"]))
        i = draw(st.integers(0, len(new)))
        if op == "ins":
            new.insert(i, draw(st.sampled_from(["NEW", "b", "    pass"])))
        elif new and i < len(new):
            if op == "del":
                del new[i]
            else:
                new[i] = new[i] + "!"
    eol_old = draw(st.booleans())
    eol_new = draw(st.booleans())
    def as_text(ls, eol):
        return "\n".join(ls) + ("\n" if eol and ls else "")

    return as_text(old, eol_old), as_text(new, eol_new)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file_pairs())
def test_roundtrip_property(pair):
    old, new = pair
    if old == new or not old or not new:  # empty <-> non-empty is an added/removed file: rejected
        return
    fp = roundtrip(old, new)
    assert hunks.join(hunks.apply(hunks.split(old), fp.hunks)) == new
    assert hunks.join(hunks.apply(hunks.split(new), fp.hunks, reverse=True)) == old
    assert hunks.state(hunks.split(new), fp.hunks)[0] is FileState.APPLIED


def _gnu_patch() -> str | None:
    path = shutil.which("patch")
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return path if "GNU patch" in out else None  # BSD patch differs on fuzz and offsets


GNU_PATCH = _gnu_patch()


@pytest.fixture(scope="module")
def gnu_patch() -> str:
    tools.require(GNU_PATCH is not None, "GNU patch")
    assert GNU_PATCH is not None
    return GNU_PATCH


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file_pairs(), st.integers(0, 3))
def test_gnu_patch_oracle_agrees(gnu_patch, tmp_path_factory, pair, pad):
    """Same diff, same (shifted) file: GNU patch with fuzz 0 and we give the same bytes."""
    old, new = pair
    if old == new or not old or not new:
        return
    diff = make_diff(old, new)
    shifted = "pad\n" * pad + old
    d = tmp_path_factory.mktemp("oracle")
    (d / "pkg").mkdir()
    (d / "pkg" / "m.py").write_text(shifted)
    gnu = subprocess.run([gnu_patch, "-p1", "-F0", "--no-backup-if-mismatch", "-s", "-r", "-"],
                         input=diff, text=True, cwd=d, capture_output=True)
    try:
        ours = hunks.join(hunks.apply(hunks.split(shifted), hunks.parse(diff, "t")[0].hunks))
    except HunkFailed:
        ours = None
    theirs = (d / "pkg" / "m.py").read_text() if gnu.returncode == 0 else None
    assert ours == theirs, gnu.stdout + gnu.stderr
