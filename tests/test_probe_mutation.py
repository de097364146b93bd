"""A fast sample of benchmarks/probe_mutation.py: a few hunks left out, each must be caught.

The full score (every hunk of every probed variant) is the benchmark; this keeps the hunks
that once went undetected (issue 13) from going undetected again, all on one release so one
engine swap serves most of the sample; an entry may name its own release when its variant does
not cover RELEASE.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patcher import hunks, manifest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import probe_mutation  # noqa: E402

RELEASE = "0.17.1"
# (family, variant, hunk index across its diffs or None for the pristine run alone[, release])
SAMPLE = [
    ("mla-aux-capture", "B12", 1),  # DeepseekV2Model.__init__'s default aux_hidden_state_layers = ()
    ("mla-aux-capture", "B12", 9),  # eagle.py: K2.5's media token as the drafter's image token
    ("sm120-allreduce-fusion", "D6", 1),  # the one-shot size table's SM120 entry
    ("sm120-allreduce-fusion", "D6", 2),  # flashinfer_max_size reads the opt-in table only with the flag on
    ("sm120-allreduce-fusion", "D9", 0, "0.33.0"),  # the opt-in table (default table left as published)
    ("eagle3-target-whitelist", "A6", None),  # one hunk: the probe must fail on the pristine file
    ("eagle3-v2-runner-guard", "G2", None, "0.16.0"),  # one hunk: the V2 runner refuses EAGLE-3
]
SAMPLE = [(*s, RELEASE) if len(s) == 3 else s for s in SAMPLE]


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
@pytest.mark.parametrize("name,variant,hunk,want", SAMPLE, ids=[f"{f}-{v}-{h}" for f, v, h, _ in SAMPLE])
def test_sampled_mutant_is_detected(name, variant, hunk, want):
    fam = _family(name)
    (var,) = [v for v in fam.variants if v.id == variant]
    release = probe_mutation.release_for("vllm", var, want)
    assert release == want, f"{want} is not in {fam.id} {variant}'s range"
    rows = probe_mutation.score_variant(fam, var, release, only_hunk=hunk, log=lambda *_: None)
    assert rows, "nothing was scored"
    if hunk is None:
        assert rows[0].hunk == "pristine"
    else:
        assert [r.hunk for r in rows if r.hunk != "pristine"] == [
            probe_mutation.hunk_labels((fam.folder / var.diffs[0]).read_text(), var.diffs[0])[hunk]]
    missed = [f"{r.hunk}: {r.outcome}: {r.detail}" for r in rows if not r.ok]
    assert not missed, "\n".join(missed)
