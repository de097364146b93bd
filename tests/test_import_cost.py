"""patcher/probes/import_cost.py: which probe groups start first (the ones that import most of the engine).

An estimate read from the source: these tests pin what it follows and what it leaves out, and
that on real releases it ranks the probed modules as their measured import times do."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from patcher.maintainer import wheels
from patcher.probes import import_cost, probes

TOY = {
    "eng/__init__.py": "",
    "eng/a.py": "import os\nfrom eng.b import thing\nfrom . import c\nfrom .sub import deep as d\n",
    "eng/b.py": "import eng.d\nthing = 1\n",
    "eng/c.py": "",
    "eng/d.py": "",
    # indented imports (try, TYPE_CHECKING, functions) are left out: not what the import pays for
    "eng/e.py": "try:\n    import eng.c\nexcept ImportError:\n    pass\nif False:\n    from eng import d\n",
    # a parenthesised list: the first line's names are read, the module itself always
    "eng/f.py": "from eng.sub import (deep,\n    other)\n",
    "eng/sub/__init__.py": "",
    "eng/sub/deep.py": "from ..c import x\nfrom .. import d\n",
    "eng/sub/other.py": "",
}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for rel, text in TOY.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("modules,size", [
    (["eng.c"], 2),  # eng, eng.c
    (["eng.b"], 3),  # eng, eng.b, eng.d
    (["eng.sub.deep"], 5),  # eng, eng.sub, eng.sub.deep, and relative: eng.c, eng.d
    (["eng.a"], 7),  # eng, a, b, d, c, sub, sub.deep (``import os`` is not the engine's)
    (["eng.e"], 2),  # eng, eng.e: the indented imports are not followed
    (["eng.f"], 6),  # eng, f, sub, sub.deep (and its c, d), not sub.other on the next line
    (["eng.c", "eng.b"], 4),  # a preload and a module: one interpreter imports both
    (["eng.missing"], 0),
])
def test_closure_sizes(site, modules, size):
    assert import_cost.Closures(site, "eng").size(modules) == size


def test_an_unreadable_file_is_not_followed(site):
    (site / "eng" / "d.py").unlink()
    (site / "eng" / "d.py").mkdir()  # not a file: reading it fails, the estimate goes on
    assert import_cost.Closures(site, "eng").size(["eng.b"]) == 2


def test_groups_are_ranked_dearest_first_and_ties_keep_their_order(site):
    install = SimpleNamespace(site=site, engine="eng", package="eng")
    work = [[{"module": m, "preload": pre}] for m, pre in
            [("eng.c", []), ("eng.a", []), ("eng.d", []), ("eng.c", ["eng.b"])]]
    assert probes._dearest_first(install, work) == [1, 3, 0, 2]


@pytest.mark.wheels
@pytest.mark.parametrize("engine,version,modules", [
    ("vllm", "0.33.0", ["vllm.v1.worker.gpu_model_runner", "vllm.model_executor.models.deepseek_eagle3",
                        "vllm.model_executor.models.deepseek_v2", "vllm.model_executor.models.kimi_k25",
                        "vllm.compilation.passes.fusion.allreduce_rms_fusion",
                        "vllm.model_executor.models.llama_eagle3", "vllm.config.speculative",
                        "vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils",
                        "vllm.transformers_utils.configs.speculators.algos"]),
    ("sglang", "0.5.23", ["sglang.srt.models.kimi_k25", "sglang.srt.models.deepseek_v2",
                          "sglang.srt.models.kimi_k25_eagle3", "sglang.srt.models.llama_eagle3",
                          "sglang.srt.layers.layer_boundary.residual.add_norm",
                          "sglang.srt.layers.aux_hidden_states"]),
])
def test_on_the_release_the_ranking_follows_the_measured_import_times(engine, version, modules):
    """The groups ``patcher verify`` runs there, listed by the import time measured for each
    (``python -X importtime``, one forked child per module, CPU envs, quiet machine; vLLM 0.33.0:
    4.1, 3.0, 2.9, 2.7, 2.4, 2.1, 1.2, 0.8, 0.04 s; SGLang 0.5.23: 2.5, 2.3, 2.3, 1.6, 1.2, 0.09 s).
    The estimate may swap neighbours whose times are close, never put a cheap one far ahead of a
    dear one: the dearest first, and each within two places of where its time puts it."""
    site = wheels.tree(engine, version)
    work = [[{"module": m, "preload": []}] for m in modules]
    ranked = probes._dearest_first(SimpleNamespace(site=site, engine=engine, package=engine), work)
    assert ranked[0] == 0, [modules[g] for g in ranked]
    assert all(abs(place - g) <= 2 for place, g in enumerate(ranked)), [modules[g] for g in ranked]
