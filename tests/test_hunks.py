"""The pure hunk engine: tables, hypothesis round trips, and GNU patch as an oracle."""

from __future__ import annotations

import difflib
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patcher import hunks
from patcher.errors import DiffError, HunkFailed
from patcher.hunks import FileState
from tests.support import tools
from tests.support.tiers import examples


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


@pytest.mark.parametrize("old,new", [
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("a\nb\nc", "a\nb\nc\n"),  # adds the final newline
    ("a\nb\nc\n", "a\nb\nc"),  # removes it
    ("x\n" * 20 + "y\n", "x\n" * 20 + "z\ny\n"),  # repeated context: position decides
    ("a\n", "b\n"),
])
def test_apply_then_reverse_is_identity(old, new):
    fp = roundtrip(old, new)
    src = hunks.split(old)
    assert hunks.join(hunks.apply(src, fp.hunks)) == new
    assert hunks.join(hunks.apply(hunks.split(new), fp.hunks, reverse=True)) == old


def test_crlf_file_keeps_its_line_endings():
    fp = roundtrip("a\nb\nc\n", "a\nB\nB2\nc\n")
    out = hunks.join(hunks.apply(hunks.split("a\r\nb\r\nc\r\n"), fp.hunks))
    assert out == "a\r\nB\r\nB2\r\nc\r\n"


def test_offset_is_accepted_fuzz_is_not():
    fp = roundtrip("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n")
    shifted = "0\n1\n2\na\nb\nc\nd\ne\nf\ng\n"
    assert hunks.join(hunks.apply(hunks.split(shifted), fp.hunks)) == "0\n1\n2\na\nb\nc\nD\ne\nf\ng\n"
    fuzzed = "a\nb\nC\nd\ne\nf\ng\n"  # one context line differs: GNU patch -F1 would apply it
    with pytest.raises(HunkFailed) as exc:
        hunks.apply(hunks.split(fuzzed), fp.hunks)
    assert exc.value.what == "hunk 1/1 does not apply (line 1)"


def test_state_tells_pristine_applied_neither():
    old, new = "a\nb\nc\nd\n", "a\nb\nX\nd\n"
    fp = roundtrip(old, new)
    assert hunks.state(hunks.split(old), fp.hunks)[0] is FileState.PRISTINE
    assert hunks.state(hunks.split(new), fp.hunks)[0] is FileState.APPLIED
    st, failure = hunks.state(hunks.split("a\nb\nY\nd\n"), fp.hunks)
    assert st is FileState.NEITHER and failure is not None


@pytest.mark.parametrize("diff,message", [
    ("--- a/p/x\n+++ b/p/x\n@@ -1,3 +1,3 @@\n a\n", "t: malformed diff: Hunk is shorter than expected"),
    ("--- a/p/x\n+++ b/p/x\n@@ -1,1 +1,1 @@\n a\n b\n", "t: lines outside the hunks"),
    ("--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "t: unsafe target path '../x'"),
    ("--- a//etc/x\n+++ b//etc/x\n@@ -1 +1 @@\n-a\n+b\n", "t: unsafe target path '/etc/x'"),
    ("--- a/p/x\n+++ b/p/y\n@@ -1 +1 @@\n-a\n+b\n", "t: source and target differ"),
    ("--- a/p/x\r\n+++ b/p/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n", "t: carriage returns in the diff"),
    ("diff --git a/p/x b/p/x\nindex 1..2 100644\nBinary files a/p/x and b/p/x differ\n", "t: binary file 'p/x'"),
    ("--- /dev/null\n+++ b/p/x\n@@ -0,0 +1 @@\n+a\n", "t: added file 'p/x'"),
    ("", "t: no file in the diff"),
])
def test_bad_diffs_are_rejected_with_their_reason(diff, message):
    with pytest.raises(DiffError) as exc:
        hunks.parse(diff, "t")
    assert exc.value.what == message


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
