"""Drafter checkpoints laid out as the real training tools write them, at Kimi-K2 / K2.5 shapes.

The tools' own packages are the source: ``speculators`` 0.9.0 and ``specforge`` 0.2.0 are fetched
once with ``pip download --no-deps`` and unpacked under ``~/.cache/kimi-patcher/tools/`` (like the
engine wheels in patcher/maintainer/wheels.py), and every layout fact used here is asserted against
their files (``assert_layout_facts``), so a fixture cannot drift from the tool it names.

Why not run the tools' save code: both need torch and transformers 5 (speculators' config is a
pydantic model over a transformers 5 ``PretrainedConfig``, speculators/models/eagle3/config.py;
SpecForge's exporter calls ``model.save_pretrained``, specforge/export/to_sglang.py), which the
test environment does not carry. What runs on our deps is run: SpecForge's
``apply_legacy_rope_scaling`` (specforge/export/checkpoint_io.py, pure JSON; its module imports
torch at the top, so it is loaded with a stand-in ``torch`` module that nothing calls). The rest is
reproduced from reading the code, cited per builder.

The SpecForge Kimi draft configs (configs/kimi-k2-eagle3.json, configs/kimi-k25-eagle3.json in
sgl-project/SpecForge) are not in the 0.2.0 wheel (its RECORD has no configs/); they are copied
below verbatim from the repository files (commits 03ebe2cd and 3f9b5fca).

Tensors are header-only safetensors files at the true shapes: the data section is a hole
(sparse file), so a 4.7 GB drafter costs a few kilobytes on disk.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path

from patcher.drafter.safetensors_header import TensorInfo, encode_header
from patcher.maintainer.wheels import CACHE

TOOLS = CACHE / "tools"
_DONE = ".complete"

# Kimi-K2 / K2.5 language model (text_config of moonshotai/Kimi-K2.5, config of Kimi-K2).
KIMI_HIDDEN = 7168
KIMI_LAYERS = 61
KIMI_VOCAB = 163840
KIMI_ROPE_THETA = 50000.0
KIMI_ROPE_SCALING = {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
DRAFT_VOCAB = 32000

SPECFORGE_KIMI_K2 = {  # sgl-project/SpecForge configs/kimi-k2-eagle3.json @ 03ebe2cd
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True},
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 163584, "eos_token_id": 163585,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
    "intermediate_size": 18432, "max_position_embeddings": 131072, "max_window_layers": 48,
    "model_type": "kimi_k2", "num_attention_heads": 64, "num_hidden_layers": 1, "num_key_value_heads": 64,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.53.2",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 163840, "draft_vocab_size": 32000,
}
SPECFORGE_KIMI_K25 = {  # sgl-project/SpecForge configs/kimi-k25-eagle3.json @ 3f9b5fca
    "architectures": ["LlamaForCausalLMEagle3"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 163584, "draft_vocab_size": 32000, "dtype": "bfloat16",
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True},
    "eos_token_id": 163585, "head_dim": 128, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 18432, "max_position_embeddings": 131072,
    "max_window_layers": 48, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 64,
    "num_hidden_layers": 1, "num_key_value_heads": 64, "pretraining_tp": 1, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False,
    "transformers_version": "4.57.0", "use_cache": True, "use_sliding_window": False, "vocab_size": 163840,
}


def tool(name: str, version: str) -> Path:
    """The unpacked wheel of ``name==version`` (sources and data only); fetched on first use."""
    dest = TOOLS / f"{name}-{version}"
    if (dest / _DONE).exists():
        return dest
    TOOLS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TOOLS) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "-d", tmp, f"{name}=={version}"], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        partial = Path(tmp) / "tree"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(partial)
        (partial / _DONE).write_text(wheel.name + "\n")
        if not (dest / _DONE).exists():  # another run may have finished first
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(partial, dest)
    return dest


def speculators() -> Path:
    return tool("speculators", "0.9.0")


def specforge() -> Path:
    return tool("specforge", "0.2.0")


def _field_default(source: str, cls: str, field: str) -> object:
    """A pydantic field's ``default=`` in the tool's source (read, not imported: it needs torch)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and getattr(stmt.target, "id", None) == field:
                    value = stmt.value
                    if isinstance(value, ast.Call):
                        for kw in value.keywords:
                            if kw.arg == "default":
                                return ast.literal_eval(kw.value)
                    return ast.literal_eval(value)
    raise AssertionError(f"{cls}.{field} not found")


