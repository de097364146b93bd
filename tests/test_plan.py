"""plan.py on its own: every state, its wording and its choices, on small installs made in a folder.

No pip, no interpreter: an `Install` is a folder of files and the RECORD we hash from them, a
family is a manifest and diffs written beside it. What the user reads (detail, hint) is asserted
whole, because it is the product: a state with the wrong words is a wrong answer. Written for the
mutmut run on plan.py (issue 13); each test's docstring names what it holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.core import bookkeeping, manifest, plan, release_files
from patcher.core.hunks import FileState
from patcher.core.plan import State
from patcher.environment.engines import Install, sha256_record
from patcher.errors import PatcherError, WriteError
from tests.support import toy

ENGINE = "toyengine"
CORE = "toyengine/core.py"


def install(root: Path, files: dict[str, str], version: str = "1.0", others: dict[str, str] | None = None,
            record_only: tuple[str, ...] = ()) -> Install:
    """An install of ``files`` (path -> text); ``record_only`` are listed in RECORD but absent."""
    site = root / "site"
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(text.encode())
    record = {rel: sha256_record(text.encode()) for rel, text in files.items()}
    record.update({rel: "sha256=gone" for rel in record_only})
    return Install(ENGINE, Version(version), site, site / f"{ENGINE}-{version}.dist-info", record,
                   python=None, python_version=None, cache_tag=None, pycache_prefix=None, others=others or {})


def family(root: Path, toml: str, diffs: dict[str, str], releases: str | None = None, name: str = "fix"):
    folder = root / "patches" / ENGINE / name
    folder.mkdir(parents=True)
    (folder / "patch.toml").write_text(toml)
    for fname, text in diffs.items():
        (folder / fname).write_text(text)
    if releases is not None:
        (folder.parent / "releases.txt").write_text(releases)
    return manifest.load(folder)


def diff(path: str, old: list[str], new: list[str], start: int = 1) -> str:
    """A one-hunk diff replacing ``old`` by ``new`` at line ``start`` (no context: the lines are the anchor)."""
    body = "".join(f"-{ln}\n" for ln in old) + "".join(f"+{ln}\n" for ln in new)
    return f"--- a/{path}\n+++ b/{path}\n@@ -{start},{len(old)} +{start},{len(new)} @@\n{body}"


def one(inst: Install, fam, records: dict | None = None) -> plan.Status:
    (st,) = plan.assess(inst, (fam,), records or {})
    return st


# ------------------------------------------------------------------ unknown releases: the nearest variant

# Two variants far apart, each rewriting its own line of core.py; releases.txt makes 1.8 and 3.0
# undeclared (a gap, and past the newest release).
TWO = """title = "t"
why = "w"
[[variant]]
id = "old"
versions = ">=1.0,<1.1"
[[variant]]
id = "new"
versions = ">=2.8,<2.9"
"""
TWO_DIFFS = {"old.diff": diff(CORE, ["a = 1"], ["a = 10"]),
             "new.diff": diff(CORE, ["b = 2"], ["b = 20"], start=2)}
RELEASES = "1.0\n2.8\n"


def _unknown(tmp_path, toml, diffs, files, version, releases=RELEASES):
    return one(install(tmp_path, files, version), family(tmp_path, toml, diffs, releases))


def test_nearest_is_the_variant_with_most_hunks_still_fitting(tmp_path):
    """`old`'s first hunk still finds its text, at the file's first line; `new` is nearer by
    version but fits nothing: nearest is `old`, and the detail names its first failure. (Kills
    _fitting_hunks reading no lines, searching from line 1, and `n =` for `n +=`: old's last
    file fits nothing.)"""
    diffs = {"old.diff": diff(CORE, ["a = 1"], ["a = 10"]) + diff("toyengine/other.py", ["x = 1"], ["x = 10"]),
             "new.diff": TWO_DIFFS["new.diff"]}
    st = _unknown(tmp_path, TWO, diffs, {CORE: "a = 1\nc = 3\n", "toyengine/other.py": "y = 1\n"}, "3.0")
    assert (st.state, st.variant, st.untested) == (State.UNKNOWN, "old", False)
    assert st.detail == ("no variant declared for 3.0; nearest is old ('<1.1,>=1.0'), which does not fit: "
                         "toyengine/other.py: hunk 1/1 does not apply (line 1); wanted 'x = 1' (line 1 of the "
                         "hunk's old text), found 'y = 1' (file line 1)")
    assert st.hint == ("'patcher apply --skip fix' applies the others and exits 0 without it; for this one, use a "
                       "release from VERSIONS.md or file an issue with 'patcher verify --json'")


def test_a_hunk_at_a_file_end_without_newline_counts_as_fitting(tmp_path):
    """The same choice when old's fitting hunk ends at a last line without a newline: it fits
    only when `locate` is told so (kills the flag dropped or passed as the search start)."""
    eof = (f"--- a/{CORE}\n+++ b/{CORE}\n@@ -1,2 +1,2 @@\n a = 1\n-z = 9\n\\ No newline at end of file\n"
           "+z = 90\n\\ No newline at end of file\n")
    diffs = {"old.diff": eof + diff("toyengine/other.py", ["x = 1"], ["x = 10"]), "new.diff": TWO_DIFFS["new.diff"]}
    st = _unknown(tmp_path, TWO, diffs, {CORE: "a = 1\nz = 9", "toyengine/other.py": "y = 1\n"}, "3.0")
    assert (st.state, st.variant) == (State.UNKNOWN, "old")


def test_nearest_by_version_when_no_variant_fits(tmp_path):
    """Nothing fits: the variant whose range is nearest wins. 1.8 sits between 1.0-1.1 and 2.8:
    a major component outweighs any minor one (kills _distance weighting later components more,
    or not counting the first)."""
    st = _unknown(tmp_path, TWO, TWO_DIFFS, {CORE: "q = 0\n"}, "1.8")
    assert (st.state, st.variant) == (State.UNKNOWN, "old"), st.detail
    assert st.detail.startswith("no variant declared for 1.8; nearest is old ('<1.1,>=1.0'), which does not fit: ")


def test_wildcard_ranges_are_measured_from_their_release(tmp_path):
    """`==1.0.*` is measured from 1.0 (kills _bounds stripping the wrong end or whitespace: the
    wildcard then reaches Version() and raises)."""
    toml = TWO.replace(">=1.0,<1.1", "==1.0.*").replace(">=2.8,<2.9", "==2.8.*")
    st = _unknown(tmp_path, toml, TWO_DIFFS, {CORE: "q = 0\n"}, "1.8")
    assert (st.state, st.variant) == (State.UNKNOWN, "old"), st.detail


def test_equally_near_ranges_pick_the_newer(tmp_path):
    """1.3 is as near to 1.0-1.2 as to 1.4-1.6: the newer range wins, as the comment says (with a
    float distance 1.2 was 1e-16 nearer, and this tie-break never ran)."""
    toml = TWO.replace(">=1.0,<1.1", ">=1.0,<1.2").replace(">=2.8,<2.9", ">=1.4,<1.6")
    st = _unknown(tmp_path, toml, TWO_DIFFS, {CORE: "q = 0\n"}, "1.3", releases="1.0\n1.5\n")
    assert (st.state, st.variant) == (State.UNKNOWN, "new"), st.detail


def test_an_open_ended_only_variant_is_still_the_nearest(tmp_path):
    """A family whose one variant declares no bound (versions = "") past the newest release: it is
    the nearest (kills the missing defaults of max(_bounds) and of _distance's min)."""
    toml = 'title = "t"\nwhy = "w"\n[[variant]]\nid = "any"\nversions = ""\n'
    st = _unknown(tmp_path, toml, {"any.diff": TWO_DIFFS["old.diff"]}, {CORE: "q = 0\n"}, "3.0", releases="1.0\n")
    assert (st.state, st.variant) == (State.UNKNOWN, "any"), st.detail
    assert st.detail.startswith("no variant declared for 3.0; nearest is any (''), which does not fit: ")


UPSTREAM_ONLY = """title = "t"
why = "w"
[[upstream]]
id = "up2"
versions = ">=1.0"
since = "1.0"
ref = "toy/toy#2"
covers = "Kimi-K2 targets only"
evidence = [{ file = "toyengine/core.py", contains = ["fixed = True"] }]
"""


def test_no_variant_and_no_evidence_is_an_unknown_release_to_report(tmp_path):
    """A family with no variant at all (kills max() over no variants without its default)."""
    st = _unknown(tmp_path, UPSTREAM_ONLY, {}, {CORE: "q = 0\n"}, "3.0", releases="1.0\n")
    assert (st.state, st.variant, st.detail) == (State.UNKNOWN, None, "no entry covers 3.0")
    assert st.hint == ("'patcher apply --skip fix' applies the others and exits 0 without it; for this one, use a "
                       "release from VERSIONS.md or file an issue with 'patcher verify --json'")


def test_an_untested_release_held_upstream_keeps_the_entrys_id(tmp_path):
    """Past the newest release, the upstream evidence holds: upstream, untested, and the entry's
    own id, which probes' `when` names (kills upstream_id dropped or None)."""
    st = _unknown(tmp_path, UPSTREAM_ONLY, {}, {CORE: "fixed = True\n"}, "3.0", releases="1.0\n")
    assert (st.state, st.untested, st.upstream_id) == (State.UPSTREAM, True, "up2")
    assert st.detail == ("fix present (upstream since 1.0 (toy/toy#2; Kimi-K2 targets only)); "
                         "3.0 itself is not in our matrix")


# ------------------------------------------------------------------ declared releases: upstream, refused, older

# The toy engine's family (tests/support/toy.py) with its refusal narrowed, so that a release
# below it (0.3) is declared by nothing and judged as older by its files.
TOY = toy.MANIFEST.replace('versions = "<1.0"', 'versions = ">=0.5,<0.9"')
assert TOY != toy.MANIFEST
V1 = {"v1.diff": diff(CORE, ["    return 1"], ["    return 2"], start=2)}
PRISTINE = "def value():\n    return 1\n"
PATCHED = "def value():\n    return 2\n"


def _toy(tmp_path, files, version, toml=TOY, releases="0.5\n1.0\n2.0\n", records=None):
    return one(install(tmp_path, files, version), family(tmp_path, toml, V1, releases), records)


def test_upstream_without_covers_says_only_since_and_ref(tmp_path):
    """No `covers`: nothing after the ref (kills _covers always adding '; ' or 'XXXX')."""
    st = _toy(tmp_path, {CORE: PATCHED}, "2.0")
    assert (st.state, st.detail, st.upstream_id) == (State.UPSTREAM, "fixed upstream since 2.0 (toy/toy#2)", "upstream")


@pytest.mark.parametrize("files, failed", [
    ({CORE: PRISTINE}, "toyengine/core.py lacks 'return 2'"),
    ({}, "toyengine/core.py is missing (wanted it to contain 'return 2')"),
], ids=["lacks", "missing"])
def test_a_declared_upstream_release_without_the_fix_is_a_conflict(tmp_path, files, failed):
    st = _toy(tmp_path, files, "2.0")
    assert (st.state, st.variant) == (State.CONFLICT, None)
    assert st.detail == f"2.0 should carry the upstream fix (toy/toy#2) but {failed}"
    assert st.hint == ("put the published files back (python -m pip install --force-reinstall --no-deps "
                       f"toyengine==2.0, run with the python whose site-packages is {tmp_path / 'site'}); "
                       "if it persists, file an issue")


def test_a_refusal_whose_evidence_fails_still_refuses_and_says_so(tmp_path):
    st = _toy(tmp_path, {CORE: PRISTINE}, "0.7")
    assert (st.state, st.warnings) == (State.REFUSED, [
        "the refusal's evidence does not hold here: toyengine/core.py contains 'def value'"])


def test_a_refused_release_says_why_and_what_to_use(tmp_path):
    st = _toy(tmp_path, {CORE: "x = 1\n"}, "0.7")
    assert (st.state, st.detail, st.warnings) == (State.REFUSED, "no core module; use 1.0 or newer", [])
    assert st.hint == "install toyengine 1.0 or newer (VERSIONS.md: what each release gets)"


def test_a_release_older_than_every_covered_one_is_refused_by_its_files(tmp_path):
    """0.3 is declared by no entry and older than releases.txt's oldest (0.5): refused because the
    refusal's evidence holds on its files."""
    st = _toy(tmp_path, {CORE: "x = 1\n"}, "0.3")
    assert (st.state, st.detail) == (State.REFUSED, "no core module; use 1.0 or newer (judged by its files: "
                                                    "0.3 is older than every release we cover)")


def test_the_oldest_covered_release_is_never_judged_as_older(tmp_path):
    """releases.txt's oldest release itself, declared by no entry, is an unknown release: only a
    release below it is 'older than every release we cover' (kills `>` for `>=`)."""
    st = _toy(tmp_path, {CORE: "x = 1\n"}, "0.4", releases="0.4\n1.0\n2.0\n")
    assert st.state is State.UNKNOWN, st.detail


def test_an_older_release_is_not_refused_by_a_refusal_without_evidence(tmp_path):
    """A refusal that names no evidence proves nothing about an undeclared release's files
    (kills `or` for `and`)."""
    toml = TOY.replace('[{ file = "toyengine/core.py", lacks = ["def value"] }]', "[]")
    st = _toy(tmp_path, {CORE: "x = 1\n"}, "0.3", toml=toml)
    assert st.state is State.UNKNOWN, st.detail


# ------------------------------------------------------------------ declared variant: what the files say

OTHER = "toyengine/other.py"
TWO_FILES = {"v1.diff": V1["v1.diff"] + diff(OTHER, ["x = 1"], ["x = 2"])}
# {site}: the test's site-packages; the hint names this environment's pip, never a bare 'pip'
REINSTALL = ("put the published files back (python -m pip install --force-reinstall --no-deps toyengine==1.0, run "
             "with the python whose site-packages is {site}) and apply again")


def _record(variant="v1", version="1.0", files=None):
    return {"toyengine/fix": {"variant": variant, "version": version, "files": files or {}}}


def _v1(tmp_path, files, records=None, diffs=V1, version="1.0", record_only=()):
    fam = family(tmp_path, TOY, diffs, "0.5\n1.0\n2.0\n")
    return one(install(tmp_path, files, version, record_only=record_only), fam, records)


@pytest.mark.parametrize("files, records, state, detail, hint", [
    ({CORE: PRISTINE}, None, State.PENDING, "variant v1 is not applied yet", "run 'patcher apply'"),
    ({CORE: PATCHED}, None, State.APPLIED, "variant v1 is in place", ""),
    ({CORE: PRISTINE}, _record("v1", "1.0"), State.LOST,
     "was applied (variant v1 on 1.0); the files are pristine again",
     "an upgrade or reinstall replaced them: run 'patcher apply' again"),
    ({CORE: "zzz\n"}, None, State.CONFLICT,
     "files are neither published nor ours: toyengine/core.py: hunk 1/1 does not apply (line 2); wanted 'return 1' "
     "(line 1 of the hunk's old text), found 'zzz' (file line 1)", "someone edited them; " + REINSTALL),
    # the state file lists no hashes: nothing says we wrote these bytes
    ({CORE: "zzz\n"}, _record("v0", "0.9"), State.CONFLICT,
     "files are neither published nor ours: toyengine/core.py: hunk 1/1 does not apply (line 2); wanted 'return 1' "
     "(line 1 of the hunk's old text), found 'zzz' (file line 1)", "someone edited them; " + REINSTALL),
    ({CORE: "zzz\n"}, _record("v0", "0.9", {CORE: sha256_record(b"zzz\n")}), State.CONFLICT,
     "files hold variant v0 as an earlier patcher release wrote it on 0.9 (the state file's hashes match), and this "
     "patcher's variant v1 differs from that diff: toyengine/core.py: hunk 1/1 does not apply (line 2); wanted "
     "'return 1' (line 1 of the hunk's old text), found 'zzz' (file line 1)", "our diff changed since; " + REINSTALL),
    # one hash matches, one file changed since: a hand edit after all
    ({CORE: "zzz\n", OTHER: "x = 1\n"}, _record("v0", "0.9", {CORE: sha256_record(b"zzz\n"), OTHER: "sha256=x"}),
     State.CONFLICT, "files are neither published nor ours: toyengine/core.py: hunk 1/1 does not apply (line 2); "
     "wanted 'return 1' (line 1 of the hunk's old text), found 'zzz' (file line 1)",
     "someone edited them; " + REINSTALL),
], ids=["pending", "applied", "lost", "edited", "no-hashes", "earlier-diff", "one-hash-differs"])
def test_every_state_of_a_declared_release_in_words(tmp_path, files, records, state, detail, hint):
    st = _v1(tmp_path, files, records)
    assert (st.state, st.variant, st.untested) == (state, "v1", False)
    assert list(st.files) == [CORE] and st.files[CORE] is {
        State.PENDING: FileState.PRISTINE, State.LOST: FileState.PRISTINE, State.APPLIED: FileState.APPLIED,
        State.CONFLICT: FileState.NEITHER}[state]
    assert st.detail == detail
    assert st.hint == hint.format(site=tmp_path / "site")
    assert (st.warnings, st.edited, st.probes) == ([], [], [])


@pytest.mark.parametrize("records", [None, _record("v1", "1.0")], ids=["never-applied", "applied-before-upgrade"])
def test_an_untested_release_matching_a_pre_image_can_be_applied(tmp_path, records):
    """Past the newest release, files matching v1's pre-image: unknown release, untested, with the
    per-file states `apply --allow-untested` needs (actions applies only an untested status with
    files), also when the state file says an earlier release had it applied."""
    st = _v1(tmp_path, {CORE: PRISTINE}, records, version="3.0")
    assert (st.state, st.variant, st.untested, st.files) == (State.UNKNOWN, "v1", True, {CORE: FileState.PRISTINE})
    # the covered release 3.0 descends from (2.0) is upstream; its fix is gone, v1's pre-image is back
    assert st.detail == ("3.0 is not a tested release, but its files match variant v1's pre-image byte for byte "
                         "(not the entry of 2.0, upstream '<3.0,>=2.0')")
    assert st.hint == "'patcher apply --allow-untested' applies it"


def test_a_partial_apply_is_a_conflict_naming_the_files_that_carry_it(tmp_path):
    third = "toyengine/third.py"
    diffs = {"v1.diff": TWO_FILES["v1.diff"] + diff(third, ["t = 1"], ["t = 2"])}
    st = _v1(tmp_path, {CORE: PATCHED, OTHER: "x = 1\n", third: "t = 2\n"}, diffs=diffs)
    assert (st.state, st.variant) == (State.CONFLICT, "v1")
    assert st.detail == "partially applied: only toyengine/core.py, toyengine/third.py carry variant v1"
    assert st.hint == "'patcher revert --only toyengine/fix' restores the published files"
    assert st.files == {CORE: FileState.APPLIED, OTHER: FileState.PRISTINE, third: FileState.APPLIED}


@pytest.mark.parametrize("record_only", [(), (OTHER,)], ids=["not-in-record", "in-record-but-deleted"])
def test_a_target_file_that_is_missing_is_named(tmp_path, record_only):
    """Missing on disk or absent from RECORD: the file is 'neither' and the detail says it is missing
    (its first failure, even when another file fails too)."""
    st = _v1(tmp_path, {CORE: "zzz\n"}, diffs={"v1.diff": diff(OTHER, ["x = 1"], ["x = 2"]) + V1["v1.diff"]},
             record_only=record_only)
    assert st.state is State.CONFLICT
    assert st.detail.startswith("files are neither published nor ours: toyengine/other.py is missing"), st.detail
    assert st.files == {OTHER: FileState.NEITHER, CORE: FileState.NEITHER}


def test_applied_files_changed_since_are_listed_as_edited(tmp_path):
    """The state file's hashes are what apply wrote: a file whose bytes differ now (still holding
    the post-image) is listed; one that matches is not; another variant's record lists nothing."""
    both = {CORE: PATCHED + "# note\n", OTHER: "x = 2\n"}
    hashes = {CORE: sha256_record(PATCHED.encode()), OTHER: sha256_record(b"x = 2\n")}
    st = _v1(tmp_path, both, _record("v1", "1.0", hashes), diffs=TWO_FILES)
    assert (st.state, st.edited) == (State.APPLIED, [CORE])
    st = _v1(tmp_path / "b", both, _record("v0", "1.0", hashes), diffs=TWO_FILES)
    assert (st.state, st.edited) == (State.APPLIED, [])


# ------------------------------------------------------------------ requires: blocked and warning

def _requires(severity: str) -> str:
    return TOY + f"""[[requires]]
distribution = "Toy_Dep"
versions = ">=2.0"
severity = "{severity}"
why = "toy needs toydep 2"
"""


def _with_dep(tmp_path, severity, files, have, version="1.0", records=None):
    fam = family(tmp_path, _requires(severity), V1, "0.5\n1.0\n2.0\n")
    others = {} if have is None else {"toy-dep": have}
    return one(install(tmp_path, files, version, others=others), fam, records)


@pytest.mark.parametrize("have, found", [(None, "no Toy_Dep"), ("1.0", "Toy_Dep 1.0")])
def test_a_blocking_requirement_blocks_what_would_be_written(tmp_path, have, found):
    """Pending, lost or unknown: blocked, with what is wanted and found and the pip line
    (the manifest's name is matched as pip normalises it: lower case, '_' as '-')."""
    st = _with_dep(tmp_path, "blocked", {CORE: PRISTINE}, have)
    assert (st.state, st.warnings) == (State.BLOCKED, [])
    assert st.detail == f"toy needs toydep 2: wanted Toy_Dep>=2.0, found {found}"
    assert st.hint == "pip install 'Toy_Dep>=2.0'"
    lost = _with_dep(tmp_path / "lost", "blocked", {CORE: PRISTINE}, have, records=_record())
    assert lost.state is State.BLOCKED
    unknown = _with_dep(tmp_path / "unknown", "blocked", {CORE: PRISTINE}, have, version="3.0")
    assert unknown.state is State.BLOCKED


def test_a_met_requirement_changes_nothing(tmp_path):
    st = _with_dep(tmp_path, "blocked", {CORE: PRISTINE}, "2.1")
    assert (st.state, st.warnings, st.hint) == (State.PENDING, [], "run 'patcher apply'")


def test_a_blocking_requirement_on_an_applied_family_is_a_warning(tmp_path):
    """Already applied: nothing is to be written, so nothing to block; the user is still told."""
    st = _with_dep(tmp_path, "blocked", {CORE: PATCHED}, "1.0")
    assert (st.state, st.warnings) == (State.APPLIED, ["toy needs toydep 2: wanted Toy_Dep>=2.0, found Toy_Dep 1.0"])


@pytest.mark.parametrize("files, version, state, warned", [
    ({CORE: PRISTINE}, "1.0", State.PENDING, True),
    ({CORE: PATCHED}, "1.0", State.APPLIED, True),
    ({CORE: PRISTINE}, "3.0", State.UNKNOWN, True),
    ({CORE: PATCHED}, "2.0", State.UPSTREAM, False),  # not ours: our requirement says nothing about it
    ({CORE: "x = 1\n"}, "0.7", State.REFUSED, False),
    ({CORE: "zzz\n"}, "1.0", State.CONFLICT, False),
], ids=["pending", "applied", "unknown", "upstream", "refused", "conflict"])
def test_a_warning_requirement_warns_only_where_our_variant_is_or_would_be(tmp_path, files, version, state, warned):
    st = _with_dep(tmp_path, "warning", files, None, version)
    assert st.state is state
    assert st.warnings == (["toy needs toydep 2: wanted Toy_Dep>=2.0, found no Toy_Dep"] if warned else [])


# ------------------------------------------------------------------ compose: the bytes apply / revert write

def _compose_case(tmp_path, files, diffs=TWO_FILES):
    inst = install(tmp_path, files)
    fam = family(tmp_path, TOY, diffs, "0.5\n1.0\n2.0\n")
    (st,) = plan.assess(inst, (fam,), {})
    return st, release_files.Files(inst)


def test_compose_applies_every_file_of_a_variant(tmp_path):
    st, files = _compose_case(tmp_path, {CORE: PRISTINE, OTHER: "x = 1\n"})
    assert plan.compose([st], files) == {CORE: PATCHED.encode(), OTHER: b"x = 2\n"}


@pytest.mark.parametrize("first", [CORE, OTHER])
def test_compose_undoes_a_partial_apply_only_where_it_landed(tmp_path, first):
    """Reverting a partial apply: the file that never got the variant is left out, not
    'reverse-applied' into an error, and the files after it are still undone (the diff lists
    either file first)."""
    core, other = V1["v1.diff"], diff(OTHER, ["x = 1"], ["x = 2"])
    diffs = {"v1.diff": core + other if first == CORE else other + core}
    st, files = _compose_case(tmp_path, {CORE: PATCHED, OTHER: "x = 1\n"}, diffs)
    assert st.state is State.CONFLICT
    assert plan.compose([st], files, reverse=True) == {CORE: PRISTINE.encode()}


def test_two_families_on_one_file_compose_in_order(tmp_path):
    """The second family's hunks apply to the first one's result, not to the published file."""
    inst = install(tmp_path, {CORE: PRISTINE})
    first = family(tmp_path, TOY, V1, "0.5\n1.0\n2.0\n")
    second = family(tmp_path, TOY, {"v1.diff": diff(CORE, ["    return 2"], ["    return 3"], start=2)}, name="more")
    sts = plan.assess(inst, (first, second), {})
    assert plan.compose(sts, release_files.Files(inst)) == {CORE: b"def value():\n    return 3\n"}


def test_compose_names_a_missing_file_and_an_overlap(tmp_path):
    inst = install(tmp_path, {CORE: PRISTINE})
    fam = family(tmp_path, TOY, TWO_FILES, "0.5\n1.0\n2.0\n")
    (st,) = plan.assess(inst, (fam,), {})
    with pytest.raises(PatcherError) as exc:
        plan.compose([st], release_files.Files(inst))
    assert exc.value.what == "toyengine/fix: toyengine/other.py is missing"
    clash = family(tmp_path, TOY, V1, name="again")
    with pytest.raises(PatcherError) as exc:
        plan.compose(plan.assess(inst, (family(tmp_path / "x", TOY, V1, "0.5\n1.0\n2.0\n"), clash), {}),
                     release_files.Files(inst))
    err = exc.value
    assert (err.what, err.wanted, err.found, err.hint) == (
        "toyengine/again: hunk 1/1 does not apply (line 2) in toyengine/core.py",
        "'return 1' (line 1 of the hunk's old text)", "'return 2' (file line 2)", "two families overlap on this file")


# ------------------------------------------------------------------ Files: bytes in, the same bytes out

LATIN1 = b"# caf\xe9: not UTF-8\ndef value():\n    return 1\n"


def test_bytes_that_are_not_utf8_survive_assess_and_compose(tmp_path):
    """A line we do not touch keeps its bytes, whatever they are (kills decode/encode without
    surrogateescape: strict UTF-8 raises on the 0xE9 byte)."""
    inst = install(tmp_path, {})
    (inst.site / CORE).parent.mkdir(parents=True)
    (inst.site / CORE).write_bytes(LATIN1)
    inst.record[CORE] = sha256_record(LATIN1)
    fam = family(tmp_path, TOY, {"v1.diff": diff(CORE, ["    return 1"], ["    return 2"], start=3)}, "0.5\n1.0\n2.0\n")
    files = release_files.Files(inst)
    (st,) = plan.assess(inst, (fam,), {})
    assert st.state is State.PENDING, st.detail
    assert files.sha(CORE) == inst.record[CORE]
    new = plan.compose([st], files)
    assert new == {CORE: LATIN1.replace(b"return 1", b"return 2")}


def test_files_reads_only_what_record_lists_and_each_file_once(tmp_path, monkeypatch):
    inst = install(tmp_path, {CORE: PRISTINE})
    (inst.site / OTHER).write_text("x = 1\n")  # on disk, not in RECORD: not an engine file
    reads: list[str] = []
    real = Install.read
    monkeypatch.setattr(Install, "read", lambda self, rel: reads.append(rel) or real(self, rel))
    files = release_files.Files(inst)
    assert (files.lines(OTHER), files.text(OTHER), files.sha(OTHER)) == (None, None, None)
    assert files.text(CORE) == PRISTINE and files.text(CORE) == PRISTINE
    assert files.sha(CORE) == sha256_record(PRISTINE.encode())
    assert reads == [CORE]



def test_every_requirement_is_checked_after_one_that_is_met(tmp_path):
    """Two requirements, the first met: the second still blocks (kills `break` for `continue`)."""
    toml = _requires("warning").replace('severity = "warning"', 'severity = "blocked"') + """[[requires]]
distribution = "otherdep"
versions = ">=1.0"
severity = "blocked"
why = "toy needs otherdep"
"""
    inst = install(tmp_path, {CORE: PRISTINE}, others={"toy-dep": "2.0"})
    st = one(inst, family(tmp_path, toml, V1, "0.5\n1.0\n2.0\n"))
    assert (st.state, st.detail) == (State.BLOCKED, "toy needs otherdep: wanted otherdep>=1.0, found no otherdep")


# ------------------------------------------------------------------ a state file from before an upgrade

def test_a_state_file_naming_a_file_the_new_release_dropped_reads_as_lost(tmp_path):
    """Patched on a release that had toyengine/gone.py, then `pip install --no-deps` of one without
    it (seen for real: SGLang 0.5.12+'s kimi_k25_eagle3.py after a downgrade to 0.5.10.post1): the
    state file is ours and says so; the family is lost, not 'a state file patcher did not write'.
    A path that could climb out is still refused."""
    inst = install(tmp_path, {CORE: PRISTINE})
    digest = sha256_record(b"x")
    doc = {"engine": ENGINE, "version": "1.1", "families": {"toyengine/fix": {
        "variant": "v1", "version": "1.1", "files": {CORE: digest, "toyengine/gone.py": digest}}}}
    records = bookkeeping.parse_state(json.dumps(doc).encode(), tmp_path / "toyengine.json", inst)
    st = one(inst, family(tmp_path, TOY, V1, "0.5\n1.0\n2.0\n"), records)
    assert (st.state, st.detail) == (State.LOST, "was applied (variant v1 on 1.1); the files are pristine again")
    doc["families"]["toyengine/fix"]["files"] = {"../evil.py": digest}
    with pytest.raises(WriteError, match="is not one patcher wrote"):
        bookkeeping.parse_state(json.dumps(doc).encode(), tmp_path / "toyengine.json", inst)


# ------------------------------------------------------------------ evidence that survives code moving (issue 31)

MOVED = '''title = "t"
why = "w"

[[variant]]
id = "v1"
versions = "<2.0"

[[upstream]]
versions = ">=2.0"
since = "2.0"
ref = "toy/toy#2"
evidence = [{ defines = "Reader.read", contains = [["layer_ids", "aux_ids"]] }]
'''


@pytest.mark.parametrize("where, body", [
    ("toyengine/core.py", "class Reader:\n    def read(self):\n        return self.layer_ids\n"),
    ("toyengine/moved/deep.py", "class Reader:\n    def read(self):\n        return self.aux_ids\n"),
], ids=["first-home", "moved-and-respelled"])
def test_a_definition_is_found_wherever_record_puts_it(tmp_path, where, body):
    """`defines` reads the function's own source in whichever file RECORD lists it, and a
    `contains` item that is a list holds when any one spelling is there."""
    fam = family(tmp_path, MOVED, {"v1.diff": V1["v1.diff"]}, "1.0\n2.0\n")
    st = one(install(tmp_path, {CORE: PRISTINE, where: body} if where != CORE else {CORE: body}, "2.0"), fam)
    assert (st.state, st.detail) == (State.UPSTREAM, "fixed upstream since 2.0 (toy/toy#2)")


def test_a_definition_elsewhere_in_the_file_does_not_count(tmp_path):
    """The strings must be in the named definition, not anywhere in its file."""
    fam = family(tmp_path, MOVED, {"v1.diff": V1["v1.diff"]}, "1.0\n2.0\n")
    text = "class Reader:\n    def read(self):\n        return None\n\n\ndef other():\n    return 'layer_ids'\n"
    st = one(install(tmp_path, {CORE: text}, "2.0"), fam)
    assert st.state is State.CONFLICT
    assert st.detail == ("2.0 should carry the upstream fix (toy/toy#2) but toyengine/core.py: def Reader.read "
                         "lacks 'layer_ids' or 'aux_ids'")


def test_no_definition_anywhere_is_named(tmp_path):
    fam = family(tmp_path, MOVED, {"v1.diff": V1["v1.diff"]}, "1.0\n2.0\n")
    st = one(install(tmp_path, {CORE: PRISTINE}, "2.0"), fam)
    assert st.detail == ("2.0 should carry the upstream fix (toy/toy#2) but def Reader.read (under toyengine/) is "
                         "missing (wanted it to contain 'layer_ids' or 'aux_ids')")


def test_a_new_release_is_judged_by_the_entry_of_the_release_it_descends_from(tmp_path):
    """Two variants whose pre-images both fit a release newer than every one we cover: the one
    declared for the newest covered release decides (no first match in manifest order)."""
    toml = ('title = "t"\nwhy = "w"\n\n[[variant]]\nid = "old"\nversions = "<2.0"\ndiffs = ["a.diff"]\n\n'
            '[[variant]]\nid = "new"\nversions = ">=2.0"\ndiffs = ["a.diff", "b.diff"]\n')
    other = "toyengine/other.py"
    fam = family(tmp_path, toml, {"a.diff": V1["v1.diff"], "b.diff": diff(other, ["x = 1"], ["x = 2"])}, "1.0\n2.0\n")
    st = one(install(tmp_path, {CORE: PRISTINE, other: "x = 1\n"}, "3.0"), fam)
    assert (st.state, st.variant, st.untested) == (State.UNKNOWN, "new", True)
    # the newest release's variant does not fit, the older one does: offered, saying so
    st = one(install(tmp_path / "b", {CORE: PRISTINE, other: "y = 1\n"}, "3.0"), fam)
    assert (st.state, st.variant) == (State.UNKNOWN, "old")
    assert st.detail == ("3.0 is not a tested release, but its files match variant old's pre-image byte for byte "
                         "(not the entry of 2.0, variant new)")


def test_two_other_entries_that_fit_are_flagged_not_guessed(tmp_path):
    toml = ('title = "t"\nwhy = "w"\n\n[[variant]]\nid = "a"\nversions = "<1.0"\n\n[[variant]]\nid = "b"\n'
            'versions = ">=1.0,<2.0"\n\n[[upstream]]\nversions = ">=2.0"\nsince = "2.0"\nref = "r"\n'
            'evidence = [{ file = "toyengine/core.py", contains = ["fixed"] }]\n')
    fam = family(tmp_path, toml, {"a.diff": V1["v1.diff"], "b.diff": V1["v1.diff"]}, "0.5\n1.0\n2.0\n")
    st = one(install(tmp_path, {CORE: PRISTINE}, "3.0"), fam)
    assert (st.state, st.variant, st.files) == (State.UNKNOWN, None, {})
    assert st.detail == ("3.0 is not a tested release and its files match variant a and variant b (not the entry "
                         "of 2.0, upstream '>=2.0'): flagged for review, not guessed")
