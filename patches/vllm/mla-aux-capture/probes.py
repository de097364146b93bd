"""Probes for vllm/mla-aux-capture. Each check(module) raises AssertionError.

They build the real classes with object.__new__ (no weights, no GPU, no distributed setup) and
drive the real methods: the interface check the runner uses (supports_eagle3), the aux-layer
setter/getter, DeepseekV2Model.forward's capture, and the Kimi-K2.5 wrapper's delegation.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

KIMI_K2_LAYERS = 61
KIMI_K2_AUX = (2, 30, 58)  # (2, n // 2, n - 3) for n = 61, what speculators drafters train on


def _nn():
    from torch import nn

    return nn


def _bare_model(ds_module, num_layers: int = KIMI_K2_LAYERS):
    """A real DeepseekV2Model instance whose __init__ did not run; `layers` is a stand-in."""
    nn = _nn()
    inner = object.__new__(ds_module.DeepseekV2Model)
    nn.Module.__init__(inner)
    inner.layers = nn.ModuleList(nn.Identity() for _ in range(num_layers))
    inner.aux_hidden_state_layers = tuple()
    return inner


def _causal_lm(ds_module, cls_name: str = "DeepseekV3ForCausalLM"):
    nn = _nn()
    lm = object.__new__(getattr(ds_module, cls_name))
    nn.Module.__init__(lm)
    lm.model = _bare_model(ds_module)
    return lm


def _default_layers(obj):
    for name in ("get_eagle3_aux_hidden_state_layers", "get_eagle3_default_aux_hidden_state_layers"):
        fn = getattr(obj, name, None)
        if fn is not None:
            return tuple(fn())
    raise AssertionError(f"{type(obj).__name__} has no get_eagle3_aux_hidden_state_layers()")


def deepseek_is_eagle3_and_takes_aux_layers(module) -> None:
    from vllm.model_executor.models.interfaces import supports_eagle3

    for name in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
        cls = getattr(module, name)
        assert supports_eagle3(cls), (
            f"{name} is not SupportsEagle3: the runner will refuse EAGLE-3 aux hidden states "
            "for DeepSeek / Kimi-K2 targets"
        )
    lm = _causal_lm(module)
    assert _default_layers(lm) == KIMI_K2_AUX, (
        f"default aux layers for a 61-layer target are {_default_layers(lm)}, expected {KIMI_K2_AUX}"
    )
    lm.set_aux_hidden_state_layers(KIMI_K2_AUX)
    got = tuple(lm.model.aux_hidden_state_layers)
    assert got == KIMI_K2_AUX, (
        f"set_aux_hidden_state_layers({KIMI_K2_AUX}) left DeepseekV2Model.aux_hidden_state_layers = {got}"
    )


class _FakeLayer:
    """Stands in for DeepseekV2DecoderLayer: (positions, h, residual, *extra) -> (h', residual')."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __call__(self, positions, hidden_states, residual, *extra):
        residual = hidden_states if residual is None else hidden_states + residual
        return hidden_states * 0 + float(self.i + 1), residual


def deepseek_forward_returns_aux_states(module) -> None:
    import torch

    n = 8
    aux = (2, 4, 5)
    model = _bare_model(module, n)
    del model.layers  # drop the ModuleList so a plain list of callables can stand in
    model.layers = [_FakeLayer(i) for i in range(n)]
    model.start_layer, model.end_layer = 0, n
    model.config = SimpleNamespace()  # no llama_4_scaling
    model.embed_input_ids = lambda ids: torch.ones(ids.shape[0], 4)
    model.embed_tokens = model.embed_input_ids
    model.norm = lambda h, r: (h + r, r)
    model.aux_hidden_state_layers = aux

    saved = module.get_pp_group
    module.get_pp_group = lambda: SimpleNamespace(is_first_rank=True, is_last_rank=True)
    try:
        out = module.DeepseekV2Model.forward(
            model, torch.tensor([1, 2, 3]), torch.arange(3), None
        )
    finally:
        module.get_pp_group = saved
    assert isinstance(out, tuple) and len(out) == 2, (
        f"DeepseekV2Model.forward with aux layers {aux} returned {type(out).__name__}, "
        "expected (hidden_states, aux_hidden_states)"
    )
    _, states = out
    assert len(states) == len(aux), f"captured {len(states)} aux states for layers {aux}"
    # Expected: hidden_states + residual at the *input* of layer idx (upstream 0.18.0 semantics).
    h, r = torch.ones(3, 4), None
    want = []
    for i in range(n):
        if i in aux:
            want.append(h + r)
        h, r = _FakeLayer(i)(None, h, r)
    for idx, got, exp in zip(aux, states, want):
        assert torch.equal(got, exp), f"aux state for layer {idx} is not hidden_states + residual at its input"
    model.aux_hidden_state_layers = ()
    module.get_pp_group = lambda: SimpleNamespace(is_first_rank=True, is_last_rank=True)
    try:
        plain = module.DeepseekV2Model.forward(model, torch.tensor([1, 2, 3]), torch.arange(3), None)
    finally:
        module.get_pp_group = saved
    assert isinstance(plain, torch.Tensor), "without aux layers forward must return a plain tensor"


def kimi_k25_delegates_aux_layers(module) -> None:
    from vllm.model_executor.models.interfaces import supports_eagle3

    nn = _nn()
    ds = importlib.import_module("vllm.model_executor.models.deepseek_v2")
    cls = module.KimiK25ForConditionalGeneration
    assert supports_eagle3(cls), "KimiK25ForConditionalGeneration is not SupportsEagle3"

    # 0.16+: language_model is a DeepseekV3ForCausalLM; 0.15.x: a bare DeepseekV2Model.
    layouts = (("DeepseekV3ForCausalLM", lambda: _causal_lm(ds)), ("DeepseekV2Model", lambda: _bare_model(ds)))
    errors = []
    for label, build in layouts:
        wrapper = object.__new__(cls)
        nn.Module.__init__(wrapper)
        wrapper.language_model = build()
        inner = getattr(wrapper.language_model, "model", wrapper.language_model)
        try:
            wrapper.set_aux_hidden_state_layers(KIMI_K2_AUX)
            default = _default_layers(wrapper)
        except AttributeError as exc:
            errors.append(f"{label}: {exc}")
            continue
        if tuple(inner.aux_hidden_state_layers) == KIMI_K2_AUX and default == KIMI_K2_AUX:
            return
        errors.append(f"{label}: DeepseekV2Model got {tuple(inner.aux_hidden_state_layers)}, default {default}")
    raise AssertionError(
        "KimiK25ForConditionalGeneration.set_aux_hidden_state_layers does not reach the language "
        "model's DeepseekV2Model: " + "; ".join(errors)
    )