def assert_layout_facts() -> None:
    """Every fact the builders below take from the tools, checked on the unpacked wheels."""
    sp = speculators() / "speculators"
    cfg = (sp / "models/eagle3/config.py").read_text()
    assert _field_default(cfg, "Eagle3SpeculatorConfig", "speculators_model_type") == "eagle3"
    for switch in ("norm_before_fc", "fc_norm", "norm_output"):  # the config's own default: off
        assert _field_default(cfg, "Eagle3SpeculatorConfig", switch) is False
    schema = (sp / "train/config/schema.py").read_text()
    # ... but the trainer turns two of them on for every EAGLE-3 run it configures.
    assert "self.draft.norm_before_fc = is_eagle3" in schema and "self.draft.norm_output = is_eagle3" in schema
    core = (sp / "models/eagle3/core.py").read_text()
    assert "self.input_norm = self._model_definitions.norm_class(\n                num_aux * self.hidden_size" in core
    assert "self.fc_norm = torch.nn.ModuleList(" in core and "self.layers = torch.nn.ModuleList(layers)" in core
    utils = (sp / "models/utils.py").read_text()
    assert "target_layer_ids = [2, num_layers // 2, num_layers - 3]" in utils  # written always, default or not
    cli = (sp / "train/cli.py").read_text()
    assert "config.rope_parameters = rope_params" in cli  # transformers 5: RoPE only as rope_parameters
    sf = specforge() / "specforge"
    export = (sf / "export/to_sglang.py").read_text()
    assert '"LlamaForCausalLMEagle3": {},' in export  # identity key map: the module's own names
    assert 'if "embed" not in k.lower()' in export  # embeddings dropped
    draft = (sf / "modeling/draft/llama3_eagle.py").read_text()
    assert "self.midlayer = LlamaDecoderLayer(" in draft
    assert 'if getattr(config, "fc_norm", False):' in draft
    # norm_output is SpecForge 0.2.0's own switch (patcher/drafter/facts.py, SPECFORGE_NORM_OUTPUT): on
    # by default, it gates only the final norm before lm_head; the next draft step always gets the
    # pre-norm backbone output. And SpecForge 0.2.0 has no norm_before_fc anywhere.
    assert 'self.norm_output = getattr(config, "norm_output", True)' in draft
    logits = draft.split("def compute_logits", 1)[1].split("\n    def ", 1)[0]
    assert "if self.norm_output:\n            norm_hidden_states = self.norm(hidden_states)" in logits
    assert "return self.lm_head(norm_hidden_states)" in logits
    loop = (sf / "algorithms/eagle3/model.py").read_text()
    assert ("hidden_states_out = self.draft_model.backbone(" in loop
            and "hidden_states = hidden_states_out\n\n            # Step 5.4: get logits\n"
                "            logits = self.draft_model.compute_logits(hidden_states)" in loop)
    backbone = draft.split("def backbone", 1)[1].split("\n    def ", 1)[0]
    assert "self.norm(" not in backbone  # the backbone output, fed to the next step, is pre-norm
    assert not any("norm_before_fc" in f.read_text() for f in sf.rglob("*.py"))


