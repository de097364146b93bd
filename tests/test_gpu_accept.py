"""The GPU benchmark's CPU-side parts (benchmarks/gpu_accept_parts.py; issue 33): the drafter
layouts are the training tools' own, the check predicts what the table shows, the table is right.
Nothing here needs a GPU; the benchmark itself (benchmarks/gpu_accept.py) never runs in CI."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from patcher.cli.main import main
from tests.support import real_drafters
from tests.support.real_drafters import write_header_only

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gpu_accept_parts", ROOT / "benchmarks" / "gpu_accept_parts.py")
parts = importlib.util.module_from_spec(_spec)
sys.modules["gpu_accept_parts"] = parts
_spec.loader.exec_module(parts)

H = parts.HIDDEN
SHAPES = {"fc.weight": (H, 3 * H), "lm_head.weight": (parts.VOCAB, H), "norm.weight": (H,),
          "embed_tokens.weight": (parts.VOCAB, H), "layer.self_attn.q_proj.weight": (256, 2 * H),
          "layer.self_attn.k_proj.weight": (128, 2 * H), "layer.self_attn.v_proj.weight": (128, 2 * H),
          "layer.self_attn.o_proj.weight": (H, 256), "layer.mlp.gate_proj.weight": (512, H),
          "layer.mlp.up_proj.weight": (512, H), "layer.mlp.down_proj.weight": (H, 512),
          "layer.input_layernorm.weight": (H,), "layer.hidden_norm.weight": (H,),
          "layer.post_attention_layernorm.weight": (H,)}


def _drafter(root: Path, layout: str) -> Path:
    """The benchmark's drafter as it saves it (same names, same config), header-only."""
    folder = root / f"drafter-{layout}"
    folder.mkdir(parents=True)
    names = parts.layout_names(layout, list(SHAPES))
    shapes = {names[n]: (shape, "BF16") for n, shape in SHAPES.items() if n in names}
    write_header_only(folder / "model.safetensors", {**shapes, "d2t": ((parts.VOCAB,), "I64"),
                                                     "t2d": ((parts.VOCAB,), "BOOL")})
    (folder / "config.json").write_text(json.dumps(parts.LAYOUTS[layout](parts.TRAINED_IDS)))
    return folder


