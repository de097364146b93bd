"""Probes for vllm/eagle3-config-aux-ids. Each check(module) raises AssertionError.

The drafter config is loaded the way the engine loads it: a config.json written the way SpecForge
writes it (LlamaForCausalLMEagle3, the ids only under eagle_config) in a temp dir, read by the
release's own vllm.transformers_utils.config.get_config and wrapped in the release's own EAGLEConfig
(what SpeculativeConfig does for method "eagle3"). Then the release's own reader of each runner is
called: GPUModelRunner._get_eagle3_aux_layers_from_config (v1) on a stand-in runner holding the
speculative config, and eagle3_utils.get_eagle3_aux_layers_from_config / set_eagle3_aux_hidden_state_layers
(v2) on the speculative config and a stand-in target model. Both must answer the drafter's ids.

The compile-cache key: the release's own SpeculativeConfig.compute_hash (what VllmConfig.compute_hash
folds into the torch.compile / AOT cache dir) on a stand-in speculative config holding the same loaded
drafter config. Drafters whose eagle_config ids differ must get different keys, and the key must follow
the ids the runners take (the top-level key first), not where they are written.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

# Not the default (2, 30, 58) of a 61-layer Kimi-K2 target: a reader that falls back is caught.
DRAFTER_IDS = (1, 29, 57)
TOP_LEVEL_IDS = (3, 31, 59)

_SPECFORGE_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 256,
    "draft_vocab_size": 32,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-05,
    "torch_dtype": "bfloat16",
    "target_hidden_size": 64,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(DRAFTER_IDS), "use_aux_hidden_state": True},
}


def _drafter_hf_config(**top_level):
    """The drafter's hf_config as SpeculativeConfig leaves it: get_config, then EAGLEConfig."""
    from vllm.transformers_utils.config import get_config
    from vllm.transformers_utils.configs.eagle import EAGLEConfig

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps({**_SPECFORGE_CONFIG, **top_level}))
        hf_config = get_config(tmp, trust_remote_code=False)
    return EAGLEConfig(hf_config, method="eagle3", model_type="eagle")


def _spec_config(hf_config):
    return SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=hf_config), method="eagle3")


def _specforge_spec_config():
    hf_config = _drafter_hf_config()
    # The layout the family is about: the loader must not have lifted the ids to the top level.
    assert getattr(hf_config, "eagle_config", None) == _SPECFORGE_CONFIG["eagle_config"], (
        f"the loaded drafter config lost eagle_config: {getattr(hf_config, 'eagle_config', None)!r}")
    assert not getattr(hf_config, "eagle_aux_hidden_state_layer_ids", None), (
        "the loader put eagle_aux_hidden_state_layer_ids at the top level; this probe needs them only in "
        "eagle_config")
    return _spec_config(hf_config)


def _check_reader(read, runner: str) -> None:
    got = read(_specforge_spec_config())
    assert got == DRAFTER_IDS, (
        f"{runner} runner reads aux layer ids {got!r} from a SpecForge drafter whose ids are only in "
        f"eagle_config; wanted {DRAFTER_IDS} (the target would capture its default layers)")
    # Upstream's order: the top-level key wins over eagle_config.
    both = read(_spec_config(_drafter_hf_config(eagle_aux_hidden_state_layer_ids=list(TOP_LEVEL_IDS))))
    assert both == TOP_LEVEL_IDS, f"{runner} runner: top-level ids must win over eagle_config, got {both!r}"
    # No ids anywhere: None, so the runner keeps the model's default layers.
    bare = {k: v for k, v in _SPECFORGE_CONFIG.items() if k != "eagle_config"}
    none = read(_spec_config(_bare_hf_config(bare)))
    assert none is None, f"{runner} runner invents aux layer ids for a drafter stating none: {none!r}"


def _bare_hf_config(config: dict):
    from vllm.transformers_utils.config import get_config
    from vllm.transformers_utils.configs.eagle import EAGLEConfig

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        hf_config = get_config(tmp, trust_remote_code=False)
    return EAGLEConfig(hf_config, method="eagle3", model_type="eagle")


def v1_runner_reads_eagle_config_ids(module) -> None:
    reader = module.GPUModelRunner._get_eagle3_aux_layers_from_config
    _check_reader(lambda spec: reader(SimpleNamespace(speculative_config=spec)), "v1")


def _target(interfaces_protocol):
    """A stand-in EAGLE-3 target, a nominal SupportsEagle3 (the check the runner makes first):
    it records the layers the runner tells it to capture."""

    class Target(interfaces_protocol):
        layers = None

        def set_aux_hidden_state_layers(self, layers) -> None:
            self.layers = tuple(layers)

        def get_eagle3_aux_hidden_state_layers(self):
            return (2, 30, 58)

        get_eagle3_default_aux_hidden_state_layers = get_eagle3_aux_hidden_state_layers

    return Target()


def v2_runner_reads_eagle_config_ids(module) -> None:
    _check_reader(module.get_eagle3_aux_layers_from_config, "v2")
    target = _target(module.SupportsEagle3)
    module.set_eagle3_aux_hidden_state_layers(target, _specforge_spec_config())
    assert target.layers == DRAFTER_IDS, (
        f"v2 runner set the target's aux layers to {target.layers!r}; wanted the drafter's {DRAFTER_IDS}")


