"""Probes for vllm/sm120-allreduce-fusion. check(module) raises AssertionError.

`module` is the fusion-pass module (vllm.compilation.collective_fusion up to 0.15.x,
vllm.compilation.passes.fusion.allreduce_rms_fusion from 0.16.0). Each check belongs to one kind
of entry (the manifest's `when`), so a release that lacks what its entry promises fails:
sm120_fusion_size_table (D0-D2, 0.11.1-0.16.0, where only the fusion pass reads the table) reads
the patched tables and drives PassConfig's own size lookup with the platform reporting capability
12.0; sm120_size_for_the_pass_only (D6-D9, 0.17.0+, where the standalone FlashInferAllReduce reads
the default table too and from 0.29.0 turns itself on by default) checks that the default table and
the standalone all-reduce stay as published on SM120 while the pass's lookup, with
fuse_allreduce_rms on, gets the SM120 size; fusion_pass_has_no_capability_gate (upstream,
0.10.0-0.11.0) drives the pass manager with the flag on.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

SM120 = 120
WORLD_SIZES = (2, 4, 8)
MiB = 1024 * 1024


class _AsSM120:
    """The current platform reports CUDA capability 12.0 inside the with-block, then is put back."""

    def __enter__(self):
        platforms = importlib.import_module("vllm.platforms")
        interface = importlib.import_module("vllm.platforms.interface")
        self.platform = platforms.current_platform
        cap = interface.DeviceCapability(12, 0)
        self.saved = {k: self.platform.__dict__.get(k) for k in ("is_cuda", "get_device_capability")}
        self.platform.is_cuda = lambda: True
        self.platform.get_device_capability = lambda *a, **k: cap
        return self

    def __exit__(self, *exc) -> None:
        for k, v in self.saved.items():
            if v is None:
                self.platform.__dict__.pop(k, None)
            else:
                setattr(self.platform, k, v)


def _pass_config(pass_config_cls, **fields):
    """A PassConfig whose __init__ did not run (its validators need a full VllmConfig)."""
    cfg = object.__new__(pass_config_cls)
    object.__setattr__(cfg, "fi_allreduce_fusion_max_size_mb", None)
    for k, v in fields.items():
        object.__setattr__(cfg, k, v)
    return cfg


def _lookup_as_sm120(pass_config_cls, world_size: int, **fields):
    """PassConfig's default table and flashinfer_max_size(world_size) as an SM120 CUDA box sees them."""
    with _AsSM120():
        table = pass_config_cls.default_fi_allreduce_fusion_max_size_mb()
        size = pass_config_cls.flashinfer_max_size(_pass_config(pass_config_cls, **fields), world_size)
    return table, size


def _floor_check(name: str, tables: dict, entry: dict) -> None:
    """The SM120 sizes are conservative: at most the smallest measured entry per world size."""
    others = [c for c in tables if c != SM120]
    for ws in WORLD_SIZES:
        assert ws in entry, f"{name}: SM120 entry lacks world size {ws}"
        floor = min(tables[c][ws] for c in others if ws in tables[c])
        assert 0 < entry[ws] <= floor, (
            f"{name}: SM120 size for world size {ws} is {entry[ws]} MB, above the smallest measured entry ({floor} MB)"
        )


def sm120_fusion_size_table(module) -> None:
    """D0-D2 (0.11.1-0.16.0): the capability-keyed tables must exist and hold an SM120 entry (there
    only the fusion pass and its compile-range split, both behind the user's flag, read them)."""
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
    _floor_check("FI_ALLREDUCE_FUSION_MAX_SIZE_MB", tables, entry)

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


def _standalone_all_reduce_as_sm120(world_size: int):
    """The standalone FlashInferAllReduce built as an SM120 CUDA box with FlashInfer present builds
    it (cuda_communicator does so when VLLM_ALLREDUCE_USE_FLASHINFER is on: the default from 0.29.0).
    torch.distributed is a stand-in reporting `world_size` ranks."""
    far = importlib.import_module("vllm.distributed.device_communicators.flashinfer_all_reduce")
    saved = {"fi_ar_available": far.fi_ar_available, "dist": far.dist}
    far.fi_ar_available = True
    far.dist = SimpleNamespace(get_world_size=lambda group=None: world_size, get_rank=lambda group=None: 0)
    try:
        with _AsSM120():
            try:
                ar = far.FlashInferAllReduce(group=object(), device="cpu")
            except Exception as exc:  # got past the table check into the real setup
                return f"went past the size-table check and raised {type(exc).__name__}: {exc}"
    finally:
        for k, v in saved.items():
            setattr(far, k, v)
    return None if ar.disabled else f"enabled with max_workspace_size={getattr(ar, 'max_workspace_size', None)}"


def sm120_size_for_the_pass_only(module) -> None:
    """D6-D9 (0.17.0+): the SM120 size reaches the fusion pass, and only it, only when the user
    turned it on. The default table, the default lookup every other reader uses, and the standalone
    FlashInferAllReduce stay as published on SM120 (disabled: no entry)."""
    tables = getattr(module, "FI_ALLREDUCE_FUSION_MAX_SIZE_MB", None)
    assert isinstance(tables, dict), f"{module.__name__} has no FI_ALLREDUCE_FUSION_MAX_SIZE_MB table"
    assert SM120 not in tables, (
        "FI_ALLREDUCE_FUSION_MAX_SIZE_MB has an SM120 entry: the standalone FlashInferAllReduce (on by "
        "default from 0.29.0) and every other reader of the default table turn on for SM 12.x"
    )
    opt_in = getattr(module, "FI_ALLREDUCE_FUSION_OPT_IN_MAX_SIZE_MB", {}).get(SM120)
    assert opt_in, "no FI_ALLREDUCE_FUSION_OPT_IN_MAX_SIZE_MB[120]: the fusion pass has no size on SM120"
    _floor_check("FI_ALLREDUCE_FUSION_OPT_IN_MAX_SIZE_MB", {**tables, SM120: opt_in}, opt_in)
    one_shot = getattr(module, "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB", {})
    assert one_shot.get(SM120), "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB has no entry for capability 120"
    _floor_check("_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB", one_shot, one_shot[SM120])

    from vllm.config.compilation import PassConfig

    table, size_off = _lookup_as_sm120(PassConfig, 8, fuse_allreduce_rms=False)
    assert table == {}, f"PassConfig.default_fi_allreduce_fusion_max_size_mb() on SM120 is {table!r}, published: {{}}"
    assert size_off is None, f"flashinfer_max_size(8) on SM120 with fuse_allreduce_rms off is {size_off}, wanted None"
    _, size_on = _lookup_as_sm120(PassConfig, 8, fuse_allreduce_rms=True)
    assert size_on == int(opt_in[8] * MiB), (
        f"flashinfer_max_size(8) on SM120 with fuse_allreduce_rms on is {size_on}, expected {opt_in[8]} MiB"
    )
    _, size_user = _lookup_as_sm120(PassConfig, 8, fuse_allreduce_rms=True, fi_allreduce_fusion_max_size_mb=3)
    assert size_user == 3 * MiB, f"the user's fi_allreduce_fusion_max_size_mb=3 gave {size_user}, not 3 MiB"

    for ws in WORLD_SIZES:
        wrong = _standalone_all_reduce_as_sm120(ws)
        assert wrong is None, f"standalone FlashInferAllReduce on SM120 at TP{ws}: {wrong}; published: disabled"
