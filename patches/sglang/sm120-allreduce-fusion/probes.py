"""Probes for sm120-allreduce-fusion.

No GPU is needed: the GPU facts the patched code reads (module-level SM flags, server args,
`torch.cuda.get_device_capability`) are swapped for stand-ins for the duration of one call
and restored afterwards, then the installed gate / resolver / preflight is called.
"""

import contextlib
from types import SimpleNamespace


@contextlib.contextmanager
def _swapped(obj, **values):
    old = {k: getattr(obj, k) for k in values if hasattr(obj, k)}
    for k, v in values.items():
        setattr(obj, k, v)
    try:
        yield
    finally:
        for k in values:
            if k in old:
                setattr(obj, k, old[k])
            else:
                delattr(obj, k)


def _gpu(module, major, flag_on, sm90=False, sm100=False):
    """Swap in a GPU of the given major and the user's fusion flag (every spelling of it)."""
    import torch

    args = SimpleNamespace(
        enable_flashinfer_allreduce_fusion=flag_on,
        flashinfer_allreduce_fusion_backend="trtllm" if flag_on else None,
        attn_cp_size=1,
    )
    args.comm = args  # 0.5.17+: get_exec().comm.flashinfer_allreduce_fusion_backend
    stack = contextlib.ExitStack()
    stack.enter_context(_swapped(torch.cuda, get_device_capability=lambda *a, **k: (major, 0)))
    names = dict(
        _is_sm90_supported=sm90,
        _is_sm100_supported=sm100,
        _is_flashinfer_available=True,
        is_dp_attention_enabled=lambda: False,
        is_flashinfer_allreduce_unavailable=lambda: False,
        uses_cutedsl_ar_fusion=lambda: False,
        get_global_server_args=lambda: args,
        get_server_args=lambda: args,
        get_exec=lambda: args,
        global_server_args_dict={"enable_flashinfer_allreduce_fusion": flag_on},
        get_attn_tp_context=lambda: SimpleNamespace(input_scattered=False),
        tensor_model_parallel_all_reduce=lambda x: x,
    )
    # Only names the module really has: the gate must see our values, nothing else changes.
    stack.enter_context(_swapped(module, **{k: v for k, v in names.items() if hasattr(module, k)}))
    return stack


def _fusion_taken(module):
    """Ask the installed gate whether a 16-token batch would use the fused path."""
    gate = getattr(module, "flashinfer_ar_fusion_applies", None) or getattr(
        module, "apply_flashinfer_allreduce_fusion", None
    )
    if gate is not None:  # 0.5.8+
        return bool(gate(16))
    # <= 0.5.7: the gate is inline in CommunicateWithAllReduceAndLayerNormFn.
    import torch

    class Norm:
        def forward_with_allreduce_fusion(self, h, r):
            return "FUSED", r

        def __call__(self, h, r=None):
            return "UNFUSED", r

    ctx = SimpleNamespace(attn_tp_size=1, attn_dp_size=1, attn_tp_rank=0, cache=None)
    h, _ = module.CommunicateWithAllReduceAndLayerNormFn._gather_hidden_states_and_residual(
        torch.zeros(16, 8), torch.zeros(16, 8), None, Norm(), ctx, residual_input_mode=None
    )
    return h == "FUSED"


def gate_admits_sm12x_only_when_asked(module):
    cases = [
        ("SM 12.x, fusion flag on", dict(major=12, flag_on=True), True),
        ("SM 12.x, fusion flag off (default)", dict(major=12, flag_on=False), False),
        ("SM 8.x, fusion flag on", dict(major=8, flag_on=True), False),
        ("SM100, fusion flag on (upstream path)", dict(major=10, flag_on=True, sm100=True), True),
    ]
    for what, gpu, want in cases:
        with _gpu(module, **gpu):
            got = _fusion_taken(module)
        assert got is want, f"{what}: fused allreduce path {'taken' if got else 'refused'}"


def resolver_admits_sm12x(module):
    platform = SimpleNamespace(is_sm90=False, is_sm100=False, is_sm120=True, is_blackwell=True)
    with _gpu(module, 12, True), _swapped(
        module,
        **{
            k: v
            for k, v in dict(
                is_sm90_supported=lambda *a: False,
                is_sm100_supported=lambda *a: False,
                get_platform=lambda: platform,
            ).items()
            if hasattr(module, k)
        },
    ):
        try:
            got = module._resolve_backend("auto", False)
        except ValueError as e:
            raise AssertionError(f"SM 12.x still rejected by _resolve_backend: {e}") from None
    assert got == "trtllm", f"'auto' on single-node SM 12.x resolved to {got!r}, expected 'trtllm'"


class _Driver:
    """cuda-python stand-in: allocation granularity 2 MiB, multicast unsupported (PCIe)."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_SUPPORTED = 801

    CUmemAllocationGranularity_flags = SimpleNamespace(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED=1)
    CUmulticastGranularity_flags = SimpleNamespace(CU_MULTICAST_GRANULARITY_RECOMMENDED=1)

    def cuMemGetAllocationGranularity(self, prop, flags):
        return 0, 1 << 21

    def CUmulticastObjectProp(self):
        return SimpleNamespace()

    def cuMulticastGetGranularity(self, prop, flags):
        return self.CUresult.CUDA_ERROR_NOT_SUPPORTED, 0


def preflight_tolerates_no_multicast_on_sm12x(module):
    import torch

    size = module._flashinfer_trtllm_workspace_allocation_sizes
    prop = SimpleNamespace(requestedHandleTypes=0)
    with _gpu(module, 12, True):
        try:
            sizes = size(_Driver(), prop, 8, 2048, 7168, torch.bfloat16)
        except RuntimeError as e:
            raise AssertionError(f"SM 12.x preflight still fails without multicast: {e}") from None
    assert sizes and all(s > 0 and s % (1 << 21) == 0 for s in sizes), f"bad sizes {sizes}"
    with _gpu(module, 9, True, sm90=True):  # SM90/SM100 behaviour is unchanged
        try:
            size(_Driver(), prop, 8, 2048, 7168, torch.bfloat16)
        except RuntimeError:
            pass
        else:
            raise AssertionError("preflight on SM90 no longer fails when multicast is unavailable")
