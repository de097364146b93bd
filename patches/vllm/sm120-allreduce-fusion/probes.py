"""Probes for vllm/sm120-allreduce-fusion. check(module) raises AssertionError.

`module` is the fusion-pass module (vllm.compilation.collective_fusion up to 0.15.x,
vllm.compilation.passes.fusion.allreduce_rms_fusion from 0.16.0). Each check belongs to one kind
of entry (the manifest's `when`), so a release that lacks what its entry promises fails:
sm120_fusion_size_table (D1-D5) reads the patched tables and drives PassConfig's own size lookup
with the platform reporting capability 12.0; fusion_pass_has_no_capability_gate (upstream,
0.10.0-0.11.0) drives the pass manager with the flag on.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

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
    """D1-D5: the capability-keyed tables must exist and hold an SM120 entry."""
    tables = getattr(module, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB", None)
    assert isinstance(tables, dict), (
        f"{module.__name__} has no FI_ALLREDUCE_FUSION_MAX_SIZE_MB table: not the release this variant patches"
    )
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


def fusion_pass_has_no_capability_gate(module) -> None:
    """0.10.0-0.11.0 (upstream): sizes are keyed by world size only, so nothing keeps SM120 out;
    what must hold is that the user's flag puts AllReduceFusionPass into the post-grad passes.
    Drives PostGradPassManager.configure with every pass class recorded instead of built (the
    real passes need a GPU and a process group), once with the flag off and once on."""
    assert isinstance(getattr(module, "AllReduceFusionPass", None), type), "no AllReduceFusionPass in this release"
    assert not hasattr(module, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB"), (
        "this release has the capability-keyed table: it is a D-variant release, not upstream"
    )
    pm = importlib.import_module("vllm.compilation.pass_manager")
    try:
        from vllm.config.compilation import PassConfig
    except ImportError:  # 0.10.x: one config module
        from vllm.config import PassConfig

    def recorder(name):
        return type(name, (), {"__init__": lambda self, *a, **k: None})

    # The pass classes configure() names. 0.11.0 imports the CUDA-only ones (AllReduceFusionPass
    # among them) only when the platform is CUDA, so on a CPU machine they are absent from the
    # module: provide them as the CUDA import would, and put the module back as it was after.
    swapped = {n: v for n, v in vars(pm).items() if n.endswith("Pass") and isinstance(v, type)}
    names = set(swapped) | {n for n in pm.PostGradPassManager.configure.__code__.co_names if n.endswith("Pass")}
    assert "AllReduceFusionPass" in names, "PostGradPassManager.configure never builds AllReduceFusionPass"
    for name in names:
        fake = recorder(name)
        fake.instance = classmethod(lambda cls, *a, **k: cls())  # FusionPass.instance(config)
        setattr(pm, name, fake)
    try:
        added = {}
        for flag in (False, True):
            mgr = object.__new__(pm.PostGradPassManager)
            mgr.passes = []
            cfg = SimpleNamespace(compilation_config=SimpleNamespace(
                pass_config=PassConfig(enable_fi_allreduce_fusion=flag)))
            mgr.configure(cfg)
            added[flag] = [type(p).__name__ for p in mgr.passes]
    finally:
        for name in names:
            if name in swapped:
                setattr(pm, name, swapped[name])
            else:
                delattr(pm, name)
    assert "AllReduceFusionPass" not in added[False], f"the fusion pass is on without the flag: {added[False]}"
    assert "AllReduceFusionPass" in added[True], (
        f"enable_fi_allreduce_fusion=True did not add AllReduceFusionPass: passes {added[True]}"
    )