def legacy_rope_scaling(folder: Path) -> bool:
    """SpecForge 0.2.0's own ``apply_legacy_rope_scaling`` run on ``folder/config.json``."""
    path = specforge() / "specforge/export/checkpoint_io.py"
    spec = importlib.util.spec_from_file_location("_specforge_checkpoint_io", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get("torch")
    if saved is None:  # imported at the top of the module, used only by functions we do not call
        sys.modules["torch"] = types.ModuleType("torch")
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            del sys.modules["torch"]
    return module.apply_legacy_rope_scaling(str(folder))


# --- header-only safetensors -----------------------------------------------------------------

_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def write_header_only(path: Path, shapes: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """A safetensors file whose header lists ``shapes`` (name -> (shape, dtype)) and whose data
    section is a hole of the right size."""
    infos, offset = [], 0
    for name in sorted(shapes):
        shape, dtype = shapes[name]
        n = _BYTES[dtype]
        for dim in shape:
            n *= dim
        infos.append(TensorInfo(name, dtype, tuple(shape), offset, offset + n))
        offset += n
    header = encode_header(infos, {"format": "pt"})
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(len(header) + offset)


def _llama_layer(prefix: str, hidden: int, heads: int, kv: int, head_dim: int, inter: int) -> dict:
    bf = "BF16"
    return {
        prefix + "self_attn.q_proj.weight": ((heads * head_dim, 2 * hidden), bf),
        prefix + "self_attn.k_proj.weight": ((kv * head_dim, 2 * hidden), bf),
        prefix + "self_attn.v_proj.weight": ((kv * head_dim, 2 * hidden), bf),
        prefix + "self_attn.o_proj.weight": ((hidden, heads * head_dim), bf),
        prefix + "mlp.gate_proj.weight": ((inter, hidden), bf),
        prefix + "mlp.up_proj.weight": ((inter, hidden), bf),
        prefix + "mlp.down_proj.weight": ((hidden, inter), bf),
        prefix + "input_layernorm.weight": ((hidden,), bf),
        prefix + "post_attention_layernorm.weight": ((hidden,), bf),
        prefix + "hidden_norm.weight": ((hidden,), bf),
    }


def _vocab_maps(hidden: int, embed: bool) -> dict:
    out = {"fc.weight": ((hidden, 3 * KIMI_HIDDEN), "BF16"), "norm.weight": ((hidden,), "BF16"),
           "lm_head.weight": ((DRAFT_VOCAB, hidden), "BF16"), "d2t": ((DRAFT_VOCAB,), "I64"),
           "t2d": ((KIMI_VOCAB,), "BOOL")}
    if embed:
        out["embed_tokens.weight"] = ((KIMI_VOCAB, hidden), "BF16")
    return out


def _write(folder: Path, config: dict, shapes: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    write_header_only(folder / "model.safetensors", shapes)
    return folder


def speculators_kimi(root: Path, name: str = "speculators-kimi", *, ids: list[int] | None = None,
                     norm_before_fc: bool = True, norm_output: bool = True, fc_norm: bool = False) -> Path:
    """What ``speculators`` 0.9.0 training writes for a Kimi-K2.5 verifier at its EAGLE-3 defaults.

    Read from: train/config/schema.py (eagle3 -> norm_before_fc and norm_output on, Llama draft
    arch), train/cli.py ``create_transformer_layer_config`` (Llama layer config seeded from the
    verifier's text_config; transformers 5: RoPE only as ``rope_parameters``; a 2048 sliding
    window), models/utils.py ``resolve_target_layer_ids`` (ids always written, [2, N//2, N-3]
    when not given), models/eagle3/core.py (``layers.N.*``, ``input_norm.weight`` over the
    3 x hidden concatenation when norm_before_fc, ``fc_norm.{i}.weight`` when fc_norm),
    models/eagle3/config.py (top-level fields).
    """
    # head_dim: the verifier's own (transformers 5 DeepseekV3Config sets head_dim = qk_rope_head_dim = 64).
    hidden, heads, kv, head_dim, inter = KIMI_HIDDEN, 64, 64, 64, 18432
    rope = {"rope_type": "yarn", "rope_theta": KIMI_ROPE_THETA,
            **{k: v for k, v in KIMI_ROPE_SCALING.items() if k != "type"}}
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": KIMI_VOCAB,
             "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": 1,
             "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": head_dim, "hidden_act": "silu",
             "max_position_embeddings": 262144, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
             "sliding_window": 2048, "use_sliding_window": True, "layer_types": ["sliding_attention"],
             "rope_parameters": rope, "dtype": "bfloat16"}
    config = {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                               "verifier": {"architectures": ["KimiK25ForConditionalGeneration"],
                                            "name_or_path": "moonshotai/Kimi-K2.5"}},
        "transformer_layer_config": layer, "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": ids if ids is not None else [2, KIMI_LAYERS // 2, KIMI_LAYERS - 3],
        "norm_before_fc": norm_before_fc, "fc_norm": fc_norm, "norm_output": norm_output,
        "embed_requires_grad": False, "torch_dtype": "bfloat16",
    }
    shapes = {**_vocab_maps(hidden, embed=True), **_llama_layer("layers.0.", hidden, heads, kv, head_dim, inter)}
    if norm_before_fc:
        shapes["input_norm.weight"] = ((3 * hidden,), "BF16")
    if fc_norm:
        shapes.update({f"fc_norm.{i}.weight": ((hidden,), "BF16") for i in range(3)})
    return _write(root / name, config, shapes)


def specforge_kimi(root: Path, name: str = "specforge-kimi", *, base: dict = SPECFORGE_KIMI_K25,
                   ids: list[int] | None = None, fc_norm: bool = False, **fields: object) -> Path:
    """A SpecForge 0.2.0 export (``--to sglang``) of a drafter trained with its shipped Kimi config.

    specforge/export/to_sglang.py: the draft config is saved as given (``save_pretrained``), the
    keys are the draft module's own (identity map: ``midlayer.*``, ``fc``, ``norm``, ``lm_head``,
    ``t2d``/``d2t``; ``fc_norm.{i}`` when the config sets ``fc_norm``, modeling/draft/llama3_eagle.py),
    embeddings dropped; then SpecForge's own ``apply_legacy_rope_scaling`` runs on config.json.
    """
    config = json.loads(json.dumps(base))
    config.update(fields)
    if ids is not None:
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = ids
    if fc_norm:
        config["fc_norm"] = True
    hidden, heads, kv, head_dim, inter = (config["hidden_size"], config["num_attention_heads"],
                                          config["num_key_value_heads"], config["head_dim"],
                                          config["intermediate_size"])
    shapes = {**_vocab_maps(hidden, embed=False), **_llama_layer("midlayer.", hidden, heads, kv, head_dim, inter)}
    if fc_norm:
        shapes.update({f"fc_norm.{i}.weight": ((KIMI_HIDDEN,), "BF16") for i in range(3)})
    folder = _write(root / name, config, shapes)
    legacy_rope_scaling(folder)
    return folder


def mla_eagle31(root: Path, name: str = "kimi-k2.6-eagle3.1-mla", model_type: str = "deepseek_v3") -> Path:
    """An MLA EAGLE 3.1 drafter for Kimi K2.5/K2.6 (``Eagle3DeepseekV2ForCausalLM``, as the
    community drafter lightseekorg/kimi-k2.6-eagle3.1-mla names it): DeepSeek-V3 attention fields,
    ids in ``eagle_config``, ``fc_norm`` and ``norm_output`` on. Layout as SGLang's MLA drafter
    (kimi_k25_eagle3.py) and vLLM's deepseek_eagle3.py read it; the tensors are not judged by the
    Llama key checks, so only the ones every MLA drafter has are written."""
    config = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": model_type,
              "hidden_size": KIMI_HIDDEN, "num_hidden_layers": 1, "num_attention_heads": 64,
              "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
              "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 18432, "vocab_size": KIMI_VOCAB,
              "draft_vocab_size": DRAFT_VOCAB, "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
              "rope_theta": KIMI_ROPE_THETA, "rope_scaling": dict(KIMI_ROPE_SCALING), "torch_dtype": "bfloat16",
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True},
              "fc_norm": True, "norm_output": True}
    shapes = {**_vocab_maps(KIMI_HIDDEN, embed=False),
              **{f"fc_norm.{i}.weight": ((KIMI_HIDDEN,), "BF16") for i in range(3)},
              "midlayer.self_attn.kv_a_proj_with_mqa.weight": ((576, 2 * KIMI_HIDDEN), "BF16")}
    return _write(root / name, config, shapes)


