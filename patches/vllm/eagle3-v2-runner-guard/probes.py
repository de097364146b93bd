"""Probes for vllm/eagle3-v2-runner-guard. check(module) raises AssertionError.

`module` is vllm.v1.worker.gpu.spec_decode, whose init_speculator the V2 model runner
(VLLM_USE_V2_MODEL_RUNNER=1) calls in its __init__, before the model is loaded. The probe
drives that real function with stand-in configs: EAGLE-3 must be refused with a message naming
the variable and the release whose V2 runner captures aux hidden states; EAGLE-1 must still
reach the runner's EagleSpeculator (a recording stand-in here: the real one needs a GPU).
"""

from __future__ import annotations

import os
import sys
import types
from types import SimpleNamespace

ENV = "VLLM_USE_V2_MODEL_RUNNER"
FIRST_V2_EAGLE3 = "0.17.0"
SPECULATOR_MODULE = "vllm.v1.worker.gpu.spec_decode.eagle"


class _RecordingSpeculator:
    built: list = []

    def __init__(self, vllm_config, device) -> None:
        _RecordingSpeculator.built.append(vllm_config.speculative_config.method)


def _spec_config(method: str):
    return SimpleNamespace(method=method, use_eagle=lambda: method in ("eagle", "eagle3", "mtp"))


def _call(module, method: str):
    """init_speculator(vllm_config, device) as the V2 runner calls it; returns the exception or None."""
    saved_env = os.environ.get(ENV)
    saved_mod = sys.modules.get(SPECULATOR_MODULE)
    stand_in = types.ModuleType(SPECULATOR_MODULE)
    stand_in.EagleSpeculator = _RecordingSpeculator
    os.environ[ENV] = "1"
    sys.modules[SPECULATOR_MODULE] = stand_in
    try:
        module.init_speculator(SimpleNamespace(speculative_config=_spec_config(method)), "cpu")
    except Exception as exc:  # the outcome under test
        return exc
    finally:
        if saved_env is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = saved_env
        if saved_mod is None:
            sys.modules.pop(SPECULATOR_MODULE, None)
        else:
            sys.modules[SPECULATOR_MODULE] = saved_mod
    return None


def v2_runner_refuses_eagle3(module) -> None:
    _RecordingSpeculator.built.clear()
    exc = _call(module, "eagle3")
    assert exc is not None, (
        f"init_speculator accepted method 'eagle3' with {ENV}=1: this runner never captures aux "
        f"hidden states, so EAGLE-3 runs as EAGLE-1 with nothing said (built: {_RecordingSpeculator.built})"
    )
    text = str(exc)
    assert isinstance(exc, NotImplementedError), f"wanted NotImplementedError, got {type(exc).__name__}: {text}"
    assert ENV in text and FIRST_V2_EAGLE3 in text and "EAGLE-3" in text, (
        f"the refusal must name {ENV} and vLLM {FIRST_V2_EAGLE3}: {text!r}"
    )
    assert _RecordingSpeculator.built == [], "the speculator was built before the refusal"
    exc = _call(module, "eagle")
    assert exc is None, f"EAGLE-1 on the V2 runner must still start: {type(exc).__name__}: {exc}"
    built = _RecordingSpeculator.built
    assert built == ["eagle"], f"EagleSpeculator not built for EAGLE-1: {built}"
