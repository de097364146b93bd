"""The GPU benchmark's CPU-side parts (benchmarks/gpu_accept.py): configs, layouts, corpus, table.

Everything here runs without torch or a GPU, so CI tests it (tests/test_gpu_accept.py); the
benchmark itself needs a GPU and vLLM and never runs in CI.

The target is a small DeepSeek-V3: MLA with DeepSeek-R1's head dims (FA3 has kernels for them),
q_lora, the last two of 8 layers MoE (noaux_tc routing). Its architecture name is
``DeepseekV2ForCausalLM``, the class vLLM serves DeepSeek-V2/V3 with, because that name is in the
v2 model runner's default list on 0.24.0-0.28.0 (``DeepseekV3ForCausalLM`` is not): a default
launch there runs the runner that loses ids stated only in ``eagle_config``.
The drafter is a plain EAGLE-3 Llama drafter (one decoder layer over [embeds, fc(aux states)]),
trained at aux layer ids (3, 6, 7), none of them vLLM's default for 8 layers, (2, 4, 5).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

LAYERS = 8
VOCAB = 512
HIDDEN = 256
# vLLM's default for 8 layers is (2, 4, 5): none of these. Not starting at 1 either: SpecForge-layout
# ids that start at 1 are read as SpecForge's output-of-layer numbering (SGLang 0.5.13's rule).
TRAINED_IDS = [3, 6, 7]
DEFAULT_IDS = [2, LAYERS // 2, LAYERS - 3]  # what vLLM captures when a runner reads no ids: (2, 4, 5)
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]

TARGET = dict(
    architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v3",
    vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=LAYERS,
    num_attention_heads=8, num_key_value_heads=8, q_lora_rank=128, kv_lora_rank=512,
    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, head_dim=64,
    first_k_dense_replace=6, moe_layer_freq=1, moe_intermediate_size=128,
    n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
    topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True,
    routed_scaling_factor=2.5, num_nextn_predict_layers=0, hidden_act="silu",
    max_position_embeddings=2048, rope_theta=10000.0, rope_scaling=None, rope_interleave=True,
    rms_norm_eps=1e-6, attention_bias=False, tie_word_embeddings=False, bos_token_id=1,
    eos_token_id=2, pad_token_id=3, initializer_range=0.02, torch_dtype="bfloat16",
)

# One Llama decoder layer, as vLLM's llama_eagle3 builds it: q/k/v read [embeds, hidden] (2 x H).
DRAFT_LAYER = dict(hidden_size=HIDDEN, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=64, hidden_act="silu", rms_norm_eps=1e-6, rope_theta=10000.0,
                   max_position_embeddings=2048)


def specforge_config(ids: list[int]) -> dict:
    """config.json as SpecForge 0.2.0 exports a Llama EAGLE-3 drafter (its shipped draft configs,
    e.g. configs/kimi-k2-eagle3.json): LlamaForCausalLMEagle3, the ids only under eagle_config,
    a reduced vocabulary declared by draft_vocab_size (here the whole vocabulary)."""
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True},
            "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "num_hidden_layers": 1, "attention_bias": False,
            "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
            **DRAFT_LAYER}


def speculators_config(ids: list[int]) -> dict:
    """config.json as speculators 0.9.0 writes an EAGLE-3 drafter (models/eagle3/config.py): the ids
    at the top level, the layer as transformer_layer_config. speculators' own defaults turn the
    EAGLE 3.1 switches on (norm_before_fc, norm_output); this drafter is plain EAGLE-3, so they are
    written off, as speculators writes them for such a drafter."""
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
             "num_hidden_layers": 1, "tie_word_embeddings": False, "dtype": "bfloat16", **DRAFT_LAYER}
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
            "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                   "verifier": {"architectures": TARGET["architectures"], "name_or_path": "target"}},
            "transformer_layer_config": layer, "draft_vocab_size": VOCAB, "norm_before_residual": False,
            "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": list(ids),
            "norm_before_fc": False, "fc_norm": False, "norm_output": False, "embed_requires_grad": False,
            "torch_dtype": "bfloat16"}


LAYOUTS = {"specforge": specforge_config, "speculators": speculators_config}
# Weight names per layout: SpecForge keeps its module names (midlayer.*) and drops the embedding
# (the engine shares the target's); speculators writes layers.0.* and keeps embed_tokens.
_PREFIX = {"specforge": "midlayer.", "speculators": "layers.0."}


def layout_names(layout: str, names: list[str]) -> dict[str, str]:
    """Our drafter's parameter names (``layer.*`` for the decoder layer) -> the layout's names;
    names the layout leaves out are absent."""
    out = {}
    for n in names:
        if n.startswith("layer."):
            out[n] = _PREFIX[layout] + n.removeprefix("layer.")
        elif n == "embed_tokens.weight" and layout == "specforge":
            continue
        else:
            out[n] = n
    return out


def ids_stated(config: dict) -> tuple[list[int] | None, list[int] | None]:
    """(top-level ids, eagle_config ids) as a drafter config states them."""
    return (config.get("eagle_aux_hidden_state_layer_ids"),
            (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids"))


# --- text a package ships: the standard library's docstrings -------------------------------------

def corpus(stdlib: Path | None = None) -> tuple[list[str], list[str]]:
    """(training, held-out) docstrings of the standard library's top-level modules, in file order;
    every eleventh file is held out."""
    root = stdlib or Path(ast.__file__).parent
    train: list[str] = []
    held: list[str] = []
    for i, path in enumerate(sorted(root.glob("*.py"))):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        docs = [ast.get_docstring(n) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        (held if i % 11 == 10 else train).extend(d for d in docs if d and len(d.split()) >= 8)
    return train, held


_WORD = re.compile(r"\w+|[^\w\s]+")  # what tokenizers' Whitespace pre-tokenizer splits on


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def vocabulary(texts: list[str]) -> list[str]:
    """The specials, then the most frequent words (ties by first appearance), VOCAB in all."""
    counts = Counter(w for t in texts for w in words(t))
    return SPECIALS + [w for w, _ in counts.most_common(VOCAB - len(SPECIALS))]


def encode(text: str, vocab: dict[str, int]) -> list[int]:
    return [vocab.get(w, 0) for w in words(text)]


# --- what a run measured, and the table ----------------------------------------------------------

AUX_LOG = re.compile(r"Using (?:Eagle3 )?auxiliary layers from (model|speculative config|worker): \(([\d, ]+)\)")


def aux_from_log(text: str) -> tuple[list[int], str] | None:
    """The aux layer ids the engine logged, and where it says it took them from."""
    m = AUX_LOG.search(text)
    return None if m is None else ([int(x) for x in m.group(2).split(",") if x.strip()], m.group(1))


def spec_counters(metrics: list[tuple[str, object]]) -> dict:
    """vLLM's spec-decode counters from llm.get_metrics() as (name, value or values) pairs."""
    out: dict = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": []}
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted"}
    for name, value in metrics:
        if name in names:
            out[names[name]] += int(value)  # type: ignore[call-overload]
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            vals = [int(v) for v in value]  # type: ignore[attr-defined]
            out["per_pos"] = [a + b for a, b in zip(out["per_pos"] or [0] * len(vals), vals)]
    return out


