"""How vLLM reads an EAGLE-3 drafter: which ids its runners take, where its targets capture nothing,
what its loaders do with EAGLE 3.1 weights, which model types run an MLA drafter as MLA, and what its
launch flags and ``"method": "eagle"`` do with one (``DrafterReading`` and ``LaunchReading.flag_check``).
tests/test_drafter_release.py proves each rule against the published wheels.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from patcher.engine_specs.base import (
    CONFIG_AUX_IDS_FAMILY,
    MLA_TARGETS,
    MULTI_LAYER_LLAMA,
    SKIPS_INPUT_NORM,
    SPECULATORS,
    SPECULATORS_CONFIG,
    V1,
    V2,
    V2_AUX,
    V2_EAGLE_LAYER_IDS,
    Ask,
    IdsTaken,
    NoCapture,
    compares_to,
    other_draft_path,
    parse_file,
    same_path,
)
from patcher.findings import Finding, hint, ok, problem, unknown

MLA_CAPTURE_FAMILY = "mla-aux-capture"  # DeepSeek/Kimi targets capture aux states (upstream 0.18.0)
V2_RUNNER = "has the v2 model runner"  # vllm/v1/worker/gpu/, VLLM_USE_V2_MODEL_RUNNER=1
V1_EAGLE_CONFIG_IDS = "v1 reads eagle_config ids"
EAGLE3_FLAGS = """--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'"""
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


# --- an MLA drafter: run as MLA by model type ---------------------------------------------------

ARCH_CONVERTOR_FILE = "vllm/transformers_utils/model_arch_config_convertor.py"
# What every release with the MLA EAGLE-3 drafter (0.18.0-0.34.0) lists, where no install can be read
# (tests/test_drafter_release.py reads each cached wheel). Not kimi_k2: vLLM maps it to DeepseekV3Config
# (transformers_utils/config.py), yet the EAGLE branch does not name it.
EAGLE_MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp"})


