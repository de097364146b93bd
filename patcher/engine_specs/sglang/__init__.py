"""SGLang, as every part of patcher reads it (see ``patcher.engine_specs``): ``SPEC`` here, its
behaviour beside it: ``launch`` (what it does with a launch: the variables doctor reads, as
environ.py declares them, the allreduce fusion and two-batch overlap with EAGLE-3, and doctor's
checks of them), ``drafter`` (how it reads an EAGLE-3 drafter and its launch flags),
``parser_child`` (its own parser, run in its interpreter)."""

from __future__ import annotations

from pathlib import Path

from patcher.engine_specs.base import (
    AUX_IDS_FAMILY,
    K25_TARGET,
    MAPS_LAYERS0,
    CpuEnvLine,
    CpuImport,
    DrafterReading,
    EngineSpec,
    LaunchReading,
    one_runner,
    one_runner_default,
)
from patcher.engine_specs.sglang import launch
from patcher.engine_specs.sglang.drafter import (
    EAGLE3_FLAGS,
    K25_CAPTURE_FAMILY,
    SGLANG_GUARDS_FAMILY,
    eagle_run,
    flag_check,
    ids_taken,
    no_capture,
    switch_weights,
)

_LOCKS = Path(__file__).parent / "cpu_envs"  # each CPU env line's lock file (maintainer tooling)