def kimi_target(root: Path, name: str = "kimi-k2.5", k25: bool = True) -> Path:
    """Kimi-K2.5 (multimodal wrapper, text_config) or Kimi-K2 (DeepseekV3ForCausalLM) config.json."""
    text = {"model_type": "kimi_k2", "hidden_size": KIMI_HIDDEN, "num_hidden_layers": KIMI_LAYERS,
            "vocab_size": KIMI_VOCAB, "max_position_embeddings": 262144, "rope_theta": KIMI_ROPE_THETA,
            "rope_scaling": dict(KIMI_ROPE_SCALING), "num_attention_heads": 64,
            "num_nextn_predict_layers": 0}  # Kimi-K2/K2.5 ship no MTP layer
    config = ({"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": text}
              if k25 else {"architectures": ["DeepseekV3ForCausalLM"], **text})
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


TORCHSPEC_KIMI_K25_MOE = {  # lightseekorg/TorchSpec configs/draft_models/kimi_k25_eagle3_moe.json @ 3bd756e7
    "architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "kimi_k2", "use_moe": True,
    "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 1, "num_attention_heads": 64,
    "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "hidden_act": "silu", "rms_norm_eps": 1e-05, "vocab_size": 163840,
    "draft_vocab_size": 163840, "torch_dtype": "bfloat16", "rope_theta": 50000.0,
    "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "n_routed_experts": 384, "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "n_shared_experts": 1,
    "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.827,
    "scoring_func": "sigmoid", "first_k_dense_replace": 0, "train_router": True,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "use_aux_hidden_state": True,
                     "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True,
                     "use_mtp_layernorm": False},
    "bos_token_id": 163584, "eos_token_id": 163585, "pad_token_id": 0,
}


