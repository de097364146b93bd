"""Drafters with real (random) tensors at tiny shapes, laid out as the training tools write them,
and the ways they go wrong (issue 52's grid).

Layouts, each from the tool's own conventions (tests/support/real_drafters.py cites the files):
- ``speculators``: speculators 0.9.0 at its EAGLE-3 defaults: its own config format
  (``speculators_model_type``, ``transformer_layer_config``, ids at the top level, ``norm_before_fc``
  and ``norm_output`` on), decoder keys ``layers.0.*``, ``embed_tokens`` saved, ``input_norm.weight``;
- ``speculators-hf``: the same tensors under a ``LlamaForCausalLMEagle3`` config (what SGLang, which
  reads no speculators config, is given: the GPU toolkit's drafter, or ``drafter fix``'s copy);
- ``specforge``: a SpecForge 0.2.0 export: ``LlamaForCausalLMEagle3``, ids in ``eagle_config``,
  ``midlayer.*``, no embeddings;
- ``mla``: an MLA EAGLE-3 head (``Eagle3DeepseekV2ForCausalLM``, DeepSeek-V3 attention fields).

Mutations: every tensor dropped in turn; each buffer the loaders know (rotary ``inv_freq``, a
KV-cache scale, speculators' verifier copy) and ones they do not (``cos_cached``, a ``q_norm`` of a
module the drafter does not build); the other decoder prefix and a ``model.`` prefix; one shape
that does not fit. Values are random, so the oracle can tell which tensor filled what.
"""

from __future__ import annotations

import functools
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patcher.drafter.safetensors_header import TensorInfo, encode_header

H, HEADS, KV, HEAD_DIM, INTER = 64, 4, 2, 16, 96
VOCAB, DRAFT_VOCAB, TARGET_LAYERS = 256, 128, 8
IDS = [1, 3, 5]
# MLA attention
Q_LORA, KV_LORA, NOPE, ROPE, V_DIM = 32, 16, 16, 8, 16
_SIZES = {"BF16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def target_config() -> dict:
    """A tiny DeepSeek-V3 target (MLA, one dense layer then MoE), as transformers reads it."""
    return {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
            "num_hidden_layers": TARGET_LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "q_lora_rank": Q_LORA, "kv_lora_rank": KV_LORA, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE,
            "v_head_dim": V_DIM, "intermediate_size": INTER, "moe_intermediate_size": 32, "n_routed_experts": 4,
            "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "n_group": 1,
            "topk_group": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid", "norm_topk_prob": True,
            "routed_scaling_factor": 2.5, "moe_layer_freq": 1, "vocab_size": VOCAB, "max_position_embeddings": 512,
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "num_nextn_predict_layers": 0, "hidden_act": "silu", "bos_token_id": 0, "eos_token_id": 1}


def write_target(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(target_config(), indent=1))
    return folder


def write_k25_target(folder: Path) -> Path:
    """Kimi-K2.5's layout of the same target: the multimodal wrapper, the text model under
    ``text_config`` with Kimi's own model type (as moonshotai/Kimi-K2.5's config.json has it)."""
    text = {k: v for k, v in target_config().items() if k != "architectures"}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(
        {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
         "text_config": {**text, "model_type": "kimi_k2"}}, indent=1))
    return folder


def _llama_config(ids_in_eagle: bool = True) -> dict:
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
            "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HEAD_DIM,
            "intermediate_size": INTER, "num_hidden_layers": 1, "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB,
            "rms_norm_eps": 1e-6, "hidden_act": "silu", "max_position_embeddings": 512, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16", "target_hidden_size": H,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": IDS, "use_aux_hidden_state": True}}


def _speculators_config() -> dict:
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": H,
             "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": HEADS,
             "num_key_value_heads": KV, "head_dim": HEAD_DIM, "hidden_act": "silu", "max_position_embeddings": 512,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "rope_theta": 10000.0, "torch_dtype": "bfloat16"}
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
            "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                   "verifier": {"architectures": ["DeepseekV3ForCausalLM"], "name_or_path": "t"}},
            "transformer_layer_config": layer, "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False,
            "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": IDS, "norm_before_fc": True,
            "fc_norm": False, "norm_output": True, "embed_requires_grad": False, "torch_dtype": "bfloat16"}


