"""Probes for sglang/eagle3-drafter-keys. Each check(module) raises AssertionError.

They build the real drafter classes with object.__new__ (no weights, GPU or distributed
state), give them parameters whose loaders record what reached them, and drive the real
`load_weights` with checkpoint keys as the trainers write them. What must happen is
computed here, independently: which parameters a checkpoint fills, and from which release
on SGLang knows a key (fc_norm/aux_norm_* 0.5.12, input_norm 0.5.17; fc_norm in the MLA
drafter 0.5.13), read from the installed release's version, not from the patched code.
"""

from __future__ import annotations

from importlib.metadata import version as _dist_version
from types import SimpleNamespace

# Llama drafter parameters as SGLang names them (after q/k/v and gate/up stacking).
_DECODER = [
    "self_attn.qkv_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "hidden_norm.weight",
    "post_attention_layernorm.weight",
]
# Checkpoint keys as `speculators` writes them (unstacked), minus the `layers.0.` prefix.
_CKPT_DECODER = [
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "hidden_norm.weight",
    "post_attention_layernorm.weight",
]
# Keys SGLang deliberately loads into nothing; a checkpoint carrying them must still load.
_SKIPPED = [
    "layers.0.self_attn.rotary_emb.inv_freq",
    "layers.0.self_attn.kv_scale",
    "layers.0.self_attn.k_scale",
    "verifier_lm_head.weight",
    "verifier_norm.weight",
]


def _release():
    from packaging.version import Version

    return Version(_dist_version("sglang"))


def _since(release: str) -> bool:
    from packaging.version import Version

    return _release() >= Version(release)


def _t(*shape):
    import torch

    return torch.zeros(*shape or (1,))


def _drafter(cls, names, config, model):
    """A real `cls` whose __init__ did not run; its parameters record every load."""
    import torch
    from torch import nn

    obj = object.__new__(cls)
    nn.Module.__init__(obj)
    loaded: dict[str, list] = {}
    params = []
    for name in names:
        p = torch.nn.Parameter(_t(), requires_grad=False)

        def loader(param, w, shard_id=None, _name=name):
            loaded.setdefault(_name, []).append(shard_id)

        p.weight_loader = loader
        params.append((name, p))
    obj.named_parameters = lambda: iter(params)
    obj.config = config
    obj.model = model
    obj.hot_token_id = None
    obj.load_lm_head_from_target = False
    return obj, loaded


def _llama(module, tied=False, hidden=8, target_hidden=None):
    init_names = module.LlamaModel.__init__.__code__.co_names
    dec = "midlayer" if "midlayer" in init_names else "layers.0"  # 0.5.12 renamed it
    names = ["model.embed_tokens.weight", "model.fc.weight", "model.norm.weight"]
    names += [f"model.{dec}.{n}" for n in _DECODER]
    if not tied:  # a tied lm_head is embed_tokens and named_parameters lists it once
        names.append("lm_head.weight")
    config = SimpleNamespace(tie_word_embeddings=tied, hidden_size=hidden)
    if target_hidden is not None:
        config.target_hidden_size = target_hidden
    # The modules this release's LlamaModel.__init__ creates, off as in a plain config.
    model = SimpleNamespace(**{m: None for m in ("fc_norm", "input_norm") if m in init_names})
    obj, loaded = _drafter(module.LlamaForCausalLMEagle3, names, config, model)
    return obj, loaded, dec


def _ckpt(prefix="layers.0.", drop=()):
    keys = [f"{prefix}{k}" for k in _CKPT_DECODER]
    keys += ["fc.weight", "norm.weight", "embed_tokens.weight", "lm_head.weight"]
    w = [(k, _t()) for k in keys if k not in drop]
    import torch

    w += [("d2t", torch.zeros(4, dtype=torch.long)), ("t2d", torch.ones(8, dtype=torch.bool))]
    return w


def _raises(load, obj, weights, *needles):
    """load(obj, weights) must raise ValueError whose message holds every needle."""
    try:
        load(obj, iter(weights))
    except ValueError as e:
        missing = [n for n in needles if n not in str(e)]
        assert not missing, f"the error does not say {missing}: {e}"
        return str(e)
    raise AssertionError(f"loaded silently; wanted an error naming {list(needles)}")


