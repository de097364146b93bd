"""vLLM, as every part of patcher reads it (see ``patcher.engine_specs``)."""

from __future__ import annotations

from patcher.engine_specs.description import (
    CONFIG_AUX_IDS_FAMILY,
    EAGLE31_FAMILY,
    MLA_CAPTURE_FAMILY,
    MLA_TARGETS,
    MULTI_LAYER_LLAMA,
    SKIPS_INPUT_NORM,
    SPECULATORS_CONFIG,
    V1,
    V1_EAGLE_CONFIG_IDS,
    V2,
    V2_AUX,
    V2_EAGLE_LAYER_IDS,
    V2_RUNNER,
    Ask,
    CpuEnvLine,
    CpuImport,
    DrafterReading,
    EngineSpec,
    IdsTaken,
    Launch,
    NoCapture,
)

# The first release with each behaviour the drafter checks ask about.
SINCE = {SPECULATORS_CONFIG: "0.10.1.1", MULTI_LAYER_LLAMA: "0.11.1", V2_RUNNER: "0.12.0", V2_AUX: "0.17.0",
         V1_EAGLE_CONFIG_IDS: "0.22.0", V2_EAGLE_LAYER_IDS: "0.27.0", SKIPS_INPUT_NORM: "0.18.0"}


def ids_taken(ask: Ask, runner: str, top: list[int] | None, in_eagle: list[int] | None,
              layer_ids: list[int] | None) -> IdsTaken:
    """Which key wins, in order: the top level (both runners, every release), then eagle_config's
    eagle_aux_hidden_state_layer_ids (v1 from 0.22.0, or patched), then, on the v2 runner from
    0.27.0 only, eagle_config's layer_ids."""
    if top is not None:
        return IdsTaken(top, "top-level")
    if in_eagle is None:
        if layer_ids is not None and runner == V2 and ask.since(V2_EAGLE_LAYER_IDS):
            return IdsTaken(layer_ids, "eagle_config.layer_ids")
        if layer_ids is not None:
            where = ("the v1 runner never reads eagle_config.layer_ids" if runner == V1 else
                     f"the v2 runner reads eagle_config.layer_ids only from {SINCE[V2_EAGLE_LAYER_IDS]}")
            return IdsTaken(None, "default", where)
        return IdsTaken(None, "default")
    if ask.fixed(CONFIG_AUX_IDS_FAMILY):
        return IdsTaken(in_eagle, "eagle_config")
    if runner == V1 and ask.since(V1_EAGLE_CONFIG_IDS):
        return IdsTaken(in_eagle, "eagle_config")
    why = ("the v2 runner reads no ids from eagle_config" if runner == V2 else
           f"the v1 runner reads eagle_config ids only from {SINCE[V1_EAGLE_CONFIG_IDS]}")
    return IdsTaken(None, "default", why)


def no_capture(ask: Ask, runner: str, target_arch: str | None) -> NoCapture | None:
    if target_arch in MLA_TARGETS and ask.fixed(MLA_CAPTURE_FAMILY) is False:
        return NoCapture(f"its DeepSeek/Kimi model has no EAGLE-3 aux capture "
                         f"(vllm/{MLA_CAPTURE_FAMILY} is {ask.state(MLA_CAPTURE_FAMILY)})")
    if runner == V2 and ask.since(V2_AUX) is False:
        return NoCapture(f"the v2 runner has no EAGLE-3 aux path before {SINCE[V2_AUX]}")
    return None


def switch_weights(ask: Ask, switch: str, drafter_class: str, prefix: str) -> tuple[str, str]:
    # The Llama drafter loader skips `input_norm.*` without a word when norm_before_fc is off
    # (skip_substrs); every other tensor without a parameter stops its AutoWeightsLoader.
    if switch == "norm_before_fc" and drafter_class == "llama" and ask.since(SKIPS_INPUT_NORM):
        return "dropped", f"the loader skips {prefix}* without a message"
    return "refused", f"the loader has no parameter for {prefix}* and stops"


SPEC = EngineSpec(
    name="vllm",
    title="vLLM",
    distribution="vllm",
    package="vllm",
    first_covered="0.9.0",
    order=0,
    # vLLM pins transformers<5 up to 0.19 and allows 5.x from 0.20 (requires it from 0.25).
    cpu_env_lines=(CpuEnvLine("0.10.0", "0.19.1", "vllm-old"), CpuEnvLine("0.20.0", None, "vllm-new")),
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
    launch=Launch(
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
        eagle3_flags="""--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'""",
        checks=("model-runner",),
        method_option=("--speculative-config", "method", False),  # SpeculativeConfig.method: a Literal
        eagle_methods=("eagle", "eagle3"),
        parser_child="vllm_parser_child.py",
        # EngineArgs fields; speculative_config holds what --spec-method/--spec-model/--spec-tokens
        # merged into it (create_speculative_config), as the release merges them
        read={"model": "--model", "tensor_parallel_size": "--tensor-parallel-size",
              "pipeline_parallel_size": "--pipeline-parallel-size", "speculative_config": "--speculative-config"},
        alias_prefixes=("--spec-", "--spec_"),
        method_aliases={},  # SpeculativeConfig maps every *_mtp method to "mtp" itself
        eagle_without_drafter_is_mtp=False,
        # MTPModelTypes / SpeculativeMethod: config.py up to 0.10.0, config/__init__.py in 0.10.x
        mtp_declarations=("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py"),
        mtp_model=("vllm/model_executor/models/deepseek_mtp.py", ("DeepseekV3ForCausalLM",)),
        mtp_arch_lists=(),
    ),
    env_declarations=("vllm/envs.py", "getenv"),
    env_vars=("VLLM_USE_V2_MODEL_RUNNER", "VLLM_ALLREDUCE_USE_FLASHINFER"),
    # vLLM renames a drafter's "X" to "Eagle3X" unless it starts with Eagle3
    # (transformers_utils/configs/eagle.py); from 0.10.1 "...Eagle3" endings are kept.
    registered_since={"Eagle3LlamaForCausalLM": "0.9.0", "LlamaForCausalLMEagle3": "0.10.1",
                      "Eagle3DeepseekV2ForCausalLM": "0.18.0", "Eagle3DeepseekV3ForCausalLM": "0.18.0",
                      "DeepseekV2ForCausalLM": "0.9.0", "DeepseekV3ForCausalLM": "0.9.0",
                      "KimiK25ForConditionalGeneration": "0.15.0"},
    drafter=DrafterReading(
        since=SINCE,
        # v1 (vllm/v1/worker/gpu_model_runner.py) and, from 0.12.0, v2 (vllm/v1/worker/gpu/)
        model_runners=(V1, V2),
        loader_strict=True,  # load_weights indexes params_dict: a KeyError
        adds_model_prefix=True,  # a drafter's own "model." prefix is doubled, and nothing matches
        ids_keys=("top-level", "eagle_config"),
        mla_by_model_type=True,
        # it looks up EagleLlamaForCausalLMEagle3, which it does not register
        eagle_with_eagle3_drafter="stops-at-start-up",
        fc_guard=None,  # that launch never reaches a forward
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
    ),
)