def diversity(outputs: list[list[int]]) -> tuple[int, int]:
    """Unique tokens and unique bigrams over the generated outputs (a loop has few of both)."""
    toks = {t for o in outputs for t in o}
    bigrams = {(a, b) for o in outputs for a, b in zip(o, o[1:])}
    return len(toks), len(bigrams)


@dataclass
class Row:
    release: str
    layout: str
    runner: str
    mode: str
    state: str  # "pristine" | "patched"
    aux: list[int] | None
    aux_source: str
    predicted: list[int] | None  # what patcher's drafter check said the engine would capture
    drafts: int
    accepted: int
    per_pos: list[int] = field(default_factory=list)
    unique_tokens: int = 0
    unique_bigrams: int = 0
    target_agrees: float | None = None  # share of outputs equal to the training target's own greedy text

    @property
    def mean_len(self) -> float:
        return 1 + self.accepted / self.drafts if self.drafts else float("nan")

    def rates(self) -> list[float]:
        return [a / self.drafts for a in self.per_pos] if self.drafts else []


def reference(rows: list[Row], row: Row) -> Row | None:
    """The row this one is compared with: the same release, runner and mode, pristine, in the
    layout the pristine engine honours (the one whose logged ids are the trained ids)."""
    for r in rows:
        if (r.release, r.runner, r.mode, r.state) == (row.release, row.runner, row.mode, "pristine") \
                and r.aux == TRAINED_IDS:
            return r
    return None