def _loads(load, obj, weights, what):
    try:
        load(obj, iter(weights))
    except ValueError as e:
        raise AssertionError(f"{what} was rejected: {e}") from None


def layers0_keys_fill_decoder(module):
    load = module.LlamaForCausalLMEagle3.load_weights
    for prefix in ("layers.0.", "model.layers.0.", "midlayer."):
        obj, loaded, dec = _llama(module)
        _loads(load, obj, _ckpt(prefix), f"a checkpoint with {prefix}* keys")
        missing = [n for n in _DECODER if f"model.{dec}.{n}" not in loaded]
        assert not missing, f"keys {prefix}* did not reach model.{dec}.*: {missing} stayed unloaded"
        qkv = sorted(map(str, loaded[f"model.{dec}.self_attn.qkv_proj.weight"]))
        assert qkv == ["k", "q", "v"], f"q/k/v shards not all loaded: {qkv}"
        for n in ("model.fc.weight", "model.norm.weight", "lm_head.weight"):
            assert n in loaded, f"{n} was not loaded"
        assert obj.hot_token_id is not None, "d2t no longer sets hot_token_id"


def unmatched_keys_raise(module):
    load = module.LlamaForCausalLMEagle3.load_weights
    # One misspelt key per branch of the loader: q/k/v/gate/up go through the stacked
    # mapping, everything else through the plain lookup.
    for bogus in ("layers.0.self_atn.q_proj.weight", "layers.0.mlp.up_proj.weights",
                  "layers.0.self_atn.o_proj.weight", "decoder.0.hidden_norm.weight"):
        obj, _, _ = _llama(module)
        _raises(load, obj, _ckpt() + [(bogus, _t())], bogus, "matches no parameter")
    # What SGLang deliberately skips still loads: tied lm_head, rotary buffers,
    # kv-cache scales, speculators' verifier_* copies, d2t/t2d (in _ckpt).
    obj, loaded, _ = _llama(module, tied=True)
    _loads(load, obj, _ckpt() + [(k, _t()) for k in _SKIPPED], "keys SGLang deliberately skips")
    assert "model.embed_tokens.weight" in loaded, "embed_tokens not loaded with a tied head"
    _updates_stay_as_published(load, _llama(module)[0], _ckpt())


def _updates_stay_as_published(load, obj, ckpt):
    """Online weight updates keep the published behaviour: lists of partial buckets (from
    0.5.6 the spec-v2 worker passes the target's own tensors to the drafter too) and, after
    the startup load, generators (from 0.5.11 a disk update hands it the target's checkpoint)."""
    target_key = ("model.layers.7.mlp.experts.0.w1.weight", _t())
    load(obj, [target_key])
    load(obj, iter(ckpt))  # the startup load: checked, and it fits
    load(obj, iter([target_key]))


def later_release_keys_named(module):
    load = module.LlamaForCausalLMEagle3.load_weights
    for key, since, flag in (("fc_norm.0.weight", "0.5.12", "fc_norm: true"),
                             ("aux_norm_low.weight", "0.5.12", "fc_norm: true"),
                             ("input_norm.weight", "0.5.17", "norm_before_fc: true")):
        obj, _, _ = _llama(module)
        wanted = flag if _since(since) else f"needs SGLang >= {since}"
        msg = _raises(load, obj, _ckpt() + [(key, _t())], key, wanted)
        assert "randomly initialised" not in msg.split(key)[1].split(";")[0], msg
    for key in ("layers.0.self_attn.q_norm.weight", "layers.0.self_attn.k_proj.bias"):
        obj, _, _ = _llama(module)
        _raises(load, obj, _ckpt() + [(key, _t())], key, "no SGLang release through 0.5.23")


def missing_weights_raise(module):
    load = module.LlamaForCausalLMEagle3.load_weights
    obj, _, _ = _llama(module)
    _raises(load, obj, _ckpt(drop=("fc.weight",)), "model.fc.weight", "randomly initialised")
    obj, _, dec = _llama(module)
    _raises(load, obj, _ckpt(drop=("layers.0.self_attn.v_proj.weight",)),
            f"model.{dec}.self_attn.qkv_proj.weight (shards ['v'])")
    # embed_tokens is replaced by the target's (set_embed) when the hidden sizes agree...
    obj, _, _ = _llama(module)
    _loads(load, obj, _ckpt(drop=("embed_tokens.weight",)), "a checkpoint without embed_tokens")
    # ...and is the drafter's own, hence needed, when they differ.
    obj, _, _ = _llama(module, target_hidden=16)
    _raises(load, obj, _ckpt(drop=("embed_tokens.weight",)), "model.embed_tokens.weight")
    # An lm_head the EAGLE worker takes from the target is not needed either.
    obj, _, _ = _llama(module)
    obj.load_lm_head_from_target = True
    _loads(load, obj, _ckpt(drop=("lm_head.weight",)), "a checkpoint whose lm_head comes from the target")


