"""How SGLang reads an EAGLE-3 drafter: the ids its model runner takes, where the Kimi-K2.5 wrapper
captures nothing, what its loader does with EAGLE 3.1 weights, and what its launch flags and
``--speculative-algorithm EAGLE`` do with one (``DrafterReading`` and ``LaunchReading.flag_check``).
tests/test_drafter_release.py proves each rule against the published wheels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patcher.engine_specs.base import (
    K25_TARGET,
    KEYS_FAMILY,
    Ask,
    IdsTaken,
    NoCapture,
    other_draft_path,
    same_path,
)
from patcher.findings import Finding, hint, ok, problem

K25_CAPTURE_FAMILY = "k25-aux-capture"  # the Kimi-K2.5 wrapper forwards the EAGLE-3 hooks
SGLANG_GUARDS_FAMILY = "eagle3-drafter-guards"  # switches and a missing d2t refused at load
LOUD_FC_FAMILY = "eagle3-loud-fc-skip"  # an fc handed fewer features than it takes raises
EAGLE3_FLAGS = "--speculative-algorithm EAGLE3"


def ids_taken(ask: Ask, runner: str, top: list[int] | None, in_eagle: list[int] | None,
              layer_ids: list[int] | None) -> IdsTaken:
    """eagle_config's eagle_aux_hidden_state_layer_ids alone (ModelRunner.initialize); layer_ids
    and the top-level key are never read."""
    if in_eagle is not None:
        return IdsTaken(in_eagle, "eagle_config")
    why = ("SGLang reads ids only from eagle_config's eagle_aux_hidden_state_layer_ids"
           if top is not None or layer_ids is not None else "")
    return IdsTaken(None, "default", why)


def no_capture(ask: Ask, runner: str, target_arch: str | None) -> NoCapture | None:
    if target_arch == K25_TARGET and ask.fixed(K25_CAPTURE_FAMILY) is False:
        # The model runner calls set_eagle3_layers_to_capture on the target for EAGLE3, unguarded, and
        # the wrapper has none (tests/test_drafter_release.py reads both on the releases concerned).
        return NoCapture(f"the Kimi-K2.5 wrapper has no set_eagle3_layers_to_capture, which the model "
                         f"runner calls for EAGLE3 (sglang/{K25_CAPTURE_FAMILY} is {ask.state(K25_CAPTURE_FAMILY)})",
                         stops="AttributeError")
    return None


def switch_weights(ask: Ask, switch: str, drafter_class: str, prefix: str) -> tuple[str, str]:
    # load_weights has `if name in params_dict:` and no else in every release; our
    # eagle3-drafter-keys variant adds the raise.
    if ask.applied(KEYS_FAMILY):
        return "refused", f"our {KEYS_FAMILY} raises on {prefix}* at load"
    return "dropped", f"the loader skips {prefix}* without a message"


# Read from every covered release (tests/test_drafter_release.py proves each on the wheels): the aux
# capture is set up only when spec_algorithm.is_eagle3() (model_executor); the worker takes the hot-token
# map only from --speculative-token-map (load_token_map) and shares the target's embed and head with the
# draft model (set_embed_and_head(embed, head)); the drafter's width check applies fc only when the
# hidden state is wider than the embeddings, and one layer of target features is not.
EAGLE_ALGORITHM = {
    "aux.capture": "the target captures no aux hidden states: {release} sets the capture up only for EAGLE3",
    "fc.shape": "fc is never applied: the drafter's width check sees one layer of target features, not three",
    "vocab.d2t": "d2t loads and is never read: with EAGLE the hot-token map comes only from --speculative-token-map",
    "vocab.lm_head": "the trained lm_head is replaced by the target's, the logits still cut to the draft "
                     "vocabulary size",
}


def flag_check(values: dict[str, list[str]], drafter: Path, speculators_config: bool) -> list[Finding]:
    """The drafter check's --flags on an SGLang line: --speculative-algorithm, and the draft path."""
    want = EAGLE3_FLAGS
    out: list[Finding] = []
    if values["--speculative-config"]:
        out.append(problem("flags.engine", "--speculative-config is a vLLM flag; SGLang does not take it",
                           wanted=want, found="--speculative-config"))
    algos = values["--speculative-algorithm"]
    if not algos:
        out.append(problem("flags.algorithm", "no --speculative-algorithm: SGLang will not use the drafter",
                           wanted=want, found="(absent)"))
    elif algos[-1].upper() == "EAGLE3":
        out.append(ok("flags.algorithm", "--speculative-algorithm EAGLE3 matches the EAGLE-3 drafter"))
    elif algos[-1].upper() == "EAGLE":
        out.append(problem(
            "flags.algorithm",
            "--speculative-algorithm EAGLE runs this EAGLE-3 drafter without its aux features: the server "
            "starts (warning only about DeepSeek MTP), the target captures nothing, fc is never applied, d2t is "
            "never read and the drafter's lm_head is the target's",
            wanted=want, found=f"--speculative-algorithm {algos[-1]}"))
    else:
        out.append(problem("flags.algorithm", f"--speculative-algorithm {algos[-1]} does not run an EAGLE-3 drafter",
                           wanted=want, found=f"--speculative-algorithm {algos[-1]}"))
    paths = values["--speculative-draft-model-path"]
    if paths and not same_path(paths[-1], drafter):
        out.append(other_draft_path("--speculative-draft-model-path", paths[-1], drafter))
    return out


def eagle_run(findings: list[Finding], release: Ask, drafter: Any) -> list[Finding]:
    """SGLang with --speculative-algorithm EAGLE runs an EAGLE-3 drafter without its features: every line
    says what this command does (EAGLE_ALGORITHM), none what EAGLE3 would do."""
    said, guard = EAGLE_ALGORITHM, LOUD_FC_FAMILY
    # Our guard applied: the drafter's fc meets one layer of target features at the first prefill
    # and raises (the family's probes; docs/gpu-proof.md), so the server stops at its first request.
    stops = release.applied(guard) and drafter.use_aux_hidden_state
    out, captured = [], False
    for f in findings:
        code = "aux.capture" if f.code.startswith("aux.capture") else f.code
        if stops and code == "fc.shape":
            out.append(problem(code, f"fc gets one layer of target features, not the aux layers it fuses: our "
                               f"{release.name}/{guard} (applied) raises at the first prefill",
                               hint="--speculative-algorithm EAGLE3"))
        elif stops and code == "flags.algorithm":
            out.append(problem(code, f"--speculative-algorithm EAGLE runs this EAGLE-3 drafter without its aux "
                               f"features: {release.label()} starts, and stops at its first request (fc.shape)",
                               wanted=f.wanted, found=f.found, hint=f.hint))
        elif code not in said:
            out.append(f)
        elif code == "aux.capture" and captured:
            continue  # one line for every runner: none captures
        else:
            captured = captured or code == "aux.capture"
            level = hint if code == "vocab.d2t" else problem
            out.append(level(code, said[code].format(release=release.label()),
                             hint="--speculative-algorithm EAGLE3" if level is problem else ""))
    return out
