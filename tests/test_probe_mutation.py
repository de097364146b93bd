"""A fast sample of benchmarks/probe_mutation.py: a few hunks left out, each must be caught.

The full score (every hunk of every probed variant) is the benchmark; this keeps the hunks
that once went undetected (issue 13) from going undetected again, all on one release so one
engine swap serves each engine's part of the sample.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patcher import hunks, manifest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import probe_mutation  # noqa: E402

RELEASE = {"vllm": "0.17.1", "sglang": "0.5.12.post1"}
# (engine, family, variant, hunk index across its diffs or None for the pristine run alone)
SAMPLE = [
    ("vllm", "mla-aux-capture", "B12", 1),  # DeepseekV2Model.__init__'s default aux_hidden_state_layers = ()
    ("vllm", "mla-aux-capture", "B12", 9),  # eagle.py: K2.5's media token as the drafter's image token
    ("vllm", "sm120-allreduce-fusion", "D2", 1),  # the one-shot size table's SM120 entry
    ("vllm", "eagle3-target-whitelist", "A6", None),  # one hunk: the probe must fail on the pristine file
    ("sglang", "eagle3-loud-fc-skip", "v3", 0),  # the Llama drafter's check, left out of the 0.5.12+ variant
    ("sglang", "eagle3-loud-fc-skip", "v3", 1),  # the K2.5 MLA drafter's check (kimi_k25_eagle3.py)
    ("sglang", "eagle3-drafter-guards", "g2", 0),  # Llama drafter: norm_before_fc unread, reduced vocab without d2t
    ("sglang", "eagle3-drafter-guards", "g2", 1),  # MLA drafter: fc_norm/norm_output/norm_before_fc, d2t
]


def _family(engine: str, name: str) -> manifest.Family:
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, (engine,)) if f.name == name]
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
@pytest.mark.parametrize("engine,name,variant,hunk", SAMPLE, ids=[f"{f}-{v}-{h}" for _, f, v, h in SAMPLE])
def test_sampled_mutant_is_detected(engine, name, variant, hunk):
    fam = _family(engine, name)
    (var,) = [v for v in fam.variants if v.id == variant]
    release = probe_mutation.release_for(engine, var, RELEASE[engine])
    assert release == RELEASE[engine], f"{RELEASE[engine]} is not in {fam.id} {variant}'s range"
    rows = probe_mutation.score_variant(fam, var, release, only_hunk=hunk, log=lambda *_: None)
    assert rows, "nothing was scored"
    if hunk is None:
        assert rows[0].hunk == "pristine"
    else:
        labels = [label for d in var.diffs for label in probe_mutation.hunk_labels((fam.folder / d).read_text(), d)]
        assert [r.hunk for r in rows if r.hunk != "pristine"] == [labels[hunk]]
    missed = [f"{r.hunk}: {r.outcome}: {r.detail}" for r in rows if not r.ok]
    assert not missed, "\n".join(missed)