# ------------------------------------------------------------------ MLA drafter (0.5.12+)
_MLA_ATTN = ["fused_qkv_a_proj_with_mqa", "q_a_layernorm", "q_b_proj", "kv_a_layernorm",
             "kv_b_proj", "o_proj"]
_MLA_CKPT_ATTN = ["q_a_proj", "kv_a_proj_with_mqa", "q_a_layernorm", "q_b_proj",
                  "kv_a_layernorm", "kv_b_proj", "o_proj"]
_NORMS = ["input_layernorm", "hidden_norm", "post_attention_layernorm"]


def _mla(module):
    names = ["model.embed_tokens.weight", "model.fc.weight", "model.norm.weight", "lm_head.weight"]
    names += [f"model.midlayer.self_attn.{n}.weight" for n in _MLA_ATTN]
    names += [f"model.midlayer.mlp.{n}.weight" for n in ("gate_up_proj", "down_proj")]
    names += [f"model.midlayer.{n}.weight" for n in _NORMS]
    init_names = module.Eagle3MLAModel.__init__.__code__.co_names
    model = SimpleNamespace(**({"fc_norm": None} if "fc_norm" in init_names else {}))
    config = SimpleNamespace(tie_word_embeddings=False, hidden_size=8)
    obj, loaded = _drafter(module.Eagle3DeepseekV2ForCausalLM, names, config, model)
    obj.post_load_weights = lambda: loaded.setdefault("post_load_weights", [None])
    return obj, loaded, names


def _mla_ckpt(drop=()):
    keys = [f"layers.0.self_attn.{n}.weight" for n in _MLA_CKPT_ATTN]
    keys += [f"layers.0.mlp.{n}.weight" for n in ("gate_proj", "up_proj", "down_proj")]
    keys += [f"layers.0.{n}.weight" for n in _NORMS] + ["fc.weight", "norm.weight", "lm_head.weight"]
    import torch

    return [(k, _t()) for k in keys if k not in drop] + [("d2t", torch.zeros(4, dtype=torch.long))]


def mla_drafter_keys_loud(module):
    load = module.Eagle3DeepseekV2ForCausalLM.load_weights
    obj, loaded, names = _mla(module)
    _loads(load, obj, _mla_ckpt() + [(k, _t()) for k in _SKIPPED], "a complete MLA drafter checkpoint")
    unloaded = [n for n in names if n not in loaded and n != "model.embed_tokens.weight"]
    assert not unloaded, f"parameters not loaded from a complete checkpoint: {unloaded}"
    assert sorted(loaded["model.midlayer.mlp.gate_up_proj.weight"]) == [0, 1], loaded
    assert "post_load_weights" in loaded, "post_load_weights (kv_b_proj split) no longer runs"
    for bogus in ("layers.0.mpl.gate_proj.weight", "layers.0.self_atn.o_proj.weight"):
        obj, _, _ = _mla(module)
        _raises(load, obj, _mla_ckpt() + [(bogus, _t())], bogus, "matches no parameter")
    obj, _, _ = _mla(module)
    _raises(load, obj, _mla_ckpt(drop=("layers.0.self_attn.kv_a_proj_with_mqa.weight",)),
            "fused_qkv_a_proj_with_mqa.weight", "its partner is missing")
    obj, _, _ = _mla(module)
    _raises(load, obj, _mla_ckpt(drop=("fc.weight",)), "model.fc.weight", "randomly initialised")
    obj, _, _ = _mla(module)
    wanted = "fc_norm: true" if _since("0.5.13") else "needs SGLang >= 0.5.13"
    _raises(load, obj, _mla_ckpt() + [("fc_norm.0.weight", _t())], "fc_norm.0.weight", wanted)
    _updates_stay_as_published(load, _mla(module)[0], _mla_ckpt())