SPEC = EngineSpec(
    name="sglang",
    title="SGLang",
    distribution="sglang",
    package="sglang",
    first_covered="0.5.1",
    order=1,
    # SGLang pins transformers 5 from 0.5.10.
    cpu_env_lines=(CpuEnvLine("0.5.1", "0.5.9", _LOCKS / "sglang-old.txt"),
                   CpuEnvLine("0.5.10", None, _LOCKS / "sglang-new.txt")),
    cpu_shims=(
        ("torchvision", None),
        ("sgl_kernel", "0.5.11"),  # 0.5.10.x still imports sgl_kernel unguarded (deepseek_v2 probes)
        ("vllm", "0.5.8"),
        ("torch_cpu_amx", "0.5.3"),
    ),
    cpu_install="pip",
    cpu_imports=(
        # 0.5.4.x has a real circular import (linear -> quantization -> auto_round
        # -> linear) when llama_eagle3 is the first sglang model module imported;
        # the engine itself always has quantization imported by then.
        CpuImport("sglang.srt.models.llama_eagle3", prelude=("sglang.srt.layers.quantization",), last="0.5.4.post3"),
        CpuImport("sglang.srt.models.llama_eagle3", first="0.5.5"),
        CpuImport("sglang.srt.models.deepseek_v2"),
        CpuImport("sglang.srt.models.kimi_k25", first="0.5.9"),
        CpuImport("sglang.srt.layers.communicator", last="0.5.20"),
        CpuImport("sglang.srt.layers.layer_boundary.residual.add_norm", first="0.5.21"),
        CpuImport("sglang.srt.layers.flashinfer_comm_fusion", first="0.5.14"),
    ),
    # What most probed modules import beyond the shared preloads (measured with -X importtime on
    # SGLang 0.5.9 and 0.5.23 in the CPU envs: patcher/probes/probe_child.py says how).
    probe_preload=(
        "transformers.modeling_layers", "transformers.processing_utils", "transformers.video_processing_utils",
        "transformers.models.auto.tokenization_auto", "transformers.models.auto.image_processing_auto",
        "torch._dynamo.repro.after_dynamo", "torch._inductor.compiler_bisector", "xgrammar", "tvm_ffi",
        "IPython.display", "starlette.routing", "fsspec", "pybase64", "orjson", "partial_json_parser",
    ),
    launch=LaunchReading(
        serve_commands=(("sglang", "serve"),),  # its own console script's subcommand (from 0.5.5)
        modules=("sglang.launch_server",),
        cli_module=None,
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
        eagle3_flags=EAGLE3_FLAGS,
        checks=(launch.fusion_findings, launch.two_batch_overlap_findings),
        flag_check=flag_check,
        method_option=("--speculative-algorithm", None, True),  # SpeculativeAlgorithm.from_string upper-cases
        eagle_methods=("EAGLE", "EAGLE3"),
        parser_child="sglang/parser_child.py",
        # ServerArgs fields, as prepare_server_args parses them
        read={"model_path": "--model-path", "tp_size": "--tp-size", "pp_size": "--pp-size",
              "speculative_algorithm": "--speculative-algorithm",
              "speculative_draft_model_path": "--speculative-draft-model-path",
              "enable_flashinfer_allreduce_fusion": "--enable-flashinfer-allreduce-fusion",
              "enforce_disable_flashinfer_allreduce_fusion": "--enforce-disable-flashinfer-allreduce-fusion",
              "enable_two_batch_overlap": "--enable-two-batch-overlap", "enable_dp_attention": "--enable-dp-attention"},
        alias_prefixes=(),
        # ServerArgs._handle_speculative_decoding: NEXTN becomes EAGLE, and EAGLE without a draft model
        # on a DeepSeek-V3 target takes the target itself (its NextN layer) as the draft
        method_aliases={"NEXTN": "EAGLE"},
        eagle_without_drafter_is_mtp=True,
        plain_draft_methods=("STANDALONE",),
        mtp_declarations=(),
        mtp_model=None,
        mtp_arch_lists=("sglang/srt/server_args.py", "sglang/srt/arg_groups"),  # arg_groups/ from 0.5.20
    ),
    env=launch.RULES,
    # SGLang resolves a class by its __name__ (EntryClass).
    registered_since={"LlamaForCausalLMEagle3": "0.5.1", "Eagle3DeepseekV2ForCausalLM": "0.5.12",
                      "DeepseekV2ForCausalLM": "0.5.1", "DeepseekV3ForCausalLM": "0.5.1",
                      "KimiK25ForConditionalGeneration": "0.5.9"},
    drafter=DrafterReading(
        since={MAPS_LAYERS0: "0.5.12"},
        model_runners={},
        runners=one_runner,
        default_runner=one_runner_default,
        loader_strict=False,  # skips a tensor it has no parameter for, unless our eagle3-drafter-keys is applied
        adds_model_prefix=False,
        ids_keys=("eagle_config",),
        mla_model_type=None,  # an MLA drafter runs as MLA by its architecture
        # no aux capture, fc never applied, d2t never read, the target's lm_head; with our
        # eagle3-loud-fc-skip applied, it stops at its first request instead
        eagle_with_eagle3_drafter=eagle_run,
        multi_layer_since=MAPS_LAYERS0,
        capture_family=(K25_CAPTURE_FAMILY, (K25_TARGET,)),
        # DeepSeek/Kimi capture as published, before our aux-ids family: whether building the CUDA
        # graphs (CudaGraphRunner.__init__, from 0.5.6 also ModelRunner._dummy_run) re-calls
        # set_eagle3_layers_to_capture() with no ids (the graphs are captured with the default, and
        # the drafter's ids are set only afterwards, for eager passes), and which explicit ids get +1.
        aux_ids_as_published=((">=0.5.4.post2,<0.5.11", True, "all"), (">=0.5.11,<0.5.13", False, "all"),
                              (">=0.5.13", False, "first-is-1")),
        aux_ids_family=AUX_IDS_FAMILY,
        # builds the drafter's LlamaConfig with its pinned transformers: 5 (which reads rope_parameters)
        # from 0.5.10, and 5.0.0rc0 in 0.5.6.post1 alone
        rope_parameters_read=("==0.5.6.post1", ">=0.5.10"),
        eagle31_guard=SGLANG_GUARDS_FAMILY,
        eagle31_facts_family=None,
        # the first release whose drafter class (llama_eagle3.py / kimi_k25_eagle3.py) reads each
        # switch; a switch missing from a class's table is read by no release
        eagle31_read_since={"llama": {"fc_norm": "0.5.12", "norm_output": "0.5.12", "norm_before_fc": "0.5.17"},
                            "mla": {"fc_norm": "0.5.13", "norm_output": "0.5.13"}},
        built_classes={},
        ids_taken=ids_taken,
        no_capture=no_capture,
        switch_weights=switch_weights,
        loader_child="sglang/loader_child.py",
        loader_argv=lambda target, drafter: ["--model-path", target, "--speculative-algorithm", "EAGLE3",
                                             "--speculative-draft-model-path", drafter],
        # what ModelConfig.from_server_args(..., is_draft_model=True) reads beyond the paths
        loader_options=("--dtype", "--trust-remote-code", "--speculative-draft-model-quantization",
                        "--speculative-draft-model-revision", "--json-model-override-args", "--model-impl",
                        "--context-length"),
        # legacy_name_map from 0.5.12 (MAPS_LAYERS0); before it, layers.0.* has no parameter
        decoder_spellings="SGLang <= 0.5.11 reads only midlayer.* and skips layers.0.* without a message",
    ),
)