def table(rows: list[Row]) -> str:
    head = ("| release | layout | runner | mode | state | aux ids logged | predicted | mean accepted length | "
            "acceptance per position | ratio to reference | unique tokens / bigrams |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ref = reference(rows, r)
        ratio = f"{r.mean_len / ref.mean_len:.3f}" if ref is not None and ref.drafts and r.drafts else "n/a"
        aux = "?" if r.aux is None else f"{tuple(r.aux)} ({r.aux_source})"
        pred = "?" if r.predicted is None else str(tuple(r.predicted))
        rates = ", ".join(f"{x:.3f}" for x in r.rates()) or "n/a"
        lines.append(f"| {r.release} | {r.layout} | {r.runner} | {r.mode} | {r.state} | {aux} | {pred} | "
                     f"{r.mean_len:.3f} | {rates} | {ratio} | {r.unique_tokens} / {r.unique_bigrams} |")
    return "\n".join(lines)


# --- the compile-cache case --------------------------------------------------------------------

def with_eagle_config_ids(config: dict, ids: list[int]) -> dict:
    """The drafter's config with its ``eagle_config`` ids replaced, as a user edits them in place."""
    return {**config, "eagle_config": {**config.get("eagle_config", {}), "eagle_aux_hidden_state_layer_ids": list(ids)}}


_CACHE_DIR = re.compile(r"Using cache directory: (\S+) for vLLM's torch\.compile")
# With torch >= 2.10 vLLM compiles ahead of time (VLLM_USE_AOT_COMPILE on by default): the graph
# that runs is the artifact under torch_aot_compile/<hash>, whose hash is vLLM's config hash alone,
# while the folder above also hashes the traced files (it can change when the graph does not).
_AOT_PATH = re.compile(r"(?:Directly load AOT compilation from path|saved AOT compiled function to) (\S+)")
_CACHE_LOAD = re.compile(r"Directly load (?:AOT compilation|the compiled graph)")
CACHE_LINE = re.compile(r"Using cache directory|Directly load|saved AOT|Compiling model again|aux.*layers")


def compile_cache(text: str) -> tuple[str | None, bool]:
    """(the compile-cache key the engine logged, whether it loaded a compiled graph from it): the AOT
    artifact's folder where there is one, else the torch.compile cache folder."""
    m = _AOT_PATH.search(text) or _CACHE_DIR.search(text)
    return (m.group(1) if m else None), bool(_CACHE_LOAD.search(text))


@dataclass
class CacheRow:
    release: str
    state: str
    step: str  # "first" (cache cold) | "edited" (ids edited in place, cache warm)
    ids: list[int]  # what the drafter's eagle_config states at this step
    cache_dir: str | None
    loaded: bool
    aux_model: str | None  # what the model inside the worker was set to capture
    drafts: int
    accepted: int
    per_pos: list[int] = field(default_factory=list)

    @property
    def mean_len(self) -> float:
        return 1 + self.accepted / self.drafts if self.drafts else float("nan")


def cache_table(rows: list[CacheRow]) -> str:
    """One line per run; "key" says whether the edit changed the compile cache's folder (its hash)."""
    head = ("| release | state | step | eagle_config ids | compile cache | model set to capture | "
            "mean accepted length | acceptance per position |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    first: dict[str, CacheRow] = {}
    for r in rows:
        if r.step == "first":
            first[r.state] = r
            cache = "cold: compiled" if not r.loaded else "loaded (was warm)"
        else:
            same = r.state in first and r.cache_dir is not None and r.cache_dir == first[r.state].cache_dir
            cache = ("same key: compiled graph loaded" if same and r.loaded else
                     "same key: recompiled" if same else "new key: recompiled" if not r.loaded else "new key: loaded")
        rates = ", ".join(f"{a / r.drafts:.3f}" for a in r.per_pos) if r.drafts else "n/a"
        lines.append(f"| {r.release} | {r.state} | {r.step} | {tuple(r.ids)} | {cache} | {r.aux_model or '?'} | "
                     f"{r.mean_len:.3f} | {rates} |")
    return "\n".join(lines)


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":  # a look at the corpus: python benchmarks/gpu_accept_parts.py
    t, h = corpus()
    print(f"{len(t)} training and {len(h)} held-out docstrings; vocabulary head: {vocabulary(t)[4:24]}",
          file=sys.stderr)


_CAPTURES = re.compile(r"captures \[([\d, ]+)\]")


def predicted_capture(report: dict, runner: str) -> list[int] | None:
    """What ``patcher drafter check --json`` says the target captures, for the runner a launch
    uses ("default": the finding that names the runner the launch uses by default)."""
    for f in report.get("findings", []):
        if not f.get("code", "").startswith("aux.capture"):
            continue
        msg = f.get("message", "")
        if (runner == "default" and "by default" in msg) or (runner != "default" and f"{runner} runner" in msg):
            m = _CAPTURES.search(msg)
            return [int(x) for x in m.group(1).split(",")] if m else None
    return None
