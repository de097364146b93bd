"""Probes for sglang/eagle3-fused-allreduce-capture. Each check(module) raises AssertionError.

The real DeepseekV2Model.forward, DeepseekV2DecoderLayer.forward and
LayerCommunicator.prepare_attn_and_capture_last_layer_outputs run on CPU stand-ins: a
four-layer model on a fake two-rank tensor-parallel group whose allreduce adds a known
offset (the other rank's partial sum). With the fusion on, each layer's MLP returns its
per-rank partial sum flagged `_sglang_needs_allreduce_fusion`, and the next layer's
prepare_attn runs the allreduce fused with the residual add (a fresh residual_out, as
FlashInfer's kernel writes); with it off, the MLP reduces and prepare_attn adds in place,
as the plain fused_add_rmsnorm does. The expected aux state of layer i is the reduced
residual stream entering layer i, computed here from the stand-ins' arithmetic, not read
from the engine (sgl-project/sglang#28343, 0.5.14). Fusion on (small CUDA-graph batches)
and off (eager, large batches) must capture the same values.
"""

from __future__ import annotations

import importlib
import types
from contextlib import nullcontext
from types import SimpleNamespace

import torch

OFFSET = 100.0  # what the other rank's partial sum adds in the fake allreduce
LAYERS = 4
CAPTURE = [1, 3]  # capture-before-layer indices, as layers_to_capture holds them
TOKENS, HIDDEN = 3, 4


def _reduce(x):
    return x + OFFSET


def _norm(x):
    return x * 0.5


def _attn(x):
    return x * 3 + 1


def _mlp_partial(x):
    return x * 2 + 1


def expected_stream(embed):
    """Reduced residual stream entering each layer, from the stand-ins' arithmetic."""
    x, out = embed.clone(), []
    for _ in range(LAYERS):
        out.append(x.clone())
        mid = x + _attn(_norm(x))
        x = mid + _reduce(_mlp_partial(_norm(mid)))
    return out


class _Comm:
    """LayerCommunicator stand-in; the capture method itself is the engine's."""

    def __init__(self, fuse, gather, quant_formats):
        self.fuse, self.quant_formats = fuse, quant_formats
        self._context = None
        self._communicate_simple_fn = (
            (lambda hidden_states, forward_batch, context: torch.cat([hidden_states, hidden_states]))
            if gather else (lambda hidden_states, forward_batch, context: hidden_states)
        )

    def prepare_attn(self, hidden_states, residual, forward_batch, *args, **kwargs):
        qf = args[0] if args else kwargs.get("quant_format", kwargs.get("qaunt_format", ""))
        self.quant_formats.append(qf)
        if residual is None:
            return _norm(hidden_states), hidden_states
        if getattr(hidden_states, "_sglang_needs_allreduce_fusion", False):
            residual_out = _reduce(hidden_states) + residual  # fused AR + add: a fresh tensor
            return _norm(residual_out), residual_out
        residual.add_(hidden_states)  # fused_add_rmsnorm: in place
        return _norm(residual), residual

    def prepare_mlp(self, hidden_states, residual, forward_batch):
        residual.add_(hidden_states)
        return _norm(residual), residual

    def should_fuse_mlp_allreduce_with_next_layer(self, forward_batch):
        return self.fuse

    def should_use_reduce_scatter(self, forward_batch):
        return False

    def postprocess_layer(self, hidden_states, residual, forward_batch):
        return hidden_states, residual


def _mlp(hidden_states, forward_batch, should_allreduce_fusion, *rest):
    partial = _mlp_partial(hidden_states)
    return partial if should_allreduce_fusion else _reduce(partial)


def _rebind(fn, **overrides):
    g = dict(fn.__globals__)
    g.update({k: v for k, v in overrides.items()})
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


class _Recorder:
    def with_current_layer(self, i):
        return nullcontext()


class _Alloc:
    def __init__(self, *a, **k):
        pass


def _no_cp(*a, **k):
    return False


_GLOBALS = dict(
    # either spelling of the piecewise-graph switch selects the recorder's per-layer context
    get_global_server_args=lambda: SimpleNamespace(enable_piecewise_cuda_graph=False,
                                                   disable_piecewise_cuda_graph=True),
    get_global_expert_distribution_recorder=lambda: _Recorder(),
    check_cuda_graph_backend=lambda *a, **k: True,
    BumpAllocator=_Alloc,
    dsa_use_prefill_cp=_no_cp, mla_use_prefill_cp=_no_cp, nsa_use_prefill_cp=_no_cp, enable_prefill_cp=_no_cp,
    get_attn_tp_context=lambda: SimpleNamespace(clear_attn_inputs=lambda: None, input_scattered=False),
    get_attention_tp_group=lambda: SimpleNamespace(all_gather=lambda x, dim=0: torch.cat([x, x], dim=dim)),
)