def test_the_layouts_state_the_ids_where_each_tool_does():
    assert parts.ids_stated(parts.specforge_config([3, 6, 7])) == (None, [3, 6, 7])
    assert parts.ids_stated(parts.speculators_config([3, 6, 7])) == ([3, 6, 7], None)
    assert set(parts.TRAINED_IDS).isdisjoint({2, parts.LAYERS // 2, parts.LAYERS - 3})  # not vLLM's default
    assert parts.TRAINED_IDS[0] != 1  # a list from 1 reads as SpecForge's output-of-layer numbering


def test_the_layouts_have_the_tools_own_fields(tmp_path):
    """Every top-level field speculators 0.9.0 writes, and SpecForge's draft-config fields, as the
    real-tool fixtures (tests/support/real_drafters.py, checked against the tools' packages) have them."""
    ours = parts.speculators_config(parts.TRAINED_IDS)
    theirs = json.loads((real_drafters.speculators_kimi(tmp_path) / "config.json").read_text())
    assert set(ours) == set(theirs)
    assert set(ours["speculators_config"]) == set(theirs["speculators_config"])
    assert {k: ours[k] for k in ("norm_before_fc", "fc_norm", "norm_output")} == dict.fromkeys(
        ("norm_before_fc", "fc_norm", "norm_output"), False)  # a plain EAGLE-3 drafter says so
    spec = parts.specforge_config(parts.TRAINED_IDS)
    assert spec["architectures"] == real_drafters.SPECFORGE_KIMI_K2["architectures"]
    assert set(spec["eagle_config"]) == set(real_drafters.SPECFORGE_KIMI_K2["eagle_config"])


def test_layout_weight_names():
    names = parts.layout_names("specforge", list(SHAPES))
    assert names["layer.self_attn.q_proj.weight"] == "midlayer.self_attn.q_proj.weight"
    assert "embed_tokens.weight" not in names  # SpecForge drops it; the engine shares the target's
    names = parts.layout_names("speculators", list(SHAPES))
    assert names["layer.mlp.up_proj.weight"] == "layers.0.mlp.up_proj.weight"
    assert names["embed_tokens.weight"] == "embed_tokens.weight"


@pytest.mark.wheels
@pytest.mark.parametrize("version, layout, runner, published, patched", [
    ("0.22.1", "specforge", "v2", [2, 4, 5], [3, 6, 7]),  # the v2 runner drops eagle_config ids: the default
    ("0.22.1", "specforge", "v1", [3, 6, 7], [3, 6, 7]),  # 0.22.1's v1 runner reads them
    ("0.22.1", "speculators", "v2", [3, 6, 7], [3, 6, 7]),  # top-level ids: every runner
    # A default launch of a DeepseekV2ForCausalLM target runs v2 on 0.26.0 (its default list names the
    # class). Seen on the H200: the engine captured (2, 4, 5) where the check had said (3, 6, 7).
    ("0.26.0", "specforge", "default", [2, 4, 5], [3, 6, 7]),
    ("0.26.0", "speculators", "default", [3, 6, 7], [3, 6, 7]),
])
def test_the_check_predicts_what_the_benchmark_rows_compare(tmp_path, version, layout, runner, published, patched):
    """The prediction column of the table (what `drafter check` says the release captures) for the
    benchmark's own drafters: the first test of the CPU verdicts against the GPU is only as good as
    this prediction, so it is pinned here, before and after 'patcher apply'."""
    import shutil

    from patcher.maintainer import wheels

    site = tmp_path / "site"  # the whole release: the check reads its model registry and runners too
    shutil.copytree(wheels.tree("vllm", version), site)
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(parts.TARGET))
    drafter = _drafter(tmp_path, layout)
    import io

    def predicted() -> list[int] | None:
        out = io.StringIO()
        main(["drafter", "check", str(drafter), "--site", str(site), "--target", str(target), "--json"], out=out)
        return parts.predicted_capture(json.loads(out.getvalue()), runner)

    assert predicted() == published
    assert main(["apply", "--engine", "vllm", "--site", str(site), "--no-probes"], out=io.StringIO()) == 0
    assert predicted() == patched


def test_aux_ids_are_read_from_either_log_line():
    assert parts.aux_from_log("x [gpu_model_runner.py:5217] Using auxiliary layers from speculative config: "
                              "(3, 6, 7)\n") == ([3, 6, 7], "speculative config")
    assert parts.aux_from_log("Using Eagle3 auxiliary layers from model: (2, 4, 5)") == ([2, 4, 5], "model")
    assert parts.aux_from_log("nothing") is None


def test_counters_and_diversity():
    c = parts.spec_counters([("vllm:spec_decode_num_drafts", 10), ("vllm:spec_decode_num_accepted_tokens", 12),
                             ("vllm:spec_decode_num_accepted_tokens_per_pos", [8, 3, 1]),
                             ("vllm:spec_decode_num_accepted_tokens_per_pos", [1, 0, 0]), ("other", 5)])
    assert (c["drafts"], c["accepted"], c["per_pos"]) == (10, 12, [9, 3, 1])
    assert parts.diversity([[1, 2, 1, 2], [3]]) == (3, 2)


def test_the_table_compares_each_row_with_the_layout_the_published_engine_honours():
    row = lambda layout, state, aux, acc: parts.Row("0.22.1", layout, "v2", "eager", state, aux, "model",  # noqa: E731
                                                    aux, 100, acc, [acc, 0, 0], 40, 90)
    rows = [row("specforge", "pristine", [2, 4, 5], 20), row("speculators", "pristine", [3, 6, 7], 150),
            row("specforge", "patched", [3, 6, 7], 148)]
    assert parts.reference(rows, rows[0]) is rows[1] and parts.reference(rows, rows[2]) is rows[1]
    text = parts.table(rows).splitlines()
    assert len(text) == 5 and text[1].count("---") == text[0].count("|") - 1
    assert "| 1.200 | 0.200, 0.000, 0.000 | 0.480 |" in text[2]  # 1.2 / 2.5
    assert "| 2.480 | 1.480, 0.000, 0.000 | 0.992 |" in text[4]


def test_the_corpus_is_text_the_standard_library_ships():
    train, held = parts.corpus()
    assert len(train) > 1000 and len(held) > 100
    vocab = parts.vocabulary(train)
    assert len(vocab) == parts.VOCAB == len(set(vocab)) and vocab[:4] == parts.SPECIALS
    index = {w: i for i, w in enumerate(vocab)}
    assert parts.encode("Return the value.", index) == [index["return"], index["the"], index["value"], index["."]]


def _logged_formats(version: str, path: str, start: str) -> list[str]:
    """The logger format strings of one release file that begin with ``start`` (adjacent literals joined)."""
    import ast

    from patcher.maintainer import wheels

    tree = ast.parse((wheels.tree("vllm", version) / path).read_text())
    found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return [s for s in found if s.startswith(start)]


def test_the_cache_case_reads_the_release_s_own_compile_cache_lines():
    """The cache case decides 'same key, loaded' from vLLM's own log lines: formatted here from the
    format strings of the 0.22.1 wheel, the release the case runs on."""
    (using,) = _logged_formats("0.22.1", "vllm/compilation/backends.py", "Using cache directory")
    (aot,) = _logged_formats("0.22.1", "vllm/compilation/decorators.py", "Directly load AOT")
    folder = "/w/vllm-cache-pristine/torch_compile_cache/4d1e0f/rank_0_0/backbone"
    assert parts.compile_cache("INFO " + using % folder + "\n") == (folder, False)
    assert parts.compile_cache(using % folder + "\n" + aot % "/w/x/model") == ("/w/x/model", True)
    assert parts.compile_cache("nothing") == (None, False)
    # torch >= 2.10: the AOT artifact is the key that decides the graph, saved cold, loaded warm
    (saved,) = _logged_formats("0.22.1", "vllm/compilation/decorators.py", "saved AOT")
    artifact = "/w/vllm-cache-pristine/torch_compile_cache/torch_aot_compile/9a7c/rank_0_0/model"
    assert parts.compile_cache(using % folder + "\n" + saved % artifact) == (artifact, False)
    assert parts.compile_cache(using % "/w/other" + "\n" + aot % artifact) == (artifact, True)
    assert parts.CACHE_LINE.search(saved % artifact) and not parts.CACHE_LINE.search("INFO nothing")


def test_the_cache_table_says_whether_the_edit_changed_the_key():
    edited = parts.with_eagle_config_ids(parts.specforge_config(parts.DEFAULT_IDS), parts.TRAINED_IDS)
    assert parts.ids_stated(edited) == (None, parts.TRAINED_IDS)
    assert edited["eagle_config"]["use_aux_hidden_state"] is True  # the rest of eagle_config is kept
    assert parts.DEFAULT_IDS == [2, 4, 5]
    row = lambda state, step, ids, folder, loaded, acc: parts.CacheRow(  # noqa: E731
        "0.22.1", state, step, ids, folder, loaded, str(tuple(ids)), 100, acc, [acc, 0, 0])
    text = parts.cache_table([row("pristine", "first", [2, 4, 5], "/a", False, 20),
                              row("pristine", "edited", [3, 6, 7], "/a", True, 20),
                              row("patched", "first", [2, 4, 5], "/b", False, 20),
                              row("patched", "edited", [3, 6, 7], "/c", False, 50)]).splitlines()
    assert len(text) == 6
    assert "| pristine | edited | (3, 6, 7) | same key: compiled graph loaded |" in text[3]
    assert "| patched | edited | (3, 6, 7) | new key: recompiled |" in text[5]
    assert text[5].endswith("| 1.500 | 0.500, 0.000, 0.000 |")