def _mla_config() -> dict:
    return {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": H,
            "num_hidden_layers": 1, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
            "q_lora_rank": Q_LORA, "kv_lora_rank": KV_LORA, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE,
            "v_head_dim": V_DIM, "intermediate_size": INTER, "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB,
            "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
            "hidden_act": "silu", "tie_word_embeddings": False,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": IDS, "use_aux_hidden_state": True}}


def _llama_layer(p: str) -> dict[str, tuple[tuple[int, ...], str]]:
    return {p + "self_attn.q_proj.weight": ((HEADS * HEAD_DIM, 2 * H), "BF16"),
            p + "self_attn.k_proj.weight": ((KV * HEAD_DIM, 2 * H), "BF16"),
            p + "self_attn.v_proj.weight": ((KV * HEAD_DIM, 2 * H), "BF16"),
            p + "self_attn.o_proj.weight": ((H, HEADS * HEAD_DIM), "BF16"),
            p + "mlp.gate_proj.weight": ((INTER, H), "BF16"), p + "mlp.up_proj.weight": ((INTER, H), "BF16"),
            p + "mlp.down_proj.weight": ((H, INTER), "BF16"), p + "input_layernorm.weight": ((H,), "BF16"),
            p + "post_attention_layernorm.weight": ((H,), "BF16"), p + "hidden_norm.weight": ((H,), "BF16")}


def _mla_layer(p: str) -> dict[str, tuple[tuple[int, ...], str]]:
    return {p + "self_attn.q_a_proj.weight": ((Q_LORA, 2 * H), "BF16"),
            p + "self_attn.kv_a_proj_with_mqa.weight": ((KV_LORA + ROPE, 2 * H), "BF16"),
            p + "self_attn.q_a_layernorm.weight": ((Q_LORA,), "BF16"),
            p + "self_attn.q_b_proj.weight": ((HEADS * (NOPE + ROPE), Q_LORA), "BF16"),
            p + "self_attn.kv_a_layernorm.weight": ((KV_LORA,), "BF16"),
            p + "self_attn.kv_b_proj.weight": ((HEADS * (NOPE + V_DIM), KV_LORA), "BF16"),
            p + "self_attn.o_proj.weight": ((H, HEADS * V_DIM), "BF16"),
            p + "mlp.gate_proj.weight": ((INTER, H), "BF16"), p + "mlp.up_proj.weight": ((INTER, H), "BF16"),
            p + "mlp.down_proj.weight": ((H, INTER), "BF16"), p + "input_layernorm.weight": ((H,), "BF16"),
            p + "post_attention_layernorm.weight": ((H,), "BF16"), p + "hidden_norm.weight": ((H,), "BF16")}


def _top(embed: bool) -> dict[str, tuple[tuple[int, ...], str]]:
    out = {"fc.weight": ((H, 3 * H), "BF16"), "norm.weight": ((H,), "BF16"),
           "lm_head.weight": ((DRAFT_VOCAB, H), "BF16"), "d2t": ((DRAFT_VOCAB,), "I64"), "t2d": ((VOCAB,), "BOOL")}
    if embed:
        out["embed_tokens.weight"] = ((VOCAB, H), "BF16")
    return out


@dataclass(frozen=True)
class Layout:
    name: str
    config: dict
    tensors: dict[str, tuple[tuple[int, ...], str]]
    prefix: str  # the decoder layer's prefix this tool writes

    def other_prefix(self) -> str:
        return "midlayer." if self.prefix == "layers.0." else "layers.0."


def layouts() -> dict[str, Layout]:
    spec_tensors = {**_top(embed=True), **_llama_layer("layers.0."), "input_norm.weight": ((3 * H,), "BF16")}
    return {
        "speculators": Layout("speculators", _speculators_config(), spec_tensors, "layers.0."),
        "speculators-hf": Layout("speculators-hf", _llama_config(), {**_top(embed=True), **_llama_layer("layers.0.")},
                                 "layers.0."),
        "specforge": Layout("specforge", _llama_config(), {**_top(embed=False), **_llama_layer("midlayer.")},
                            "midlayer."),
        "mla": Layout("mla", _mla_config(), {**_top(embed=False), **_mla_layer("layers.0.")}, "layers.0."),
    }


@dataclass(frozen=True)
class Case:
    name: str  # "<layout>/<mutation>"
    layout: str
    mutate: Callable[[dict], dict]


def _rename(tensors: dict, old: str, new: str) -> dict:
    return {(new + k[len(old):] if k.startswith(old) else k): v for k, v in tensors.items()}


def cases(layout: Layout) -> list[Case]:
    """Every mutation of one layout, named."""
    out = [Case(f"{layout.name}/as-written", layout.name, lambda t: t)]
    for name in sorted(layout.tensors):
        out.append(Case(f"{layout.name}/without {name}", layout.name,
                        lambda t, n=name: {k: v for k, v in t.items() if k != n}))
    p = layout.prefix
    extras = {"rotary inv_freq": (f"{p}self_attn.rotary_emb.inv_freq", ((HEAD_DIM // 2,), "F32")),
              "rotary cos_cached": (f"{p}self_attn.rotary_emb.cos_cached", ((16, HEAD_DIM), "F32")),
              "kv-cache scale": (f"{p}self_attn.k_scale", ((), "F32")),
              "verifier copy": ("verifier_lm_head.weight", ((VOCAB, H), "BF16")),
              "q_norm of no module": (f"{p}self_attn.q_norm.weight", ((HEAD_DIM,), "BF16"))}
    for what, (key, spec) in extras.items():
        out.append(Case(f"{layout.name}/with {what}", layout.name, lambda t, k=key, s=spec: {**t, k: s}))
    out.append(Case(f"{layout.name}/prefix {layout.other_prefix()}", layout.name,
                    lambda t: _rename(t, p, layout.other_prefix())))
    out.append(Case(f"{layout.name}/prefix model.", layout.name, lambda t: {f"model.{k}": v for k, v in t.items()}))
    out.append(Case(f"{layout.name}/fc of 2 layers", layout.name,
                    lambda t: {**t, "fc.weight": ((H, 2 * H), "BF16")}))
    return out


def write(folder: Path, layout: Layout, case: Case, seed: int = 0) -> Path:
    """The case's drafter: config.json and one safetensors file of random values."""
    tensors = case.mutate(dict(layout.tensors))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(layout.config, indent=1))
    (folder / "model.safetensors").write_bytes(_safetensors(case.name, seed, json.dumps(sorted(tensors.items()))))
    return folder


@functools.lru_cache(maxsize=256)
def _safetensors(case: str, seed: int, tensors: str) -> bytes:
    """The file's bytes, a function of its arguments only (a test writes the same grid for the
    published and the patched release: made once)."""
    rng = random.Random(f"{case}/{seed}")
    infos, blobs, offset = [], [], 0
    for name, (shape, dtype) in json.loads(tensors):
        blob = _random(rng, tuple(shape), dtype, name)
        infos.append(TensorInfo(name, dtype, tuple(shape), offset, offset + len(blob)))
        blobs.append(blob)
        offset += len(blob)
    return encode_header(infos, {"format": "pt"}) + b"".join(blobs)


def _random(rng: random.Random, shape: tuple[int, ...], dtype: str, name: str) -> bytes:
    n = 1
    for d in shape:
        n *= d
    if name.endswith("d2t"):  # draft id -> target id offsets: increasing target ids
        ids = sorted(rng.sample(range(VOCAB), DRAFT_VOCAB))
        return struct.pack(f"<{n}q", *[t - i for i, t in enumerate(ids)])
    if dtype == "BOOL":
        return bytes(rng.randint(0, 1) for _ in range(n))
    if dtype == "I64":
        return struct.pack(f"<{n}q", *[rng.randint(0, 100) for _ in range(n)])
    values = [rng.uniform(0.5, 1.5) * rng.choice((-1, 1)) for _ in range(n)]
    raw = struct.pack(f"<{n}f", *values)
    if dtype == "F32":
        return raw
    # bfloat16: the top half of each float32
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))


def id_variants(layout: Layout) -> dict[str, dict]:
    """The layout's config with its aux layer ids stated each way a writer states them: none (the
    engine's default), as the tool writes them, in the numbering that starts at 1 and the one that
    does not, and, for an HF config, at the top level instead of (or beside) ``eagle_config``."""
    def variant(top: list[int] | None, in_eagle: list[int] | None) -> dict:
        config = json.loads(json.dumps(layout.config))
        config.pop("eagle_aux_hidden_state_layer_ids", None)
        if isinstance(config.get("eagle_config"), dict):
            config["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)
            if in_eagle is not None:
                config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = in_eagle
        if top is not None:
            config["eagle_aux_hidden_state_layer_ids"] = top
        return config

    hf = isinstance(layout.config.get("eagle_config"), dict)
    shifted = [i + 1 for i in IDS]  # the numbering that does not start at 1
    out = {"no ids": variant(None, None)}
    if hf:
        out.update({"eagle_config, from 1": variant(None, IDS), "eagle_config, from 2": variant(None, shifted),
                    "top level only": variant(shifted, None), "both, unlike": variant(shifted, IDS)})
    else:
        out.update({"top level, from 1": variant(IDS, None), "top level, from 2": variant(shifted, None)})
    return out
