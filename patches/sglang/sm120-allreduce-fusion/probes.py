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


def _platform(module, cuda):
    """Swap in the platform facts _resolve_backend reads: an SM 12.x CUDA GPU, or no CUDA."""
    platform = SimpleNamespace(is_cuda=cuda, is_sm90=False, is_sm100=False, is_sm120=cuda, is_blackwell=cuda)
    names = dict(
        is_cuda=lambda: cuda,
        is_sm90_supported=lambda *a: False,
        is_sm100_supported=lambda *a: False,
        get_platform=lambda: platform,
    )
    return _swapped(module, **{k: v for k, v in names.items() if hasattr(module, k)})


def resolver_admits_sm12x(module):
    with _gpu(module, 12, True), _platform(module, cuda=True):
        try:
            got = module._resolve_backend("auto", False)
        except ValueError as e:
            raise AssertionError(f"SM 12.x still rejected by _resolve_backend: {e}") from None
    assert got == "trtllm", f"'auto' on single-node SM 12.x resolved to {got!r}, expected 'trtllm'"


# _resolve_backend's own message on anything that is not SM90/SM10X (0.5.14+).
_UPSTREAM_RESOLVER_ERROR = "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."


def _no_cuda_capability(*a, **k):
    # What torch.cuda.get_device_capability does on a CPU/NPU build.
    raise AssertionError("Torch not compiled with CUDA enabled")


def resolver_keeps_upstream_error_off_cuda(module):
    """On a CPU/NPU/ROCm build a backend the user set still gets upstream's ValueError,
    not a CUDA error from our SM 12.x clause."""
    import torch

    with _platform(module, cuda=False), _swapped(
        torch.cuda, get_device_capability=_no_cuda_capability, is_available=lambda: False
    ):
        for backend in ("auto", "trtllm"):
            try:
                got = module._resolve_backend(backend, False)
            except ValueError as e:
                assert str(e) == _UPSTREAM_RESOLVER_ERROR, f"{backend!r} off CUDA: unexpected ValueError {e}"
            except BaseException as e:  # noqa: BLE001 - the point is which error escapes
                raise AssertionError(
                    f"{backend!r} off CUDA raised {type(e).__name__}: {e}, not upstream's ValueError"
                ) from None
            else:
                raise AssertionError(f"{backend!r} off CUDA resolved to {got!r} instead of upstream's error")


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


# --- auto-enable: SGLang's own defaults must not reach the SM 12.x gate -----------------

# What each published server_args.py auto-enables, read from the wheels (not from the
# patched file): architecture -> device majors on which `_handle_model_specific_adjustments`
# sets enable_flashinfer_allreduce_fusion for a single-node, no-DP-attention, TP 8 server.
# Before 0.5.4.post2 GptOss (and from 0.5.3.post2 DeepseekV3) checked is_sm100_supported();
# 0.5.4.post2 switched GptOss to is_blackwell_supported() (majors 10 and 12); 0.5.7 moved
# it to one block for four architectures under (is_sm90_supported() or
# is_blackwell_supported()); 0.5.8 narrowed that block to SM90/SM100. Releases outside
# 0.5.4.post2-0.5.7 are listed too: there the probe checks upstream's own narrowing holds.
_FOUR = ("DeepseekV3ForCausalLM", "GptOssForCausalLM", "Glm4MoeForCausalLM", "Qwen3MoeForCausalLM")
_PUBLISHED_AUTO_ENABLE = [
    ("0.5.1", "0.5.3.post2", {"DeepseekV3ForCausalLM": set(), "GptOssForCausalLM": {10},
                              "Glm4MoeForCausalLM": set(), "Qwen3MoeForCausalLM": set()}),
    ("0.5.3.post2", "0.5.4.post2", {"DeepseekV3ForCausalLM": {10}, "GptOssForCausalLM": {10},
                                    "Glm4MoeForCausalLM": set(), "Qwen3MoeForCausalLM": set()}),
    ("0.5.4.post2", "0.5.7", {"DeepseekV3ForCausalLM": {10}, "GptOssForCausalLM": {10, 12},
                              "Glm4MoeForCausalLM": set(), "Qwen3MoeForCausalLM": set()}),
    ("0.5.7", "0.5.8", {a: {9, 10, 12} for a in _FOUR}),
    ("0.5.8", "0.5.14", {a: {9, 10} for a in _FOUR}),  # 0.5.14+: the backend flag, not this one
]

