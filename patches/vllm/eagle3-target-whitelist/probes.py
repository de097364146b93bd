"""Probes for vllm/eagle3-target-whitelist. Each check(module) raises AssertionError."""

from __future__ import annotations

from types import SimpleNamespace

KIMI_TARGETS = ("kimi_k2", "deepseek_v3", "deepseek_v2", "kimi_k25")


def _validator(cls, name: str):
    """The undecorated body of a pydantic ``@model_validator(mode="after")``."""
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is not None and name in getattr(decorators, "model_validators", {}):
        return decorators.model_validators[name].func
    fn = getattr(cls, name, None)
    assert callable(fn), f"{cls.__name__}.{name} not found: cannot exercise the EAGLE-3 target check"
    return getattr(fn, "__func__", fn)


def _config(cls, model_type: str):
    """A SpeculativeConfig without running __init__: only what _verify_args reads for eagle3.
    Any attribute nobody set reads as None (so optional sub-configs are skipped)."""

    def __getattr__(self, name):  # only called when normal lookup fails
        if name.startswith("__"):
            raise AttributeError(name)
        return None

    probe_cls = type("_ProbeSpeculativeConfig", (cls,), {"__getattr__": __getattr__})
    obj = object.__new__(probe_cls)
    target = SimpleNamespace(
        hf_text_config=SimpleNamespace(model_type=model_type),
        hf_config=SimpleNamespace(model_type=model_type),
        get_vocab_size=lambda: 32000,
    )
    for key, value in {
        "method": "eagle3",
        "model": "probe/eagle3-drafter",
        "num_speculative_tokens": 3,
        "tensor_parallel_size": None,
        "draft_model_config": None,
        "draft_parallel_config": None,
        "disable_by_batch_size": None,
        "target_model_config": target,
    }.items():
        object.__setattr__(obj, key, value)
    return obj


def _accepts_kimi_targets(verify, cls) -> None:
    for model_type in KIMI_TARGETS:
        try:
            verify(_config(cls, model_type))
        except ValueError as exc:
            raise AssertionError(
                f"SpeculativeConfig._verify_args rejects an EAGLE-3 target with "
                f"model_type={model_type!r}: {exc}"
            ) from None


def eagle3_accepts_kimi_targets(module) -> None:
    """Releases with the hard-coded target list (A4-A6, upstream 0.18-0.21)."""
    cls = module.SpeculativeConfig
    verify = _validator(cls, "_verify_args")
    _accepts_kimi_targets(verify, cls)
    # Control: an unknown model_type must be refused, which shows the calls above really
    # reached the list check (and were not let through by something else).
    try:
        verify(_config(cls, "probe_unknown_arch"))
    except ValueError as exc:
        assert "probe_unknown_arch" in str(exc) or "supported" in str(exc), (
            f"control model_type was refused for another reason: {exc}"
        )
    else:
        raise AssertionError(
            "SpeculativeConfig._verify_args accepted model_type='probe_unknown_arch' for EAGLE-3: "
            "the target list check was never reached, so accepting the Kimi targets proves nothing"
        )


def eagle3_accepts_any_target(module) -> None:
    """From 0.22.0 upstream dropped the list (vllm-project/vllm#42536): every target is accepted,
    the unknown control included."""
    cls = module.SpeculativeConfig
    verify = _validator(cls, "_verify_args")
    _accepts_kimi_targets(verify, cls)
    try:
        verify(_config(cls, "probe_unknown_arch"))
    except ValueError as exc:
        raise AssertionError(f"this release still refuses EAGLE-3 targets by model_type: {exc}") from None
