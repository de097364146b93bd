"""SGLang, as every part of patcher reads it (see ``patcher.engine_specs``)."""

from __future__ import annotations

from patcher.engine_specs.spec import CpuEnvLine, EngineSpec, Launch

SPEC = EngineSpec(
    name="sglang",
    first_covered="0.5.1",
    # SGLang pins transformers 5 from 0.5.10.
    cpu_env_lines=(CpuEnvLine("0.5.1", "0.5.9", "sglang-old"), CpuEnvLine("0.5.10", None, "sglang-new")),
    cpu_shims=(
        ("torchvision", None),
        ("sgl_kernel", "0.5.11"),  # 0.5.10.x still imports sgl_kernel unguarded (deepseek_v2 probes)
        ("vllm", "0.5.8"),
        ("torch_cpu_amx", "0.5.3"),
    ),
    launch=Launch(
        modules=("sglang.launch_server",),
        cli_module=None,  # `sglang serve` is its own console script (from 0.5.5)
        serve_takes_model=False,
        # plain argparse: only its own spellings (and unique prefixes: --tp for --tp-size)
        dashes_or_underscores=False,
        spellings={
            "model": ("--model-path", "--model"),
            "tp": ("--tensor-parallel-size", "--tp-size", "--tp"),
            "pp": ("--pipeline-parallel-size", "--pp-size"),
            "draft": ("--speculative-draft-model-path", "--speculative-draft-model"),
            "algorithm": ("--speculative-algorithm",),
        },
        eagle3_flags="--speculative-algorithm EAGLE3",
    ),
    env_declarations=("sglang/srt/environ.py", "environ"),
    # SGLang resolves a class by its __name__ (EntryClass).
    registered_since={"LlamaForCausalLMEagle3": "0.5.1", "Eagle3DeepseekV2ForCausalLM": "0.5.12",
                      "DeepseekV2ForCausalLM": "0.5.1", "DeepseekV3ForCausalLM": "0.5.1",
                      "KimiK25ForConditionalGeneration": "0.5.9"},
)
