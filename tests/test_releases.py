"""Every published release in the coverage window, on its real wheel.

For each release: the state `verify` reports for every family must be the one the
manifest declares (proven by content: upstream evidence present, refusal reason
holding), and every variant must apply, compile, re-apply as a no-op and revert to
the bytes RECORD names. The wheels are fetched once per machine (patcher/maintainer/wheels.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patcher.core import manifest, matrix
from patcher.core.manifest import Refused, Upstream, Variant
from patcher.core.plan import State, assess
from patcher.environment import engines
from patcher.installer import actions
from patcher.maintainer import wheels
from patcher.maintainer.port_proof import scratch_site
from tests.support.tiers import release_param

RELEASES = [(e, v) for e in manifest.ENGINES for v in matrix.releases(e)]


# An expectation that does not come from the code under test: for a sample of releases holding the
# first and last covered release of every variant / upstream / refused range, the cell each family
# must show. Frozen from the reviewed matrix on 2026-12-01 and spot-checked against the wheels'
# files at the boundaries (e.g. vLLM 0.17.1 deepseek_v2.py has no SupportsEagle3, 0.18.0 has it;
# speculative.py lists "kimi_k2" in 0.18.0-0.21.0 and has no list from 0.22.0; AllReduceFusionPass
# first appears in 0.10.0; SGLang's set_eagle3_layers_to_capture first in 0.5.4.post2 and
# legacy_name_map first in 0.5.12). test_release_matches_the_table compares what plan.assess says
# on the real wheel with this table, so a manifest or plan.py change that moves a release fails
# until the table is changed too, on purpose. The table is each engine's
# patches/<engine>/reviewed.tsv (columns: its families, a row per release), read here.


def _reviewed(engine: str) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(the families, in column order; each reviewed release's cells) of patches/<engine>/reviewed.tsv."""
    rows = [line.split("\t") for line in (manifest.PATCHES / engine / "reviewed.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    (head, *families), *body = rows
    assert head == "release" and all(len(row) == len(families) + 1 for row in body), engine
    return tuple(families), {row[0]: tuple(row[1:]) for row in body}


REVIEWED = {engine: _reviewed(engine) for engine in manifest.ENGINES}
FAMILIES = {engine: families for engine, (families, _) in REVIEWED.items()}
EXPECTED: dict[tuple[str, str], tuple[str, ...]] = {
    (engine, version): cells for engine, (_, rows) in REVIEWED.items() for version, cells in rows.items()}


@pytest.mark.wheels
@pytest.mark.parametrize("engine,version", [release_param(e, v) for e, v in RELEASES])
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
        "VERSIONS.md is stale: run 'python -m patcher.core.matrix'"


def test_the_matrix_writes_only_into_a_checkout(tmp_path, monkeypatch, capsys):
    """Installed without -e, ROOT is site-packages: the matrix goes to stdout, nothing is written
    there (issue 42: it wrote VERSIONS.md into site-packages)."""
    monkeypatch.setattr(matrix, "ROOT", tmp_path)
    assert matrix.main([]) == 2 and list(tmp_path.iterdir()) == []
    got = capsys.readouterr()
    assert got.out == matrix.render() and "is not one" in got.err


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
    """The files of ``base`` published again as ``new``: a release newer than every manifest. Every
    module of it, not only the files our diffs touch: a newer release is judged by its scope too
    (patcher/core/derived_scope.py reads the modules beside and around ours)."""
    tree = wheels.tree(engine, base)
    install = engines.find(engine, site=tree)
    rels = {r for r in install.record if r.endswith(".py") and (tree / r).exists()}
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


def _cell(st) -> str:
    if st.state is State.PENDING:
        return f"patch {st.variant}"
    if st.state is State.UPSTREAM:
        return "upstream " + st.detail.split("since ", 1)[1].split(" ", 1)[0]
    return st.state.value


@pytest.mark.wheels
@pytest.mark.parametrize("engine,version", sorted(EXPECTED), ids=[f"{e}-{v}" for e, v in sorted(EXPECTED)])
def test_release_matches_the_table(engine, version):
    install = engines.find(engine, site=wheels.tree(engine, version))
    fams = manifest.load_all(manifest.PATCHES, (engine,))
    got = {st.family.name: _cell(st) for st in assess(install, fams, {})}
    assert got == dict(zip(FAMILIES[engine], EXPECTED[engine, version]))


def test_table_covers_every_family_and_range_boundary():
    """A new family or a moved boundary needs its hand-checked rows before the suite passes."""
    from packaging.version import Version

    missing = []
    for engine in manifest.ENGINES:
        fams = manifest.load_all(manifest.PATCHES, (engine,))
        assert {f.name for f in fams} == set(FAMILIES[engine]), f"{engine}: FAMILIES lists other families"
        covered = matrix.releases(engine)
        for f in fams:
            for entry in f.entries():
                inside = [r for r in covered if manifest.contains(entry.versions, Version(r))]
                missing += [f"{f.id} {entry.versions}: {r}" for r in {inside[0], inside[-1]} if inside
                            if (engine, r) not in EXPECTED]
    assert not missing, "add hand-checked rows to EXPECTED for: " + ", ".join(sorted(missing))
