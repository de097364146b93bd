"""``drafter check`` findings about the engine release rather than the checkpoint: what
``patcher verify`` says about each family there, whether its registry knows the drafter's and
the target's architecture, and which target layers it captures for this drafter.

Every engine fact comes from ``facts`` (family states, two documented tables); nothing here
compares versions.
"""

from __future__ import annotations

from . import facts
from .configs import EAGLE3_LLAMA, DrafterConfig, TargetConfig
from .findings import Finding, hint, ok, problem
from .release import Release

# Families that do not change how a drafter runs: reported as hints, never as problems.
NOT_ABOUT_THE_DRAFTER = ("sm120-allreduce-fusion",)
MLA_DRAFTERS = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")


def check_setup(release: Release) -> list[Finding]:
    """One finding per family, with what ``patcher verify`` would say about it."""
    out: list[Finding] = []
    for fam in release.families:
        code = f"setup.{fam.family.name}"
        if fam.ok:
            out.append(ok(code, f"{fam.family.id}: {fam.state} ({fam.detail})"))
            continue
        if fam.state == "refused":
            todo = f"use {release.name} {fam.use} or newer"
        elif fam.state in ("pending", "lost"):
            todo = f"run '{release.apply_command()}'"
        else:
            todo = fam.hint
        level = hint if fam.family.name in NOT_ABOUT_THE_DRAFTER else problem
        out.append(level(code, f"{fam.family.id} is {fam.state} on {release.label()}: {fam.detail}",
                         wanted="applied or upstream (what 'patcher verify' accepts)", found=fam.state, hint=todo))
    return out


def _registry_finding(code: str, what: str, arch: str, release: Release) -> Finding:
    since = facts.registered_since(release.name, arch)
    known = facts.registers(release, arch)
    if known is None:
        return hint(code, f"{release.label()} is older than the releases this check knows; "
                    f"whether it registers {arch} is not known", found=release.label(), hint="see VERSIONS.md")
    if known:
        return ok(code, f"{release.label()} registers {what} {arch}")
    todo = (f"use {release.name} {since} or newer" if since is not None
            else f"no {release.name} release registers it")
    return problem(code, f"{release.label()} has no model class for {what} {arch}: the server stops at load",
                   wanted=f"a {release.name} release that registers {arch}", found=f"{release.label()}", hint=todo)


def check_target_class(release: Release, target: TargetConfig | None) -> list[Finding]:
    if target is None or release.version is None or not target.architectures:
        return []
    arch = target.architectures[0]
    if arch not in facts.REGISTERED_SINCE[release.name]:
        return [hint("target.architecture", f"target architecture {arch}: not one this check knows; "
                     "the Kimi-K2 / K2.5 patch set is written for DeepseekV3ForCausalLM / "
                     "KimiK25ForConditionalGeneration", found=arch)]
    return [_registry_finding("target.architecture", "the target's", arch, release)]


def check_drafter_class(d: DrafterConfig, release: Release | None) -> list[Finding]:
    """The drafter's architecture against the release's registry (EAGLE-3 configs only)."""
    if d.format != EAGLE3_LLAMA:
        return []
    archs = ", ".join(d.architectures) or "(none)"
    mla = next((a for a in d.architectures if a in MLA_DRAFTERS), None)
    if release is None or release.version is None:
        if mla:
            return [hint("config.format", f"architectures {archs}: an MLA EAGLE-3 drafter; vLLM registers it "
                         f"from {facts.REGISTERED_SINCE['vllm'][mla]}, SGLang "
                         + (f"from {facts.REGISTERED_SINCE['sglang'][mla]}" if mla in facts.REGISTERED_SINCE["sglang"]
                            else "under no release (only Eagle3DeepseekV2ForCausalLM)"),
                         hint="pass --engine and --engine-version (or --python / --site) to check your release")]
        if "LlamaForCausalLMEagle3" in d.architectures:
            return [ok("config.format", "LlamaForCausalLMEagle3 config, the name both engines register")]
        return [hint("config.format", f"architectures {archs}: vLLM reads it, SGLang only knows LlamaForCausalLMEagle3",
                     wanted='"architectures": ["LlamaForCausalLMEagle3"]', found=archs)]
    if all(facts.registers(release, a) is None for a in d.architectures):
        return [_registry_finding("config.format", "the drafter's", d.architectures[0], release)]
    known = [a for a in d.architectures if facts.registers(release, a)]
    if known:
        return [ok("config.format", f"architectures {archs}, registered by {release.label()}")]
    arch = mla or (d.architectures[0] if d.architectures else "LlamaForCausalLMEagle3")
    since = facts.registered_since(release.name, arch)
    if since is None and mla and release.name == "sglang":
        todo = ('SGLang registers the MLA drafter only as "Eagle3DeepseekV2ForCausalLM" (from '
                f"{facts.REGISTERED_SINCE['sglang']['Eagle3DeepseekV2ForCausalLM']}): rename the architecture")
    elif since is not None:
        todo = f"use {release.name} {since} or newer"
    else:
        todo = '"architectures": ["LlamaForCausalLMEagle3"]'
    return [problem("config.format", f"{release.label()} has no model class for architectures {archs}: "
                    "the server stops at load", wanted=f"an architecture {release.label()} registers",
                    found=archs, hint=todo)]


