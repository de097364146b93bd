"""Probes for vllm/sm120-allreduce-fusion. check(module) raises AssertionError.

`module` is the fusion-pass module (vllm.compilation.collective_fusion up to 0.15.x,
vllm.compilation.passes.fusion.allreduce_rms_fusion from 0.16.0). The probe reads the patched
tables and drives PassConfig's own size lookup with the platform reporting capability 12.0.
"""

from __future__ import annotations

import importlib

SM120 = 120
WORLD_SIZES = (2, 4, 8)
MiB = 1024 * 1024


def _lookup_as_sm120(pass_config_cls, world_size: int):
    """PassConfig's default table and flashinfer_max_size(world_size) as an SM120 CUDA box sees them."""
    platforms = importlib.import_module("vllm.platforms")
    interface = importlib.import_module("vllm.platforms.interface")
    platform = platforms.current_platform
    cap = interface.DeviceCapability(12, 0)
    saved = {k: platform.__dict__.get(k) for k in ("is_cuda", "get_device_capability")}
    platform.is_cuda = lambda: True
    platform.get_device_capability = lambda *a, **k: cap
    try:
        table = pass_config_cls.default_fi_allreduce_fusion_max_size_mb()
        cfg = object.__new__(pass_config_cls)
        object.__setattr__(cfg, "fi_allreduce_fusion_max_size_mb", None)
        size = pass_config_cls.flashinfer_max_size(cfg, world_size)
    finally:
        for k, v in saved.items():
            if v is None:
                platform.__dict__.pop(k, None)
            else:
                setattr(platform, k, v)
    return table, size


def sm120_fusion_size_table(module) -> None:
    tables = getattr(module, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB", None)
    if tables is None:
        # 0.10.0-0.11.0: no capability table at all; sizes are keyed by world size only.
        assert hasattr(module, "AllReduceFusionPass"), "no AllReduceFusionPass in this release"
        sizes = getattr(module, "_FI_MAX_SIZES", None)  # defined only when FlashInfer imports
        if sizes is not None:
            assert sizes and set(sizes) <= {2, 4, 6, 8, 16}, (
                f"_FI_MAX_SIZES is not keyed by world size only: {sorted(sizes)}"
            )
        from vllm.config import PassConfig

        assert PassConfig(enable_fi_allreduce_fusion=True).enable_fi_allreduce_fusion
        return

    entry = tables.get(SM120)
    assert entry, (
        f"FI_ALLREDUCE_FUSION_MAX_SIZE_MB has no entry for capability {SM120} "
        f"(keys {sorted(tables)}): the fusion pass disables itself on SM120"
    )
    one_shot = getattr(module, "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB", {})
    assert one_shot.get(SM120), "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB has no entry for capability 120"
    others = [c for c in tables if c != SM120]
    for ws in WORLD_SIZES:
        assert ws in entry, f"SM120 table lacks world size {ws}"
        floor = min(tables[c][ws] for c in others if ws in tables[c])
        assert 0 < entry[ws] <= floor, (
            f"SM120 size for world size {ws} is {entry[ws]} MB, above the smallest measured entry ({floor} MB)"
        )

    from vllm.config.compilation import PassConfig

    table, size = _lookup_as_sm120(PassConfig, 8)
    assert table == entry, f"PassConfig's lookup on capability 12.0 returned {table!r}, not the SM120 table"
    assert size == int(entry[8] * MiB), f"flashinfer_max_size(8) on SM120 is {size}, expected {entry[8]} MiB"
