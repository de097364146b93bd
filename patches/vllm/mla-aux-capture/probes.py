"""Probes for vllm/mla-aux-capture. Each check(module) raises AssertionError.

They build the real classes with object.__new__ (no weights, no GPU, no distributed setup) and
drive the real methods: the interface check the runner uses (supports_eagle3), the aux-layer
setter and the default-layers method the runner calls, DeepseekV2Model's own __init__ (its default
of no aux layers) and forward's capture, the Kimi-K2.5 wrapper's delegation, and the EAGLE
proposer's load_model on a K2.5 target (image token, shared embed_tokens and lm_head).
Every hunk of every variant is caught by one of them: python -m patcher.maintainer.mutation.
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
    return inner


class _Patched:
    """Module attributes replaced for the duration of a with-block, then put back."""

    def __init__(self, module, **names) -> None:
        self.module, self.names, self.saved = module, names, {}

    def __enter__(self):
        for name, value in self.names.items():
            self.saved[name] = getattr(self.module, name)
            setattr(self.module, name, value)
        return self

    def __exit__(self, *exc) -> None:
        for name, value in self.saved.items():
            setattr(self.module, name, value)


def _constructed_model(ds_module, num_layers: int):
    """A DeepseekV2Model built by its own __init__ (what every DeepSeek / Kimi server runs),
    with the parallel layers swapped for CPU stand-ins: whatever __init__ sets by default
    (or forgets to) is what forward will see."""
    import torch

    nn = _nn()
    hf = SimpleNamespace(vocab_size=16, hidden_size=4, num_hidden_layers=num_layers, rms_norm_eps=1e-6)
    vllm_config = SimpleNamespace(model_config=SimpleNamespace(hf_config=hf), quant_config=None,
                                  scheduler_config=SimpleNamespace(max_num_batched_tokens=8))

    def make_layers(n, layer_fn, prefix=""):
        return 0, n, [_FakeLayer(i) for i in range(n)]

    class _Norm:
        def __init__(self, *a, **k) -> None:
            pass

        def __call__(self, h, r):
            return h + r, r

    class _Embed(nn.Module):
        def __init__(self, vocab, hidden, **k) -> None:
            super().__init__()

        def forward(self, ids):
            return torch.ones(ids.shape[0], 4)

    ranks = lambda: SimpleNamespace(is_first_rank=True, is_last_rank=True, world_size=1)  # noqa: E731
    cls = ds_module.DeepseekV2Model
    model = object.__new__(cls)
    with _Patched(ds_module, get_pp_group=ranks, make_layers=make_layers, RMSNorm=_Norm,
                  VocabParallelEmbedding=_Embed):
        _own_init(cls)(model, vllm_config=vllm_config, prefix="model")
    return model


def _own_init(cls):
    """cls's own __init__ under @support_torch_compile, whose wrapper needs a full VllmConfig
    (compilation settings) before it calls the model's __init__: found among the wrapper's
    closure cells by its qualified name."""
    want = f"{cls.__name__}.__init__"
    todo, seen = [cls.__init__], set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen or not callable(fn):
            continue
        seen.add(id(fn))
        if getattr(fn, "__qualname__", "") == want:
            return fn
        todo.extend(c.cell_contents for c in (getattr(fn, "__closure__", None) or ()))
        if hasattr(fn, "__wrapped__"):
            todo.append(fn.__wrapped__)
    raise AssertionError(f"{want} not found behind its decorators: cannot drive the real constructor")


def _causal_lm(ds_module, cls_name: str = "DeepseekV3ForCausalLM"):
    nn = _nn()
    lm = object.__new__(getattr(ds_module, cls_name))
    nn.Module.__init__(lm)
    lm.model = _bare_model(ds_module)
    return lm


def _runner_default_name() -> str:
    """The default-layers method the model runner calls: the one SupportsEagle3 declares
    (get_eagle3_aux_hidden_state_layers up to 0.17.x, get_eagle3_default_aux_hidden_state_layers
    from 0.18.0, where the old name is dead code)."""
    from vllm.model_executor.models.interfaces import SupportsEagle3

    for name in ("get_eagle3_default_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers"):
        if hasattr(SupportsEagle3, name):
            return name
    raise AssertionError("SupportsEagle3 declares no default aux-layers method")


def _default_layers(obj):
    name = _runner_default_name()
    fn = getattr(obj, name, None)
    assert fn is not None, f"{type(obj).__name__} has no {name}(), which the model runner calls"
    return tuple(fn())


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
    model = _constructed_model(module, n)
    ranks = lambda: SimpleNamespace(is_first_rank=True, is_last_rank=True)  # noqa: E731
    # Without EAGLE-3 nobody sets aux layers: the default from __init__ must give a plain tensor.
    with _Patched(module, get_pp_group=ranks):
        plain = module.DeepseekV2Model.forward(model, torch.tensor([1, 2, 3]), torch.arange(3), None)
    assert isinstance(plain, torch.Tensor), (
        f"DeepseekV2Model.forward without aux layers returned {type(plain).__name__}, expected a tensor"
    )
    model.aux_hidden_state_layers = aux
    with _Patched(module, get_pp_group=ranks):
        out = module.DeepseekV2Model.forward(model, torch.tensor([1, 2, 3]), torch.arange(3), None)
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


K25_MEDIA_TOKEN = 163605  # Kimi-K2.5's media_placeholder_token_id; its config has no image_token_index


def _k25_target(nn):
    """A KimiK25ForConditionalGeneration shaped as this release's __init__ builds it: up to 0.15.x
    language_model is a bare DeepseekV2Model and lm_head sits on the wrapper; from 0.16 it is a
    DeepseekV3ForCausalLM holding both. Returns (wrapper, its embed_tokens, its lm_head)."""
    import inspect

    ds = importlib.import_module("vllm.model_executor.models.deepseek_v2")
    k25 = importlib.import_module("vllm.model_executor.models.kimi_k25")
    cls = k25.KimiK25ForConditionalGeneration
    wrapper = object.__new__(cls)
    nn.Module.__init__(wrapper)
    wrapper.config = SimpleNamespace(media_placeholder_token_id=K25_MEDIA_TOKEN)
    embed, head = nn.Embedding(16, 4), nn.Linear(4, 16)
    if "DeepseekV2Model(" in inspect.getsource(cls.__init__):
        wrapper.language_model = _bare_model(ds, 2)
        wrapper.language_model.embed_tokens = embed
        wrapper.lm_head = head
    else:
        wrapper.language_model = _causal_lm(ds)
        wrapper.language_model.model.embed_tokens = embed
        wrapper.language_model.lm_head = head
    return wrapper, embed, head


def kimi_k25_proposer_shares_target_weights(module) -> None:
    """EagleProposer.load_model on a Kimi-K2.5 target, with the draft model and the layer
    registry stood in: the drafter must get K2.5's media token as its image token and share
    the target's embed_tokens and lm_head (it is trained without its own)."""
    nn = _nn()
    wrapper, embed, head = _k25_target(nn)

    draft = nn.Module()
    draft.config = SimpleNamespace()
    draft.model = nn.Module()
    draft.model.embed_tokens = nn.Embedding(16, 4)
    draft.lm_head = nn.Linear(4, 16)
    draft.has_own_embed_tokens = False
    draft.has_own_lm_head = False

    proposer = object.__new__(module.EagleProposer)
    spec = SimpleNamespace(draft_model_config=None, draft_load_config=None)
    proposer.vllm_config = SimpleNamespace(speculative_config=spec)
    proposer.speculative_config = spec
    proposer.supports_mm_inputs = False
    proposer.parallel_drafting = False
    proposer.use_local_argmax_reduction = False
    proposer.device = "cpu"
    ranks = lambda: SimpleNamespace(world_size=1, is_first_rank=True, is_last_rank=True)  # noqa: E731
    with _Patched(module, get_model=lambda **kw: draft, get_layers_from_vllm_config=lambda *a, **k: {},
                  get_pp_group=ranks):
        try:
            proposer.load_model(wrapper)
        except AttributeError as exc:
            raise AssertionError(
                f"EagleProposer.load_model on a Kimi-K2.5 target raised AttributeError: {exc}"
            ) from None
    got = getattr(draft.config, "image_token_index", None)
    assert got == K25_MEDIA_TOKEN, (
        f"drafter's image_token_index is {got}, expected K2.5's media token {K25_MEDIA_TOKEN}"
    )
    assert draft.model.embed_tokens is embed, "the drafter did not get the K2.5 target's embed_tokens"
    assert draft.lm_head is head, "the drafter did not get the K2.5 target's lm_head"
