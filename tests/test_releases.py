"""Every published release in the coverage window, on its real wheel.

For each release: the state `verify` reports for every family must be the one the
manifest declares (proven by content: upstream evidence present, refusal reason
holding), and every variant must apply, compile, re-apply as a no-op and revert to
the bytes RECORD names. The wheels are fetched once per machine (patcher/maintainer/wheels.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patcher import actions, engines, manifest, matrix
from patcher.manifest import Refused, Upstream, Variant
from patcher.plan import State, assess
from patcher.maintainer import wheels

RELEASES = [(e, v) for e in manifest.ENGINES for v in matrix.releases(e)]


def scratch_site(tree: Path, install: engines.Install, rels: set[str], dest: Path) -> Path:
    """A copy of the install holding its dist-info and the files our diffs touch."""
    shutil.copytree(install.dist_info, dest / install.dist_info.name)
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, dest / rel)
    return dest


@pytest.mark.wheels
@pytest.mark.parametrize("engine,version", RELEASES, ids=[f"{e}-{v}" for e, v in RELEASES])
def test_release(engine, version, tmp_path):
    tree = wheels.tree(engine, version)
    install = engines.find(engine, site=tree)
    assert str(install.version) == version
    fams = manifest.load_all(manifest.PATCHES, (engine,))
    problems = []
    pending = []
    for st in assess(install, fams, {}):
        entry = st.family.classify(install.version)
        want = {Variant: State.PENDING, Upstream: State.UPSTREAM, Refused: State.REFUSED}.get(type(entry))
        if want is None:
            problems.append(f"{st.family.id}: no entry declares {version}")
        elif st.state is not want or [w for w in st.warnings if "evidence" in w]:
            problems.append(f"{st.family.id}: declared {want.value}, found {st.state.value}: {st.detail} {st.warnings}")
        if st.state is State.PENDING:
            pending.append(st)
    assert not problems, "\n".join(problems)
    if not pending:
        return

    rels = {fp.path for st in pending for fp in st.family.patches[st.variant]}
    site = scratch_site(tree, install, rels, tmp_path / "site")
    only = tuple(st.family.id for st in pending)
    opts = actions.Options(site=site, probes=False, only=only)
    r = actions.apply(engine, opts)
    assert sorted(r.changed) == sorted(rels)
    assert {s.family.id: s.state for s in r.statuses} == {i: State.APPLIED for i in only}
    for rel in rels:
        source = (site / rel).read_text()
        compile(source, rel, "exec")  # the patched file is valid Python
    assert actions.apply(engine, opts).changed == []
    r = actions.revert(engine, opts)
    assert sorted(r.changed) == sorted(rels) and r.exit_code(False) == 0
    for rel in rels:
        assert install.pristine(rel, (site / rel).read_bytes()), f"{rel} differs from RECORD after revert"


def test_versions_md_is_current():
    assert (matrix.ROOT / "VERSIONS.md").read_text() == matrix.render(), \
        "VERSIONS.md is stale: run 'python -m patcher.matrix'"


def test_no_release_is_unknown():
    cells = [(e, v, f.id) for e, v in RELEASES for f in manifest.load_all(manifest.PATCHES, (e,))
             if matrix.cell(f, v) == "UNKNOWN"]
    assert not cells


def test_no_two_entries_claim_a_release():
    """The loader checks range boundaries; this checks every covered release."""
    from packaging.version import Version

    for e, v in RELEASES:
        for f in manifest.load_all(manifest.PATCHES, (e,)):
            hits = [x for x in (*f.variants, *f.upstream, *f.refused)
                    if manifest.contains(x.versions, Version(v))]
            assert len(hits) <= 1, f"{f.id}: {v} is claimed by {len(hits)} entries"


def fake_newer_release(engine: str, base: str, new: str, dest: Path) -> Path:
    """The files of ``base`` published again as ``new``: a release newer than every manifest."""
    tree = wheels.tree(engine, base)
    install = engines.find(engine, site=tree)
    rels = {fp.path for f in manifest.load_all(manifest.PATCHES, (engine,)) for v in f.variants
            for fp in f.patches[v.id]} | {ev.file for f in manifest.load_all(manifest.PATCHES, (engine,))
                                          for e in (*f.upstream, *f.refused) for ev in e.evidence}
    rels = {r for r in rels if (tree / r).exists()}
    site = scratch_site(tree, install, rels, dest)
    old = site / install.dist_info.name
    info = old.rename(site / f"{engine}-{new}.dist-info")
    meta = info / "METADATA"
    meta.write_text(meta.read_text().replace(f"Version: {base}", f"Version: {new}", 1))
    return site


@pytest.mark.wheels
def test_release_newer_than_every_manifest_is_classified_by_content(tmp_path):
    site = fake_newer_release("sglang", "0.5.23", "0.5.99", tmp_path / "site")
    install = engines.find("sglang", site=site)
    assert str(install.version) == "0.5.99"
    states = {s.family.name: s for s in assess(install, manifest.load_all(manifest.PATCHES, ("sglang",)), {})}
    # The fix is in the files: upstream, by content, naming the release that added it.
    assert states["k25-aux-capture"].state is State.UPSTREAM
    assert "since 0.5.10" in states["k25-aux-capture"].detail and states["k25-aux-capture"].untested
    # An open variant range does not claim it: judged by the pre-image instead.
    keys = states["eagle3-drafter-keys"]
    assert keys.state is State.UNKNOWN and "v2's pre-image byte for byte" in keys.detail
    # Same text as 0.5.23: the newest variant's pre-image matches byte for byte.
    gate = states["sm120-allreduce-fusion"]
    assert gate.state is State.UNKNOWN and "pre-image byte for byte" in gate.detail
    r = actions.apply("sglang", actions.Options(site=site, probes=False, only=("sglang/sm120-allreduce-fusion",)))
    assert r.changed == [] and r.exit_code(False) == 1  # not without --allow-untested
    r = actions.apply("sglang", actions.Options(site=site, probes=False, only=("sglang/sm120-allreduce-fusion",),
                                                allow_untested=True))
    assert r.changed and r.statuses[0].state is State.APPLIED and r.statuses[0].untested


@pytest.mark.wheels
def test_release_newer_than_every_manifest_names_the_nearest_variant(tmp_path):
    site = fake_newer_release("sglang", "0.5.23", "0.5.99", tmp_path / "site")
    target = site / "sglang/srt/layers/layer_boundary/residual/add_norm.py"
    target.write_text(target.read_text().replace("def flashinfer_ar_fusion_applies", "def renamed_upstream", 1))
    install = engines.find("sglang", site=site)
    (gate,) = [s for s in assess(install, manifest.load_all(manifest.PATCHES, ("sglang",)), {})
               if s.family.name == "sm120-allreduce-fusion"]
    assert gate.state is State.UNKNOWN
    assert "nearest is v11" in gate.detail and "does not apply" in gate.detail
