"""Probes for eagle3-drafter-keys.

They call the installed `LlamaForCausalLMEagle3.load_weights` unbound on a tiny stand-in
`self` (named parameters + config only), so no model, GPU or distributed state is built.
"""

from types import SimpleNamespace

# Decoder-layer parameters as SGLang names them (after q/k/v and gate/up stacking).
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


def _decoder_attr(module):
    # <= 0.5.11 stores the layer as `self.midlayer`, 0.5.12+ as `self.layers[0]`.
    names = module.LlamaModel.__init__.__code__.co_names
    return "midlayer" if "midlayer" in names else "layers.0"


def _stand_in(module, tied=False):
    """A `self` for load_weights whose parameters record what was loaded into them."""
    import torch

    loaded = {}
    params = []
    dec = _decoder_attr(module)
    names = ["model.embed_tokens.weight", "model.fc.weight", "model.norm.weight"]
    names += [f"model.{dec}.{n}" for n in _DECODER]
    if not tied:  # a tied lm_head is embed_tokens and is not listed twice
        names.append("lm_head.weight")
    for name in names:
        p = torch.nn.Parameter(torch.zeros(1), requires_grad=False)

        def loader(param, w, shard_id=None, _name=name):
            loaded.setdefault(_name, []).append(shard_id)

        p.weight_loader = loader
        params.append((name, p))
    fake = SimpleNamespace(
        named_parameters=lambda: iter(params),
        config=SimpleNamespace(tie_word_embeddings=tied),
        hot_token_id=None,
    )
    return fake, loaded, dec


def _ckpt(prefix):
    import torch

    keys = [f"{prefix}{k}" for k in _CKPT_DECODER]
    keys += ["fc.weight", "norm.weight", "embed_tokens.weight", "lm_head.weight"]
    w = [(k, torch.zeros(1)) for k in keys]
    w += [("d2t", torch.zeros(4, dtype=torch.long)), ("t2d", torch.ones(8, dtype=torch.bool))]
    return w


def layers0_keys_fill_decoder(module):
    load = module.LlamaForCausalLMEagle3.load_weights
    for prefix in ("layers.0.", "model.layers.0."):
        fake, loaded, dec = _stand_in(module)
        load(fake, _ckpt(prefix))
        missing = [n for n in _DECODER if f"model.{dec}.{n}" not in loaded]
        assert not missing, (
            f"checkpoint keys {prefix}* did not reach the drafter's decoder layer "
            f"(model.{dec}.*): {missing} stayed unloaded"
        )
        qkv = sorted(map(str, loaded[f"model.{dec}.self_attn.qkv_proj.weight"]))
        assert qkv == ["k", "q", "v"], f"q/k/v shards not all loaded: {qkv}"
        for n in ("model.fc.weight", "model.norm.weight", "lm_head.weight"):
            assert n in loaded, f"{n} was not loaded"
        assert fake.hot_token_id is not None, "d2t no longer sets hot_token_id"


def unmatched_keys_raise(module):
    import torch

    load = module.LlamaForCausalLMEagle3.load_weights
    fake, _, _ = _stand_in(module)
    bogus = [("decoder.0.self_attn.o_proj.weight", torch.zeros(1))]
    try:
        load(fake, _ckpt("layers.0.") + bogus)
    except ValueError as e:
        assert "decoder.0.self_attn.o_proj.weight" in str(e), f"error does not name the key: {e}"
    else:
        raise AssertionError("a checkpoint key matching no parameter was dropped silently")
    # Keys that legitimately match nothing must still load: tied lm_head, verifier_* copies.
    fake, loaded, _ = _stand_in(module, tied=True)
    extra = [("verifier_lm_head.weight", torch.zeros(1)), ("verifier_norm.weight", torch.zeros(1))]
    try:
        load(fake, _ckpt("layers.0.") + extra)
    except ValueError as e:
        raise AssertionError(f"legitimate drafter keys were rejected: {e}") from None
    assert "model.embed_tokens.weight" in loaded, "embed_tokens not loaded with a tied head"
