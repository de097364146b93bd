"""vLLM, as every part of patcher reads it (see ``patcher.engine_specs``)."""

from __future__ import annotations

from patcher.engine_specs.spec import CpuEnvLine, EngineSpec, Launch

SPEC = EngineSpec(
    name="vllm",
    first_covered="0.9.0",
    # vLLM pins transformers<5 up to 0.19 and allows 5.x from 0.20 (requires it from 0.25).
    cpu_env_lines=(CpuEnvLine("0.10.0", "0.19.1", "vllm-old"), CpuEnvLine("0.20.0", None, "vllm-new")),
    # numba, llguidance, openai_harmony, gguf, diskcache, xgrammar, mistral_common, fastapi: what
    # vllm.v1.worker.gpu_model_runner imports beyond the locks (eagle3-config-aux-ids probes its
    # aux-layer reader)
    cpu_shims=tuple((shim, None) for shim in ("torch_ops_C", "numba", "llguidance", "openai_harmony", "gguf",
                                            "diskcache", "xgrammar", "mistral_common", "fastapi")),
    launch=Launch(
        modules=("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
        cli_module="vllm.entrypoints.cli.main",
        serve_takes_model=True,
        dashes_or_underscores=True,
        spellings={
            "model": ("--model",),
            "tp": ("--tensor-parallel-size", "-tp"),
            "pp": ("--pipeline-parallel-size", "-pp"),
            "speculative_config": ("--speculative-config",),
        },
        eagle3_flags="""--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'""",
    ),
    env_declarations=("vllm/envs.py", "getenv"),
    # vLLM renames a drafter's "X" to "Eagle3X" unless it starts with Eagle3
    # (transformers_utils/configs/eagle.py); from 0.10.1 "...Eagle3" endings are kept.
    registered_since={"Eagle3LlamaForCausalLM": "0.9.0", "LlamaForCausalLMEagle3": "0.10.1",
                      "Eagle3DeepseekV2ForCausalLM": "0.18.0", "Eagle3DeepseekV3ForCausalLM": "0.18.0",
                      "DeepseekV2ForCausalLM": "0.9.0", "DeepseekV3ForCausalLM": "0.9.0",
                      "KimiK25ForConditionalGeneration": "0.15.0"},
)
