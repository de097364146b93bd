"""patcher/core/hunks.py, the pure hunk engine, by tables. Hypothesis round trips and GNU patch as an
oracle: test_hunks_properties.py."""

from __future__ import annotations

import pytest

from patcher.core import hunks
from patcher.core.hunks import FileState
from patcher.errors import DiffError, HunkFailed
from tests.support.diffs import roundtrip


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


