"""vLLM, as every part of patcher reads it (see ``patcher.engine_specs``): ``SPEC`` here, its
behaviour beside it: ``launch`` (what it does with a launch at start-up: the variables doctor reads,
as envs.py declares them, which model runner the launch uses, and doctor's checks of it), ``drafter``
(how it reads an EAGLE-3 drafter and its launch flags), ``parser_child`` (its own parser, run in its
interpreter)."""

from __future__ import annotations

import json
from pathlib import Path

from patcher.engine_specs.base import (
    EAGLE31_FAMILY,
    MLA_TARGETS,
    MULTI_LAYER_LLAMA,
    V1,
    V2,
    CpuEnvLine,
    CpuImport,
    DrafterReading,
    EngineSpec,
    LaunchReading,
)
from patcher.engine_specs.vllm import launch
from patcher.engine_specs.vllm.drafter import (
    EAGLE3_FLAGS,
    MLA_CAPTURE_FAMILY,
    SINCE,
    eagle_run,
    flag_check,
    ids_taken,
    mla_model_type,
    no_capture,
    switch_weights,
)

_LOCKS = Path(__file__).parent / "cpu_envs"  # each CPU env line's lock file (maintainer tooling)

SPEC = EngineSpec(
    name="vllm",
    title="vLLM",
    distribution="vllm",
    package="vllm",
    first_covered="0.9.0",
    order=0,
    # vLLM pins transformers<5 up to 0.19 and allows 5.x from 0.20 (requires it from 0.25).
    cpu_env_lines=(CpuEnvLine("0.10.0", "0.19.1", _LOCKS / "vllm-old.txt"),
                   CpuEnvLine("0.20.0", None, _LOCKS / "vllm-new.txt")),
    # numba, llguidance, openai_harmony, gguf, diskcache, xgrammar, mistral_common, fastapi: what
    # vllm.v1.worker.gpu_model_runner imports beyond the locks (eagle3-config-aux-ids probes its
    # aux-layer reader)
    cpu_shims=tuple((shim, None) for shim in ("torch_ops_C", "numba", "llguidance", "openai_harmony", "gguf",
                                            "diskcache", "xgrammar", "mistral_common", "fastapi")),
    # compiled kernels never load beside the CPU torch and are pruned anyway: the published
    # sources from the wheel cache instead of a 340 MB pip install (about 60 s a swap saved)
    cpu_install="sources",
    cpu_imports=(
        CpuImport("vllm.config.speculative", first="0.11.0"),
        CpuImport("vllm.model_executor.models.deepseek_v2"),
        CpuImport("vllm.model_executor.models.kimi_k25", first="0.15.0"),
        CpuImport("vllm.v1.spec_decode.eagle"),
        CpuImport("vllm.model_executor.models.llama_eagle3"),
        # the two runners' aux-layer readers (eagle3-config-aux-ids); v2 has one from 0.17.0
        CpuImport("vllm.v1.worker.gpu_model_runner", first="0.11.1"),
        CpuImport("vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", first="0.17.0"),
        CpuImport("vllm.compilation.collective_fusion", last="0.15.1"),
        CpuImport("vllm.compilation.passes.fusion.allreduce_rms_fusion", first="0.16.0"),
    ),
    # What most probed modules import beyond the shared preloads (measured with -X importtime on
    # vLLM 0.19.1 and 0.33.0 in the CPU envs: patcher/probes/probe_child.py says how).
    probe_preload=(
        "torch.utils.cpp_extension", "transformers.models.auto.tokenization_auto",
        "transformers.models.auto.image_processing_auto", "transformers.models.auto.modeling_auto",
        "transformers.video_processing_utils", "fastapi", "xgrammar", "llguidance", "openai_harmony",
        "prometheus_client", "logging.config", "cachetools", "cbor2", "cpuinfo", "zmq.asyncio", "uvloop",
        "fsspec", "multiprocessing.shared_memory", "cloudpickle", "xxhash", "pybase64", "partial_json_parser",
    ),
    launch=LaunchReading(
        serve_commands=(("vllm", "serve"),),
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
        eagle3_flags=EAGLE3_FLAGS,
        checks=(launch.runner_findings,),
        runner=lambda ctx: launch.launch_runner(ctx).name,
        flag_check=flag_check,
        method_option=("--speculative-config", "method", False),  # SpeculativeConfig.method: a Literal
        eagle_methods=("eagle", "eagle3"),
        parser_child="vllm/parser_child.py",
        # EngineArgs fields; speculative_config holds what --spec-method/--spec-model/--spec-tokens
        # merged into it (create_speculative_config), as the release merges them
        read={"model": "--model", "tensor_parallel_size": "--tensor-parallel-size",
              "pipeline_parallel_size": "--pipeline-parallel-size", "speculative_config": "--speculative-config"},
        alias_prefixes=("--spec-", "--spec_"),
        method_aliases={},  # SpeculativeConfig maps every *_mtp method to "mtp" itself
        eagle_without_drafter_is_mtp=False,
        plain_draft_methods=("draft_model",),
        # MTPModelTypes / SpeculativeMethod: config.py up to 0.10.0, config/__init__.py in 0.10.x
        mtp_declarations=("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py"),
        mtp_model=("vllm/model_executor/models/deepseek_mtp.py", ("DeepseekV3ForCausalLM",)),
        mtp_arch_lists=(),
    ),
    env=launch.RULES,
    # vLLM renames a drafter's "X" to "Eagle3X" unless it starts with Eagle3
    # (transformers_utils/configs/eagle.py); from 0.10.1 "...Eagle3" endings are kept.
    registered_since={"Eagle3LlamaForCausalLM": "0.9.0", "LlamaForCausalLMEagle3": "0.10.1",
                      "Eagle3DeepseekV2ForCausalLM": "0.18.0", "Eagle3DeepseekV3ForCausalLM": "0.18.0",
                      "DeepseekV2ForCausalLM": "0.9.0", "DeepseekV3ForCausalLM": "0.9.0",
                      "KimiK25ForConditionalGeneration": "0.15.0"},
    drafter=DrafterReading(
        since=SINCE,
        # v1 (vllm/v1/worker/gpu_model_runner.py) and, from 0.12.0, v2 (vllm/v1/worker/gpu/)
        model_runners={V1: "VLLM_USE_V2_MODEL_RUNNER=0 selects v1", V2: "VLLM_USE_V2_MODEL_RUNNER=1 selects v2"},
        runners=launch.shipped,
        default_runner=launch.default_runner,
        loader_strict=True,  # load_weights indexes params_dict: a KeyError
        adds_model_prefix=True,  # a drafter's own "model." prefix is doubled, and nothing matches
        ids_keys=("top-level", "eagle_config"),
        mla_model_type=mla_model_type,
        # it looks up EagleLlamaForCausalLMEagle3, which it does not register
        eagle_with_eagle3_drafter=eagle_run,
        multi_layer_since=MULTI_LAYER_LLAMA,
        capture_family=(MLA_CAPTURE_FAMILY, MLA_TARGETS),
        aux_ids_as_published=(),  # ids as given, in eager and graph mode
        aux_ids_family=None,
        rope_parameters_read=None,  # maps either layout onto rope_parameters itself (patch_rope_parameters)
        eagle31_guard=EAGLE31_FAMILY,
        eagle31_facts_family=EAGLE31_FAMILY,  # its manifest's [[drafter_fact]] entries
        eagle31_read_since={},
        # the class vLLM builds for each drafter class the check tells apart; every speculators
        # EAGLE-3 drafter is converted to the Llama class (update_eagle3)
        built_classes={"llama": "Eagle3LlamaForCausalLM", "mla": "Eagle3DeepseekV2ForCausalLM"},
        ids_taken=ids_taken,
        no_capture=no_capture,
        switch_weights=switch_weights,
        loader_child="vllm/loader_child.py",
        loader_argv=lambda target, drafter: [target, "--speculative-config", json.dumps(
            {"method": "eagle3", "model": drafter, "num_speculative_tokens": 3})],
        # what the draft ModelConfig and the loader read beyond the speculative config's model
        loader_options=("--dtype", "--trust-remote-code", "--hf-overrides", "--load-format", "--model-impl"),
        decoder_spellings="vLLM reads both spellings",  # its loaders map midlayer.* onto layers.0.*
    ),
)