def check_aux_capture(d: DrafterConfig, t: TargetConfig | None, release: Release | None) -> list[Finding]:
    """Which target layers the engine captures for this drafter, in eager and in graph mode."""
    n = t.num_hidden_layers if t is not None else None
    ids = list(d.aux_layer_ids) if d.aux_layer_ids else None
    out: list[Finding] = []
    if ids is not None and n is not None:
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            out.append(problem("aux.layer_ids", f"aux layer ids {ids} reach outside the target's {n} layers",
                               wanted=f"ids in 0..{n - 1}", found=str(ids)))
            return out
        out.append(ok("aux.layer_ids", f"aux layer ids {ids} are within the target's {n} layers"))
    if release is None or not d.use_aux_hidden_state:
        if ids is None and n is not None:
            out.append(ok("aux.layer_ids", f"no explicit aux layer ids: the engine uses "
                          f"{facts.default_aux_layer_ids(n)} for the target's {n} layers"))
        return out
    cap = facts.aux_capture(release, ids, n)
    if cap is None:
        return out
    wanted = ids if ids is not None else cap.eager
    modes = (f"{cap.eager} in eager mode and {cap.graph} with CUDA graphs" if cap.graph != cap.eager
             else f"{cap.eager} in eager and graph mode")
    message = f"{release.label()} captures {modes} ({cap.why})"
    if ids is None or (cap.eager == wanted and cap.graph in (wanted, [])):
        out.append(ok("aux.capture", message))
        return out
    out.append(problem("aux.capture", message + f"; the drafter was trained on {ids} (vLLM and speculators "
                       "take ids as given)", wanted=f"capture {ids} in both modes",
                       found=f"eager {cap.eager}, graph {cap.graph or '(default, N unknown)'}",
                       hint=_capture_hint(release, ids, n)))
    return out


def _capture_hint(release: Release, ids: list[int], n: int | None) -> str:
    fam = release.family(facts.AUX_IDS_FAMILY)
    starts_at_1 = ids[:1] == [1]
    if n is not None and ids == facts.default_aux_layer_ids(n):  # works on every release, patched or not
        return "omit eagle_aux_hidden_state_layer_ids: they equal the engine default, which it captures as given"
    if fam is not None and fam.state in ("pending", "lost") and not starts_at_1:
        return f"apply {fam.family.id} ('{release.apply_command()}'): explicit ids then mean the same in both modes"
    if starts_at_1:
        return ("an id list starting at 1 is read as SpecForge's numbering (output of layer i) and gets +1; "
                "if the drafter was trained on these layers as given, vLLM captures them as given")
    rule = facts.shift_rule(release)
    if rule is not None and rule[1] == "first-is-1":
        return "no SGLang rule explains this capture; file an issue with 'patcher drafter check --json'"
    return "SGLang 0.5.13 and later take explicit ids not starting at 1 as given, in both modes"


def check_use_aux(ckpt_fc_cols: int | None, d: DrafterConfig, target_hidden: int | None) -> list[Finding]:
    """``use_aux_hidden_state: false`` feeds the drafter one layer and skips fc in silence."""
    if d.use_aux_hidden_state:
        return []
    if ckpt_fc_cols is not None and target_hidden and ckpt_fc_cols > target_hidden:
        k = ckpt_fc_cols // target_hidden
        return [problem("config.use_aux_hidden_state",
                        f"eagle_config.use_aux_hidden_state is false, but fc.weight takes {ckpt_fc_cols} = "
                        f"{k} x {target_hidden} features: the engine captures no aux layers, feeds the drafter the "
                        "last layer only and skips fc without a message",
                        wanted='"use_aux_hidden_state": true', found='"use_aux_hidden_state": false')]
    return [ok("config.use_aux_hidden_state", "use_aux_hidden_state is false and fc does not fuse several layers: "
               "a drafter trained on the last layer only")]

