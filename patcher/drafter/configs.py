"""Drafter and target config.json, reduced to the fields the checks compare.

Two drafter formats exist in the field:
- the EAGLE-3 Llama config both engines read (architectures LlamaForCausalLMEagle3,
  Llama fields at the top, aux-layer settings in ``eagle_config``);
- the `speculators` library's (``speculators_model_type``/``speculators_config``, Llama
  fields nested in ``transformer_layer_config``), which vLLM reads from 0.10.1.1 and
  SGLang never does.
The target is Kimi-K2.5 style: a multimodal wrapper whose language model settings are in
``text_config``; a plain DeepSeek-V3 / Kimi-K2 config has them at the top.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patcher.engine_specs.base import SPECULATORS  # the engines' rules tell the formats apart too
from patcher.errors import DrafterInputError

EAGLE3_LLAMA = "eagle3-llama"
OTHER = "other"


@dataclass(frozen=True)
class DrafterConfig:
    format: str  # SPECULATORS, EAGLE3_LLAMA or OTHER
    architectures: tuple[str, ...]
    speculators_model_type: str | None
    hidden_size: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    num_hidden_layers: int | None
    vocab_size: int | None
    draft_vocab_size: int | None  # None: same as vocab_size
    target_hidden_size: int | None
    aux_layer_ids: tuple[int, ...] | None  # the ids the drafter declares; None: the engine's default
    top_aux_ids: tuple[int, ...] | None  # `eagle_aux_hidden_state_layer_ids` at the top level (vLLM reads it)
    eagle_aux_ids: tuple[int, ...] | None  # the copy in `eagle_config` (SGLang reads only it)
    use_aux_hidden_state: bool
    max_position_embeddings: int | None
    rope_theta: float | None
    rope_scaling: dict | None
    torch_dtype: str | None
    rope_parameters: dict | None = None  # transformers 5's layout (speculators writes only this)
    switches: tuple[str, ...] = ()  # EAGLE 3.1 switches the config turns on (eagle31.EAGLE31_SWITCHES)
    switches_off: tuple[str, ...] = ()  # EAGLE 3.1 switches the config sets to false, explicitly
    eagle_layer_ids: tuple[int, ...] | None = None  # `eagle_config.layer_ids` (vLLM's v2 runner, 0.27.0+, last)
    model_type: str | None = None  # top level, as written (vLLM picks the config class and MLA by it)
    # A mixture-of-experts MLP, as TorchSpec writes one (``use_moe``, ``n_routed_experts``): the
    # config keys that say so, as written; () : a dense MLP, which every engine's drafter builds.
    moe: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetConfig:
    architectures: tuple[str, ...]  # top level, e.g. ("KimiK25ForConditionalGeneration",)
    model_type: str | None  # top level, e.g. kimi_k25
    text_model_type: str | None  # e.g. kimi_k2
    hidden_size: int | None
    num_hidden_layers: int | None
    vocab_size: int | None
    max_position_embeddings: int | None
    rope_theta: float | None
    rope_scaling: dict | None
    # DeepSeek's multi-token-prediction layers (num_nextn_predict_layers; Kimi-K2/K2.5 write 0):
    # what SGLang's NEXTN and vLLM's mtp methods load as the draft model. None: not written.
    mtp_layers: int | None = None


def _int(cfg: dict, key: str, where: Path) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DrafterInputError(f"{where}: {key} is not a non-negative integer",
                                wanted=f'"{key}": <integer>', found=repr(value))
    return value


def _num(cfg: dict, key: str, where: Path) -> float | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise DrafterInputError(f"{where}: {key} is not a number", wanted=f'"{key}": <number>', found=repr(value))
    return float(value)


def _dict(cfg: dict, key: str, where: Path) -> dict | None:
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DrafterInputError(f"{where}: {key} is not an object", wanted=f'"{key}": {{...}}', found=repr(value))
    return value


def _ids(value: object, key: str, where: Path) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)):
        raise DrafterInputError(f"{where}: {key} is not a list of integers",
                                wanted=f'"{key}": [2, 30, 58]', found=repr(value))
    return tuple(value)


def is_speculators(config: dict) -> bool:
    return "speculators_model_type" in config or "speculators_config" in config


def parse_drafter_config(config: dict, where: Path) -> DrafterConfig:
    architectures = config.get("architectures") or []
    if not (isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        raise DrafterInputError(f"{where}: architectures is not a list of names",
                                wanted='"architectures": ["LlamaForCausalLMEagle3"]', found=repr(architectures))
    if is_speculators(config):
        layer = _dict(config, "transformer_layer_config", where) or {}
        eagle: dict = {}
        top = _ids(config.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids", where)
        in_eagle = None
        ids = top
        fmt = SPECULATORS
    else:
        layer = config
        eagle = _dict(config, "eagle_config", where) or {}
        # Training tools write eagle_config (SpecForge) or the top level; which one each engine
        # path reads is an engine fact (facts.ids_taken). The drafter declares eagle_config's first.
        top = _ids(config.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids", where)
        in_eagle = _ids(eagle.get("eagle_aux_hidden_state_layer_ids"), "eagle_config.eagle_aux_hidden_state_layer_ids",
                        where)
        ids = in_eagle if in_eagle is not None else top
        fmt = EAGLE3_LLAMA if any("Eagle3" in a for a in architectures) else OTHER
    layer_ids = _ids(eagle.get("layer_ids"), "eagle_config.layer_ids", where)
    use_aux = eagle.get("use_aux_hidden_state", True)
    if not isinstance(use_aux, bool):
        raise DrafterInputError(f"{where}: eagle_config.use_aux_hidden_state is not true/false",
                                wanted='"use_aux_hidden_state": true', found=repr(use_aux))
    dtype = config.get("torch_dtype", layer.get("torch_dtype", config.get("dtype", layer.get("dtype"))))
    # Both tools write the switches at the top level; vLLM 0.22+ and SGLang 0.5.17+ also take
    # norm_before_fc from eagle_config, first.
    said = {name: eagle.get(name, config.get(name)) if name == "norm_before_fc" else config.get(name)
            for name in ("norm_before_fc", "fc_norm", "norm_output")}
    switches = tuple(name for name, value in said.items() if value is True)
    switches_off = tuple(name for name, value in said.items() if value is False)
    smt = config.get("speculators_model_type")
    return DrafterConfig(
        format=fmt,
        architectures=tuple(architectures),
        speculators_model_type=smt if isinstance(smt, str) else None,
        hidden_size=_int(layer, "hidden_size", where),
        num_attention_heads=_int(layer, "num_attention_heads", where),
        num_key_value_heads=_int(layer, "num_key_value_heads", where),
        head_dim=_int(layer, "head_dim", where),
        num_hidden_layers=_int(layer, "num_hidden_layers", where),
        vocab_size=_int(layer, "vocab_size", where),
        draft_vocab_size=_int(config, "draft_vocab_size", where),
        target_hidden_size=_int(config, "target_hidden_size", where),
        aux_layer_ids=ids,
        top_aux_ids=top,
        eagle_aux_ids=in_eagle,
        eagle_layer_ids=layer_ids,
        use_aux_hidden_state=use_aux,
        max_position_embeddings=_int(layer, "max_position_embeddings", where),
        rope_theta=_num(layer, "rope_theta", where),
        rope_scaling=_dict(layer, "rope_scaling", where),
        torch_dtype=dtype if isinstance(dtype, str) else None,
        rope_parameters=_dict(layer, "rope_parameters", where),
        switches=switches,
        switches_off=switches_off,
        model_type=config.get("model_type") if isinstance(config.get("model_type"), str) else None,
        moe=_moe(layer),
    )


def _moe(layer: dict) -> tuple[str, ...]:
    """The keys that ask for experts in the drafter's MLP (TorchSpec's MoE EAGLE-3 head), as written."""
    said = []
    if layer.get("use_moe") is True:
        said.append("use_moe: true")
    experts = layer.get("n_routed_experts")
    if isinstance(experts, int) and not isinstance(experts, bool) and experts > 0:
        said.append(f"n_routed_experts: {experts}")
    return tuple(said)


def parse_target_config(config: dict, where: Path) -> TargetConfig:
    text = _dict(config, "text_config", where) or config
    archs = config.get("architectures") or []
    return TargetConfig(
        architectures=tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else (),
        model_type=config.get("model_type") if isinstance(config.get("model_type"), str) else None,
        text_model_type=text.get("model_type") if isinstance(text.get("model_type"), str) else None,
        hidden_size=_int(text, "hidden_size", where),
        num_hidden_layers=_int(text, "num_hidden_layers", where),
        vocab_size=_int(text, "vocab_size", where),
        max_position_embeddings=_int(text, "max_position_embeddings", where),
        rope_theta=_num(text, "rope_theta", where),
        rope_scaling=_dict(text, "rope_scaling", where),
        mtp_layers=_int(text, "num_nextn_predict_layers", where),
    )
