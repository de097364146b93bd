"""A fast sample of benchmarks/probe_mutation.py: a few hunks left out, each must be caught.

The full score (every hunk of every probed variant) is the benchmark; this keeps the hunks
that once went undetected (issue 13) from going undetected again, all on one release so one
engine swap serves the whole sample.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patcher import hunks, manifest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import probe_mutation  # noqa: E402

RELEASE = "0.17.1"
# (family, variant, hunk index across its diffs or None for the pristine run alone)
SAMPLE = [
    ("mla-aux-capture", "B12", 1),  # DeepseekV2Model.__init__'s default aux_hidden_state_layers = ()
    ("mla-aux-capture", "B12", 9),  # eagle.py: K2.5's media token as the drafter's image token
    ("sm120-allreduce-fusion", "D2", 1),  # the one-shot size table's SM120 entry
    ("eagle3-target-whitelist", "A6", None),  # one hunk: the probe must fail on the pristine file
    ("eagle3-config-aux-ids", "E2", None),  # pristine: SpecForge ids ignored by both runners
]


def _family(name: str) -> manifest.Family:
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, ("vllm",)) if f.name == name]
    return fam


@pytest.mark.parametrize("path", sorted(manifest.PATCHES.glob("*/*/*.diff")), ids=lambda p: p.stem)
def test_leaving_one_hunk_out_leaves_exactly_the_others(path):
    text = path.read_text(encoding="utf-8")
    total = [h for fp in hunks.parse(text, "t") for h in fp.hunks]
    labels = probe_mutation.hunk_labels(text, path.name)
    assert len(labels) == len(total)
    for i in range(len(total)):
        rest = probe_mutation.without_hunk(text, i)
        kept = [h for fp in hunks.parse(rest, "t") for h in fp.hunks] if rest else []
        assert kept == total[:i] + total[i + 1:]


@pytest.mark.cpuenv
@pytest.mark.parametrize("name,variant,hunk", SAMPLE, ids=[f"{f}-{v}-{h}" for f, v, h in SAMPLE])
def test_sampled_mutant_is_detected(name, variant, hunk):
    fam = _family(name)
    (var,) = [v for v in fam.variants if v.id == variant]
    release = probe_mutation.release_for("vllm", var, RELEASE)
    assert release == RELEASE, f"{RELEASE} is not in {fam.id} {variant}'s range"
    rows = probe_mutation.score_variant(fam, var, release, only_hunk=hunk, log=lambda *_: None)
    assert rows, "nothing was scored"
    if hunk is None:
        assert rows[0].hunk == "pristine"
    else:
        assert [r.hunk for r in rows if r.hunk != "pristine"] == [
            probe_mutation.hunk_labels((fam.folder / var.diffs[0]).read_text(), var.diffs[0])[hunk]]
    missed = [f"{r.hunk}: {r.outcome}: {r.detail}" for r in rows if not r.ok]
    assert not missed, "\n".join(missed)