_DEVICES = {  # major -> (what the utils' probes answer, device name)
    9: (dict(is_sm90_supported=True), "NVIDIA H100 80GB HBM3"),
    10: (dict(is_sm100_supported=True, is_blackwell_supported=True), "NVIDIA B200"),
    12: (dict(is_sm120_supported=True, is_blackwell_supported=True),
         "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
}


def _published(version):
    from packaging.version import Version

    for first, end, table in _PUBLISHED_AUTO_ENABLE:
        if Version(first) <= Version(version) < Version(end):
            return table
    raise AssertionError(f"no published auto-enable table for sglang {version}")


def _stand_in(server_args, arch, user_flag):
    """A ServerArgs with every field at its default, built without __post_init__ (which
    would resolve a real model and device), as a TP 8 single-node server of `arch`."""
    import dataclasses

    cls = server_args.ServerArgs
    sa = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            value = None
        object.__setattr__(sa, f.name, value)
    hf = SimpleNamespace(architectures=[arch], quantization_config=None)
    sa.model_path = "stand-in/" + arch
    sa.tp_size = 8
    sa.enable_flashinfer_allreduce_fusion = user_flag
    sa._quantization_explicitly_unset = False  # 0.5.11+ __post_init__: no `--quantization unquant`
    sa.get_hf_config = lambda: hf
    sa.get_model_config = lambda: SimpleNamespace(hf_config=hf, quantization=None)
    return sa


def _const(value):
    return lambda *a, **k: value


def _adjusted_flag(server_args, arch, major, user_flag=False):
    """Run the installed _handle_model_specific_adjustments on a stand-in for `arch` on a
    GPU of `major`; the fusion flag it leaves."""
    import torch

    facts, name = _DEVICES[major]
    probes = {**dict.fromkeys(("is_sm90_supported", "is_sm100_supported", "is_sm120_supported",
                               "is_blackwell_supported"), False), **facts}
    names = {k: _const(v) for k, v in probes.items()}
    names.update(is_cuda=lambda: True, is_hip=lambda: False, is_npu=lambda: False,
                 get_device_name=lambda *a: name, get_device_sm=lambda: major * 10,
                 is_triton_kernels_available=lambda: False, is_flashinfer_available=lambda: True)
    sa = _stand_in(server_args, arch, user_flag)
    with _swapped(torch.cuda, get_device_capability=lambda *a, **k: (major, 0)), _swapped(
        server_args, **{k: v for k, v in names.items() if hasattr(server_args, k)}
    ):
        cls = server_args.ServerArgs
        # 0.5.1-0.5.2 name it model_specific_adjustments
        adjust = getattr(cls, "_handle_model_specific_adjustments", None) or cls.model_specific_adjustments
        adjust(sa)
    return bool(sa.enable_flashinfer_allreduce_fusion)


def auto_enable_stays_off_on_sm12x(module):
    from importlib.metadata import version

    table = _published(version("sglang"))
    for arch, published in table.items():
        for major in (9, 10, 12):
            want = major in published and major != 12  # SM90/SM100 exactly as published
            got = _adjusted_flag(module, arch, major)
            assert got is want, (
                f"{arch} on SM {major}.x: auto-enable {'set' if got else 'left off'} the fusion "
                f"flag (published: {'set' if major in published else 'off'}; wanted: "
                f"{'set' if want else 'off'})"
            )
        # The user's own flag survives the adjustments on SM 12.x (the gate then admits it).
        assert _adjusted_flag(module, arch, 12, user_flag=True), f"{arch}: the user's flag was cleared"
