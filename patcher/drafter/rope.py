"""RoPE: which config layout the release's own transformers reads, and the RoPE a drafter runs with
there against the one it was trained with (``shape_checks``, ``fix_plan``).

transformers 5 writes a model's RoPE as `rope_parameters` ({"rope_type", "rope_theta", ...});
transformers 4 reads only `rope_theta` (LlamaConfig default 10000.0) and `rope_scaling`. SGLang up
to 0.5.9 pins transformers 4.57.1 and builds the drafter's LlamaConfig with it: a config carrying
only `rope_parameters` runs at rope_theta 10000 without scaling, in silence. SGLang 0.5.10 pins
transformers 5 (and 0.5.6.post1 alone pinned 5.0.0rc0). vLLM maps either layout onto
`rope_parameters` itself (patch_rope_parameters) and reads a speculators config's as written.
Each engine's module says which of its releases read it (``DrafterReading.rope_parameters_read``).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from patcher.engine_specs.base import contains
from patcher.release.release import Release

LEGACY_ROPE_THETA = 10000.0


def reads_rope_parameters(release: Release) -> bool | None:
    """Whether the release reads a drafter's `rope_parameters`; None: release unknown."""
    if release.version is None:
        return None
    read = release.spec.drafter_rules.rope_parameters_read
    return read is None or any(contains(SpecifierSet(s), release.version) for s in read)


def rope(theta: float | None, scaling: dict | None) -> dict:
    """One comparable form: {"rope_theta": t, "rope_type": kind, <scaling fields>}."""
    out = {k: v for k, v in (scaling or {}).items() if k not in ("type", "rope_type", "rope_theta")}
    kind = (scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default"
    out["rope_type"] = kind
    if kind == "default":
        out = {"rope_type": "default"}
    out["rope_theta"] = float(theta) if theta is not None else LEGACY_ROPE_THETA
    return out


def trained_rope(rope_theta: float | None, rope_scaling: dict | None, rope_parameters: dict | None) -> dict:
    """The RoPE a drafter was trained with: transformers 5's `rope_parameters` when written (the
    trainer's own layout), else the legacy pair."""
    if rope_parameters:
        return rope(rope_parameters.get("rope_theta", rope_theta), rope_parameters)
    return rope(rope_theta, rope_scaling)


def rope_as_read(release: Release, rope_theta: float | None, rope_scaling: dict | None,
                 rope_parameters: dict | None) -> dict | None:
    """The RoPE the release runs the drafter with; None: release unknown."""
    modern = reads_rope_parameters(release)
    if modern is None:
        return None
    if modern:
        return trained_rope(rope_theta, rope_scaling, rope_parameters)
    return rope(rope_theta, rope_scaling)


def legacy_rope_fields(trained: dict) -> dict:
    """`rope_theta` + `rope_scaling` that transformers 4 reads as ``trained``."""
    scaling = {k: v for k, v in trained.items() if k != "rope_theta"}
    return {"rope_theta": trained["rope_theta"],
            "rope_scaling": None if scaling.get("rope_type") == "default" else scaling}