def torchspec_kimi_moe(root: Path, name: str = "torchspec-kimi-k25-moe") -> Path:
    """TorchSpec's Kimi-K2.5 EAGLE-3 head with a mixture-of-experts MLP, at its shipped config.
    Tensor names as its exporter writes them (torchspec/models/draft/keymap.py: ``midlayer.`` ->
    ``layers.0.``); the MoE block's (torchspec/models/draft/moe.py): a router ``gate.weight`` and
    ``e_score_correction_bias``, the experts stacked and gate/up fused (``experts.gate_up_proj``
    [E, hidden, 2 * moe_intermediate], ``experts.down_proj`` [E, moe_intermediate, hidden]), and a
    shared SwiGLU expert. The draft vocabulary is the target's: no d2t/t2d."""
    c = TORCHSPEC_KIMI_K25_MOE
    h, e, mi = c["hidden_size"], c["n_routed_experts"], c["moe_intermediate_size"]
    shared = mi * c["n_shared_experts"]
    shapes = {
        "fc.weight": ((h, 3 * h), "BF16"), "hidden_norm.weight": ((h,), "BF16"), "norm.weight": ((h,), "BF16"),
        "lm_head.weight": ((c["draft_vocab_size"], h), "BF16"),
        "layers.0.input_layernorm.weight": ((h,), "BF16"), "layers.0.post_attention_layernorm.weight": ((h,), "BF16"),
        "layers.0.self_attn.q_a_proj.weight": ((c["q_lora_rank"], 2 * h), "BF16"),
        "layers.0.self_attn.kv_a_proj_with_mqa.weight": ((c["kv_lora_rank"] + c["qk_rope_head_dim"], 2 * h), "BF16"),
        "layers.0.mlp.gate.weight": ((e, h), "BF16"), "layers.0.mlp.gate.e_score_correction_bias": ((e,), "F32"),
        "layers.0.mlp.experts.gate_up_proj": ((e, h, 2 * mi), "BF16"),
        "layers.0.mlp.experts.down_proj": ((e, mi, h), "BF16"),
        "layers.0.mlp.shared_experts.gate_proj.weight": ((shared, h), "BF16"),
        "layers.0.mlp.shared_experts.up_proj.weight": ((shared, h), "BF16"),
        "layers.0.mlp.shared_experts.down_proj.weight": ((h, shared), "BF16"),
    }
    return _write(root / name, json.loads(json.dumps(c)), shapes)


def deepseek_v3_target(root: Path, name: str = "deepseek-v3") -> Path:
    """DeepSeek-V3's config.json as published (one multi-token-prediction layer)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": KIMI_HIDDEN,
        "num_hidden_layers": 61, "vocab_size": 129280, "max_position_embeddings": 163840, "rope_theta": 10000,
        "num_attention_heads": 128, "num_nextn_predict_layers": 1}))
    return folder