def eagle_mla_model_types(site: Path | None) -> frozenset[str] | None:
    """The drafter ``model_type`` values for which the release runs an EAGLE drafter as MLA: the
    tuple in ``is_deepseek_mla``'s ``hf_text_config.model_type == "eagle"`` branch (vLLM wraps every
    HF-format EAGLE-3 drafter config in EAGLEConfig, model_type "eagle"), read from the syntax tree.
    Another model_type builds Eagle3DeepseekV2ForCausalLM with is_deepseek_mla False: the draft's
    KV cache and attention backend are chosen for standard attention. None: no files to read."""
    tree = parse_file(site / ARCH_CONVERTOR_FILE) if site is not None else None
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)) if tree is not None else ():
        if fn.name != "is_deepseek_mla":
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.If) and compares_to(node.test, "eagle", ast.Eq):
                tuples = [t for stmt in node.body for t in ast.walk(stmt) if isinstance(t, ast.Tuple)]
                if tuples:
                    return frozenset(c.value for c in tuples[0].elts
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return None


def mla_model_type(d: Any, release: Ask, archs: str) -> Finding:
    """Issue 32, case 5: vLLM builds the MLA drafter class by its architecture, but runs it as MLA
    only for the model types its EAGLE branch of is_deepseek_mla names (eagle_mla_model_types,
    read from the install's files; the wheel-proven list where there is no install)."""
    types = eagle_mla_model_types(release.site) if release.site is not None else EAGLE_MLA_MODEL_TYPES
    where = f"{release.label()}'s is_deepseek_mla ({ARCH_CONVERTOR_FILE})"
    if types is None:
        return unknown("config.format", f"architectures {archs}: whether {release.label()} runs this drafter as MLA "
                       f"could not be read ({ARCH_CONVERTOR_FILE} has no EAGLE branch we know)",
                       hint='"model_type": "deepseek_v3" is what every release 0.18.0-0.34.0 runs as MLA')
    if d.model_type in types:
        return ok("config.format", f"architectures {archs} with model_type {d.model_type}: registered by "
                  f"{release.label()}, and run as MLA ({where} names {d.model_type})")
    listed = ", ".join(sorted(types))
    if d.model_type == "kimi_k25":
        return problem("config.format", f"architectures {archs} with model_type kimi_k25: {release.label()} reads "
                       "it as Kimi-K2.5's multimodal config, which its EAGLE config wrapper cannot take: start-up "
                       "stops building the draft config (tried on vLLM 0.18.1, 0.22.1, 0.26.0, 0.33.0, 0.34.0)",
                       wanted=f"model_type one of {listed}", found="kimi_k25",
                       hint='set "model_type": "deepseek_v3" in config.json, with the DeepSeek-V3 text fields')
    if d.model_type == "kimi_k2":
        todo = ('set "model_type": "deepseek_v3" in config.json: vLLM reads kimi_k2 into the same DeepseekV3Config '
                "(transformers_utils/config.py), so nothing else changes")
    else:
        todo = 'set "model_type": "deepseek_v3" in config.json, with DeepSeek-V3 fields'
    return problem("config.format", f"architectures {archs} with model_type {d.model_type}: {release.label()} builds "
                   f"the MLA drafter class but does not run it as MLA ({where} names only {listed} for an EAGLE "
                   "drafter): the draft's KV cache and attention backend are chosen for standard attention",
                   wanted=f"model_type one of {listed}", found=str(d.model_type), hint=todo)


# --- the launch line ---------------------------------------------------------------------------

def flag_check(values: dict[str, list[str]], drafter: Path, speculators_config: bool) -> list[Finding]:
    """The drafter check's --flags on a vLLM line: the method --speculative-config names, and its model."""
    want = EAGLE3_FLAGS
    out: list[Finding] = []
    if values["--speculative-algorithm"]:
        out.append(problem("flags.engine", "--speculative-algorithm is an SGLang flag; vLLM does not take it",
                           wanted=want, found="--speculative-algorithm"))
    configs = values["--speculative-config"]
    if not configs:
        out.append(problem("flags.algorithm", "no --speculative-config: vLLM will not use the drafter",
                           wanted=want, found="(absent)"))
        return out
    try:
        spec = json.loads(configs[-1])
    except ValueError as exc:
        out.append(problem("flags.speculative_config", "--speculative-config is not valid JSON; vLLM will not start",
                           wanted=want, found=f"{configs[-1][:80]} ({exc})"))
        return out
    if not isinstance(spec, dict):
        out.append(problem("flags.speculative_config", "--speculative-config is not a JSON object",
                           wanted=want, found=configs[-1][:80]))
        return out
    method = spec.get("method")
    if method == "eagle3":
        out.append(ok("flags.algorithm", '"method": "eagle3" matches the EAGLE-3 drafter'))
    elif method is None and speculators_config:
        out.append(hint("flags.algorithm", "no \"method\": vLLM takes it from the speculators config; "
                        "stating it keeps the launch line independent of the config format",
                        wanted='"method": "eagle3"'))
    elif method is None:
        out.append(problem("flags.algorithm", "no \"method\" in --speculative-config: vLLM guesses it from the "
                           "drafter's folder name",
                           wanted='"method": "eagle3"', found=configs[-1][:80]))
    elif method == "eagle":
        out.append(problem(
            "flags.algorithm",
            '"method": "eagle" runs this EAGLE-3 drafter as EAGLE-1: no aux hidden states reach fc',
            wanted='"method": "eagle3"', found=f'"method": "{method}"'))
    else:
        out.append(problem("flags.algorithm", f'"method": "{method}" does not run an EAGLE-3 drafter',
                           wanted='"method": "eagle3"', found=f'"method": "{method}"'))
    model = spec.get("model")
    if isinstance(model, str) and not same_path(model, drafter):
        out.append(other_draft_path('"model" in --speculative-config', model, drafter))
    return out


def eagle_run(findings: list[Finding], release: Ask, drafter: Any) -> list[Finding]:
    """vLLM with "method": "eagle" and an EAGLE-3 drafter (issue 32, case 1 on vLLM). An HF-format config
    is wrapped in EAGLEConfig, which prefixes "Eagle" to its architecture: EagleLlamaForCausalLMEagle3,
    which no release registers (tests/test_drafter_release.py, on real imports), so the server stops at
    start-up and nothing is captured. A speculators config keeps its class under method eagle; what the
    release captures then is not read here: unknown, not the eagle3 capture line."""
    out, said = [], False
    for f in findings:
        if f.code == "flags.algorithm" and drafter.format != SPECULATORS:
            archs = [a if a.startswith("Eagle") else f"Eagle{a}" for a in drafter.architectures]
            out.append(problem("flags.algorithm", f'"method": "eagle" makes {release.label()} look the drafter up as '
                               f"{', '.join(archs)} (its EAGLEConfig prefixes \"Eagle\"), which it does not "
                               "register: the server stops at start-up", wanted='"method": "eagle3"',
                               found='"method": "eagle"', hint='"method": "eagle3"'))
        elif f.code == "config.format" and f.level == "ok" and drafter.format != SPECULATORS:
            out.append(hint("config.format", f"{f.message}, the name it runs under \"method\": \"eagle3\"; this "
                            "command looks up another (flags.algorithm)"))
        elif not f.code.startswith("aux.capture"):
            out.append(f)
        elif not said:
            said = True
            if drafter.format == SPECULATORS:
                out.append(unknown("aux.capture", f'what {release.label()} captures under "method": "eagle" is not '
                                   "read here (its capture lines are for eagle3)", hint='"method": "eagle3"'))
            else:
                out.append(problem("aux.capture", "nothing is captured: the server stops at start-up "
                                   "(flags.algorithm)", hint='"method": "eagle3"'))
    return out