def _run(ds, comm_cls, fuse, gather_from=None):
    """Captured aux states of one forward; also the quant formats prepare_attn was given."""
    layer_forward = _rebind(ds.DeepseekV2DecoderLayer.forward, **_GLOBALS)
    model_forward = _rebind(ds.DeepseekV2Model.forward, **_GLOBALS)
    capture = comm_cls.prepare_attn_and_capture_last_layer_outputs
    comm_type = type("Comm", (_Comm,), {"prepare_attn_and_capture_last_layer_outputs": capture})
    quant_formats = []

    class Layer(SimpleNamespace):
        def __call__(self, *a, **k):
            return layer_forward(self, *a, **k)

    flags = dict(nsa_enable_prefill_cp=False, dsa_enable_prefill_cp=False, mla_enable_prefill_cp=False)
    layers = [
        Layer(layer_communicator=comm_type(fuse, gather_from is not None and i >= gather_from, quant_formats),
              self_attn=lambda hidden_states, **k: _attn(hidden_states), mlp=_mlp,
              layer_scatter_modes=None, _gfx95_quant_format="fp8", is_layer_sparse=True, **flags)
        for i in range(LAYERS)
    ]
    embed = torch.arange(TOKENS * HIDDEN, dtype=torch.float32).reshape(TOKENS, HIDDEN) / 7
    model = SimpleNamespace(
        start_layer=0, end_layer=LAYERS, layers=layers, layers_to_capture=list(CAPTURE),
        pp_group=SimpleNamespace(is_first_rank=True, is_last_rank=True),
        embed_tokens=lambda ids: embed.clone(), norm=lambda h, r=None: (h + r, h + r) if r is not None else h,
        llama_4_scaling_config=None, first_k_dense_replace=1,
        enable_a2a_moe=gather_from is not None, use_dsa=False, cp_size=None,
        _dsa_forward_uses_topk=lambda: False, **flags,
    )
    batch = SimpleNamespace(can_run_tbo=False, forward_mode=SimpleNamespace(is_idle=lambda: False))
    out = model_forward(model, torch.zeros(TOKENS, dtype=torch.long), torch.zeros(TOKENS), batch)
    assert isinstance(out, tuple), f"no aux states returned: wanted (hidden, aux) for layers {CAPTURE}"
    return out[1], quant_formats, expected_stream(embed)


def _same(got, want, what):
    assert len(got) == len(want), f"{what}: wanted {len(want)} aux states, found {len(got)}"
    for layer, g, w in zip(CAPTURE, got, want):
        diff = (g - w).abs().max().item() if g.shape == w.shape else None
        assert g.shape == w.shape and diff < 1e-4, (
            f"{what}: layer {layer} aux state is not the reduced residual stream: wanted row 0 = "
            f"{w[0].tolist()}, found {g[0].tolist()} (shape {tuple(g.shape)}, max off by {diff}; "
            f"{OFFSET} is the other rank's partial sum)")


def fused_capture_is_reduced(module) -> None:
    ds = module
    comm = importlib.import_module("sglang.srt.layers.communicator").LayerCommunicator
    reads_gfx95 = "_gfx95_quant_format" in ds.DeepseekV2DecoderLayer.forward.__code__.co_consts
    want_qf = "fp8" if reads_gfx95 else ""  # older releases compute it; "" off gfx95
    for fuse in (False, True):
        got, qfs, stream = _run(ds, comm, fuse)
        _same(got, [stream[i] for i in CAPTURE], f"fusion {'on' if fuse else 'off'}")
        assert qfs and set(qfs) == {want_qf}, f"prepare_attn lost the quant format: wanted {want_qf!r}, found {qfs}"
    # DP attention / enable_a2a_moe: the capture goes through the layer's own gather
    # (input mode -> attention mode), here doubling the rows from layer 2 on.
    got, _, stream = _run(ds, comm, True, gather_from=2)
    want = [stream[i] if i < 2 else torch.cat([stream[i], stream[i]]) for i in CAPTURE]
    _same(got, want, "fusion on, gathered capture")