OTHER_IDS = (4, 32, 56)  # the same drafter's eagle_config after an in-place edit


class NotInRelease(Exception):
    """What this probe checks is not in the release (the runner reports it as its own outcome)."""


def _compile_key(module, hf_config, draft_model_config=None) -> str:
    """The compile-cache key's speculative part, as VllmConfig computes it, on a stand-in holding
    the loaded drafter config (method "eagle3"). Up to 0.33.0 SpeculativeConfig.compute_hash (0.17.0-0.25.1
    read only method and the hf_config); from 0.34.0 SpeculativeConfig.compile_factors, which walks every
    dataclass field, so the stand-in is a real instance holding each field's default."""
    config = module.SpeculativeConfig
    draft = draft_model_config or _FixedDraft(hf_config)
    if hasattr(config, "compute_hash"):
        spec = SimpleNamespace(method="eagle3", draft_model_config=draft, enable_adaptive_verification=False)
        return config.compute_hash(spec)
    if not hasattr(config, "compile_factors"):
        raise NotInRelease("SpeculativeConfig has neither compute_hash nor compile_factors")
    from vllm.config.utils import hash_factors

    spec = object.__new__(config)
    for f in dataclasses.fields(config):
        object.__setattr__(spec, f.name, _default(f))
    object.__setattr__(spec, "method", "eagle3")
    object.__setattr__(spec, "draft_model_config", draft)
    return hash_factors(config.compile_factors(spec))


class _FixedDraft:
    """A draft ModelConfig whose own hash is fixed (0.26.0+ fold it into the key): what is left to
    differ between two keys is the ids factor the runners' ids go into."""

    def __init__(self, hf_config):
        self.hf_config = hf_config

    def compute_hash(self) -> str:
        return "fixed draft"

    def compile_factors(self) -> dict:
        return {"draft": "fixed"}


def _default(f):
    """A dataclass field's default; pydantic's Field(default=...) leaves a FieldInfo there."""
    value = f.default
    if type(value).__name__ == "FieldInfo":
        factory = getattr(value, "default_factory", None)
        value = factory() if factory else value.default
        return None if type(value).__name__ == "PydanticUndefinedType" else value
    if value is dataclasses.MISSING:
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else None
    return value


def _eagle_config(ids) -> dict:
    return {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": True}}


def compile_hash_takes_eagle_config_ids(module) -> None:
    stated = _compile_key(module, _specforge_spec_config().draft_model_config.hf_config)
    edited = _compile_key(module, _drafter_hf_config(**_eagle_config(OTHER_IDS)))
    assert stated != edited, (
        f"SpeculativeConfig's compile-cache key (compute_hash, or compile_factors from 0.34.0) is one key for "
        f"drafters whose eagle_config ids "
        f"differ ({DRAFTER_IDS} vs {OTHER_IDS}); wanted two: the runners capture those layers, so the "
        f"cached target graph would capture the other drafter's layers")
    # The key follows the ids the runners take, not where the config writes them.
    top_only = {k: v for k, v in _SPECFORGE_CONFIG.items() if k != "eagle_config"}
    top = _compile_key(module, _bare_hf_config({**top_only, "eagle_aux_hidden_state_layer_ids": list(DRAFTER_IDS)}))
    assert top == stated, (
        f"compute_hash keys the same ids {DRAFTER_IDS} differently at the top level and in eagle_config")
    # The runners' order: the top-level key wins over eagle_config, in the key as in the reader.
    both = _compile_key(module, _drafter_hf_config(eagle_aux_hidden_state_layer_ids=list(DRAFTER_IDS),
                                                   **_eagle_config(OTHER_IDS)))
    assert both == stated, (
        "compute_hash keys a drafter whose top-level ids win by its eagle_config ids; wanted the ids the "
        "runners take (top level first)")


def compile_hash_takes_draft_config(module) -> None:
    """From 0.26.0 compute_hash folds in the draft ModelConfig's own hash (vllm-project/vllm#47911),
    whose factors hold the drafter hf_config as JSON: eagle_config ids reach the key with no patch.
    The real ModelConfig.compute_hash on an instance holding only the loaded hf_config."""
    from vllm.config import ModelConfig

    def draft(hf_config):
        model_config = object.__new__(ModelConfig)
        object.__setattr__(model_config, "hf_config", hf_config)
        return model_config

    stated_cfg = _specforge_spec_config().draft_model_config.hf_config
    edited_cfg = _drafter_hf_config(**_eagle_config(OTHER_IDS))
    stated = _compile_key(module, stated_cfg, draft(stated_cfg))
    edited = _compile_key(module, edited_cfg, draft(edited_cfg))
    assert stated != edited, (
        f"SpeculativeConfig.compute_hash (with the draft ModelConfig's hash) gives one compile-cache key to "
        f"drafters whose eagle_config ids differ ({DRAFTER_IDS} vs {OTHER_IDS}); this release needs the "
        f"family's hash diff (hash-eagle-config.diff), not E5")
