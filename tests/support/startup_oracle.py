"""Run in a vLLM release's interpreter by tests/test_startup_grid.py: the truth of each generated
launch, by the release's own start-up configuration called through its Python API.

Reads {"target": ..., "drafter": ...} on stdin. Generates the cases from the release itself: every
method its ``SpeculativeConfig.method`` type names, with and without the drafter, and every field
the config declares given a value of the wrong kind. Each is built as ``EngineArgs(model=...,
tensor_parallel_size=8, speculative_config={...}).create_engine_config()``: not the CLI parser
doctor's child reads the line with. Prints one ``@@startup@@ {json}`` line per case: the
speculative config, and configured (with the method resolved) / refused / unavailable.

Stand-ins, as doctor's child has them (a build host has no GPU): the CPU platform where the
release finds none, and the platform's check_and_update_config not run.
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


if __name__ == "__main__":
    main()
