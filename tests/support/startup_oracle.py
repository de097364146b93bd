"""Run in a vLLM release's interpreter by tests/test_startup_grid.py: the truth of each generated
launch, by the release's own start-up configuration called through its Python API.

Reads {"target": ..., "drafter": ...} on stdin. Generates the cases from the release itself: every
method its ``SpeculativeConfig.method`` type names, with and without the drafter, and every field
the config declares given a value of the wrong kind. Each is built as ``EngineArgs(model=...,
tensor_parallel_size=8, speculative_config={...}).create_engine_config()``: not the CLI parser
doctor's child reads the line with. Prints one ``@@startup@@ {json}`` line per case: the
speculative config, and configured (with the method resolved) / refused / unavailable.

Stand-ins, as doctor's child has them (a build host has no GPU): the CPU platform where the
release finds none, the platform's check_and_update_config not run, and Triton present.
"""

import json
import sys
import typing

MARK = "@@startup@@ "


def _names(tp):
    """The strings of a Literal, through Optional/Union and nested Literals."""
    if isinstance(tp, str):
        return [tp]
    return [n for arg in typing.get_args(tp) for n in _names(arg)]


def main():
    req = json.loads(sys.stdin.read())
    from vllm import platforms

    current = platforms.current_platform
    unspecified = getattr(type(current), "is_unspecified", None)
    if unspecified(current) if callable(unspecified) else type(current).__name__ == "UnspecifiedPlatform":
        from vllm.platforms.cpu import CpuPlatform

        platforms.current_platform = CpuPlatform()
    platforms.current_platform.check_and_update_config = lambda *a, **k: None
    from vllm.engine.arg_utils import EngineArgs, SpeculativeConfig

    for name, module in list(sys.modules.items()):  # Triton present, as on the GPU host
        if name.startswith("vllm.") and module is not None and module.__dict__.get("HAS_TRITON") is False:
            module.HAS_TRITON = True

    hints = typing.get_type_hints(SpeculativeConfig)
    methods = sorted(set(_names(hints["method"])))
    base = {"method": "eagle3", "model": req["drafter"], "num_speculative_tokens": 3}
    cases = [{"method": m, "num_speculative_tokens": 3, **({"model": req["drafter"]} if with_draft else {})}
             for m in methods for with_draft in (True, False)]
    cases += [{**base, field: "kimi-not-a-value"} for field in sorted(hints) if field not in base
              and not field.startswith("_")]
    for spec in cases:
        try:
            config = EngineArgs(model=req["target"], tensor_parallel_size=8,
                                speculative_config=dict(spec)).create_engine_config()
            got = {"status": "configured", "method": getattr(config.speculative_config, "method", None)}
        except (ValueError, TypeError) as exc:
            got = {"status": "refused", "error": f"{type(exc).__name__}: {exc}"[:300]}
        except Exception as exc:  # noqa: BLE001 - what this host cannot build
            got = {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(MARK + json.dumps({"spec": spec, **got}), flush=True)
    _runners(req, EngineArgs)


def _runners(req, EngineArgs):
    """The model runner the release picks for an EAGLE-3 launch on the target, for each value of
    VLLM_USE_V2_MODEL_RUNNER (unset, 0, 1): ``use_v2_model_runner`` of the config built through the
    API (Triton taken as present, as on a GPU host), or, before that property, the variable as
    ``vllm.envs`` reads it. (Pipeline parallelism is not built on a CPU host: the registry finds no
    ``SupportsPP`` DeepSeek model there.)"""
    import os

    from vllm import envs

    for value in (None, "0", "1"):
        os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
        if value is not None:
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = value
        try:
            config = EngineArgs(model=req["target"], tensor_parallel_size=4,
                                speculative_config={"method": "eagle3", "model": req["drafter"],
                                                    "num_speculative_tokens": 3}).create_engine_config()
            if isinstance(getattr(type(config), "use_v2_model_runner", None), property):
                v2 = config.use_v2_model_runner
            elif hasattr(envs, "VLLM_USE_V2_MODEL_RUNNER"):
                v2 = envs.VLLM_USE_V2_MODEL_RUNNER
            else:  # neither: the release has one runner, and nothing picks
                v2 = None
            got = {"status": "configured", "runner": None if v2 is None else "v2" if v2 else "v1"}
        except Exception as exc:  # noqa: BLE001 - refused, or what this host cannot build
            got = {"status": "not built", "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(MARK + json.dumps({"runner_env": value, **got}), flush=True)
    os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)


if __name__ == "__main__":
    main()
