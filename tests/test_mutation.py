"""Every hunk is caught by a probe: the mutant harness (patcher/maintainer/mutation.py).

The pure half checks the harness itself (leaving one hunk out leaves exactly the others). The
full tier judges, on a real import in the CPU env, each family's ``mutation_sample`` from its
patch.toml: the pristine release fails the probes and every mutant with one hunk left out fails
a probe or fails to apply (the whole variant passing is test_probes_cpu.py's proof). A new family declares its sample
in its manifest and needs no test file of its own; every variant, every hunk:
``python -m patcher.maintainer.mutation``.
"""

from __future__ import annotations

import pytest

from patcher.core import hunks, manifest
from patcher.maintainer import mutation
from tests.support import recorded

FAMILIES = manifest.load_all()
SAMPLE = [(f, v) for f in FAMILIES for v in f.variants if v.id in f.mutation_sample]


@pytest.mark.parametrize("path", sorted(manifest.PATCHES.glob("*/*/*.diff")), ids=lambda p: p.stem)
def test_leaving_one_hunk_out_leaves_exactly_the_others(path):
    text = path.read_text(encoding="utf-8")
    total = [h for fp in hunks.parse(text, "t") for h in fp.hunks]
    labels = mutation.hunk_labels(text, path.name)
    assert len(labels) == len(total)
    for i in range(len(total)):
        rest = mutation.without_hunk(text, i)
        kept = [h for fp in hunks.parse(rest, "t") for h in fp.hunks] if rest else []
        assert kept == total[:i] + total[i + 1:]


@pytest.mark.parametrize("fam", [f for f in FAMILIES if mutation.probed_variants(f)], ids=lambda f: f.id)
def test_every_probed_family_declares_a_mutation_sample(fam):
    """A family whose variants have probes proves in CI that each hunk of some variant is caught."""
    assert fam.mutation_sample, f"{fam.id}: add mutation_sample = [variant ids] to patch.toml"
    probed = {v.id for v in mutation.probed_variants(fam)}
    assert set(fam.mutation_sample) <= probed, f"{fam.id}: a sampled variant has no probe"


@pytest.mark.full
@pytest.mark.cpuenv
@pytest.mark.parametrize("fam,variant", SAMPLE, ids=[f"{f.id}-{v.id}" for f, v in SAMPLE])
def test_every_hunk_of_the_sampled_variant_is_caught(fam, variant):
    release = mutation.release_for(fam.engine, variant)
    assert release, f"no CPU env reaches {fam.id} {variant.id}'s range"
    # The whole variant passing its probes is test_probes_pass_on_real_import's proof (every probed
    # entry on a real import): not run twice in CI's budget.
    # Recorded per input (all of our own files, the release as published, its CPU env): a sample whose
    # inputs did not change is judged on the record; only a sample that passes is recorded.
    parts = [recorded.our_files(), fam.id, variant.id, *recorded.published_parts(fam.engine, release)]
    rows = recorded.truth("mutants", parts, lambda: _judged(fam, variant, release, [
        [r.hunk, r.outcome, r.detail if not r.ok else "", r.ok]
        for r in mutation.score_variant(fam, variant, release, log=lambda *_: None, whole=False)]))
    _judged(fam, variant, release, rows)


def _judged(fam, variant, release: str, rows: list) -> list:
    labels = [label for d in variant.diffs
              for label in mutation.hunk_labels((fam.folder / d).read_text(encoding="utf-8"), d)]
    assert [hunk for hunk, *_ in rows] == ["pristine", *labels]
    missed = [f"{hunk}: {outcome}: {detail}" for hunk, outcome, detail, ok in rows if not ok]
    assert not missed, f"{variant.id} on {release}:\n" + "\n".join(missed)
    return rows
