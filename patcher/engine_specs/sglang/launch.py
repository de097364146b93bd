"""What SGLang does with a launch, read from the release's files: the environment variables doctor
reads (as ``sglang/srt/environ.py`` declares them: ``class Envs: NAME = EnvBool(default)``, a value
run through the EnvField class's own ``parse``), and its FlashInfer allreduce fusion and two-batch
overlap with EAGLE-3, with doctor's checks of them (``launch.allreduce_fusion``,
``launch.two_batch_overlap``).

SGLang 0.5.4.post2-0.5.13.post1 capture the DeepSeek layers' aux states before the fused
allreduce: with the fusion on and TP > 1 the drafter reads each rank's partial sums. Judged by the
state of ``sglang/eagle3-fused-allreduce-capture`` once the catalogue has it (applied or upstream:
the capture reads the reduced residual), by the releases below until then; tests/test_doctor.py
proves each row against the published wheels.
"""

from __future__ import annotations

import ast
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher.engine_specs.base import (
    APPLIED,
    DEEPSEEK_V2_MODEL_ARCHITECTURES,
    LOST,
    PENDING,
    REFUSED,
    UPSTREAM,
    EnvParsed,
    EnvRules,
    EnvVar,
    LaunchContext,
    contains,
    definitions,
    parse_file,
)
from patcher.findings import Finding, hint, ok, problem

# --- the environment variables, as environ.py declares them ---------------------------------------

ENVIRON_FILE = "sglang/srt/environ.py"
# The speculative worker: EAGLEWorkerV2 (overlap scheduling) when on; declared in sglang/srt/environ.py
# from 0.5.4.post1, on by default from 0.5.11, removed in 0.5.14 (the V2 worker always runs).
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
NAMES = (SPEC_V2_ENV,)


def read(site: Path) -> dict[str, EnvVar]:
    declared = environ_defaults(site / ENVIRON_FILE)
    return {name: EnvVar(name, name in declared, declared.get(name)) for name in NAMES}


def environ_defaults(path: Path) -> dict[str, str | None]:
    """``{"NAME": default}`` for SGLang's ``class Envs: NAME = EnvBool(default)`` declarations."""
    tree = parse_file(path)
    out: dict[str, str | None] = {}
    for cls in (n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and node.targets[0].id.startswith("SGLANG_"):
                arg = node.value.args[0] if node.value.args else None
                out[node.targets[0].id] = str(arg.value) if isinstance(arg, ast.Constant) else None
    return out


def parse(site: Path, name: str, env: dict[str, str]) -> EnvParsed | None:
    tree = parse_file(site / ENVIRON_FILE)
    if tree is None:
        return None
    ns = definitions(tree, env)
    field = _envs_field(tree, name)
    if field is None or ns is None or field not in ns:
        return None
    how = f"{ENVIRON_FILE} declares it {field}"
    try:
        ns[field].parse(ns[field], env[name])
    except ValueError as exc:
        return EnvParsed(how, "a value its parse takes", ignored=str(exc))
    except Exception:
        return None
    return EnvParsed(how, "a value its parse takes")


def _envs_field(tree: ast.Module, name: str) -> str | None:
    """The EnvField class SGLang's ``class Envs`` declares ``name`` with (``EnvBool``...)."""
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs"):
        for node in cls.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                return node.value.func.id
    return None


RULES = EnvRules(names=NAMES, read=read, parse=parse)


# --- the allreduce fusion and two-batch overlap with EAGLE-3 --------------------------------------

FUSED_CAPTURE_FAMILY = "eagle3-fused-allreduce-capture"
# With the FlashInfer allreduce fusion on, the DeepSeek layers captured hidden_states + residual
# before the fused allreduce (per-rank partial sums) on these releases; fixed upstream in
# sgl-project/sglang#28343 (0.5.14). Used only while the catalogue has no family for it.
FUSED_CAPTURE_BUG = SpecifierSet(">=0.5.4.post2,<0.5.14")
FUSION_ENABLE_FLAG = "--enable-flashinfer-allreduce-fusion"
FUSION_DISABLE_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
# The flag exists in 0.5.10-0.5.13.post1; 0.5.14 replaced the switches by
# --flashinfer-allreduce-fusion-backend (and fixed the capture), so there it stops argparse.
FUSION_DISABLE_FLAG_RELEASES = SpecifierSet(">=0.5.10,<0.5.14")
FUSION_DISABLE_FLAG_SINCE = Version("0.5.10")
# Every release's auto-enable (ServerArgs._handle_model_specific_adjustments) requires it off.
DP_ATTENTION_FLAG = "--enable-dp-attention"
# Which targets SGLang turns the fusion on for by itself (TP > 1, one node, no DP attention), and
# on which GPUs: DeepSeek-V3 on SM100 in the DeepseekV3 block up to 0.5.6.post2, then in the
# shared list with SM90 from 0.5.7; KimiK25ForConditionalGeneration joins that list in 0.5.9.
_AUTO_FUSION: dict[str, tuple[tuple[Version, str], ...]] = {
    "DeepseekV3ForCausalLM": ((Version("0.5.7"), "SM90/SM100"), (Version("0"), "SM100")),
    "KimiK25ForConditionalGeneration": ((Version("0.5.9"), "SM90/SM100"),),
}


# With --enable-two-batch-overlap, DeepseekV2Model.forward runs the layers from
# first_k_dense_replace on (1 on Kimi, 3 on DeepSeek-V3) in a path that captures no EAGLE-3 aux
# states. No release supports it: the family refuses it on 0.5.4.post2-0.5.16 when the capture
# layers are set, 0.5.17+ fail at the first overlapped forward (the family's upstream entry).
TBO_CAPTURE_FAMILY = "eagle3-tbo-capture-refusal"
TBO_FLAG = "--enable-two-batch-overlap"


def fused_capture_bug_by_version(version: Version) -> bool:
    return contains(FUSED_CAPTURE_BUG, version)


def auto_fusion_gpus(version: Version, architecture: str) -> str | None:
    """The GPUs on which SGLang turns the allreduce fusion on by itself for this target; None: never."""
    return next((gpus for since, gpus in _AUTO_FUSION.get(architecture, ()) if version >= since), None)


def has_fusion_disable_flag(version: Version) -> bool:
    return contains(FUSION_DISABLE_FLAG_RELEASES, version)


def fusion_findings(ctx: LaunchContext) -> list[Finding]:
    """SGLang 0.5.4.post2-0.5.13.post1 capture the aux states before the fused allreduce."""
    release, cmd, target = ctx.release, ctx.cmd, ctx.target
    assert release.version is not None
    code = "launch.allreduce_fusion"
    if cmd.drafter is None or cmd.method != "EAGLE3":
        return []  # no EAGLE-3 aux capture for the fusion to meet (the drafter check says what runs)
    tp = cmd.tp or 1
    family = release.family(FUSED_CAPTURE_FAMILY)
    if family is not None:  # refused: the release has no aux capture at all (setup.* says so), nothing to corrupt
        buggy = family.state not in (APPLIED, UPSTREAM, REFUSED)
        state = f"{family.family.id} {family.state}"
    else:
        buggy = fused_capture_bug_by_version(release.version)
        state = f"{release.label()} as published"
    disabled = cmd.has(FUSION_DISABLE_FLAG)
    # where the release's own parser took the flag, the release has it, whatever a range says (issue 53)
    if disabled and not has_fusion_disable_flag(release.version) and not ctx.parsed_by_release:
        return [problem(code, f"{release.label()} has no {FUSION_DISABLE_FLAG}: the server stops at "
                              "argument parsing", wanted=f"a flag of {release.label()}",
                        found=FUSION_DISABLE_FLAG,
                        hint="leave it out" if not buggy else
                        f"use sglang {FUSION_DISABLE_FLAG_SINCE} or newer with it")]
    if not buggy:
        return [ok(code, f"EAGLE-3 aux capture with the allreduce fusion: correct ({state})")]
    forced = cmd.has(FUSION_ENABLE_FLAG)
    fusion = _resolved_fusion(ctx)  # the release's own start-up answer (issue 53), where it ran here
    if fusion is not None:
        # Its auto-enable, --enable-..., the TP, nodes, DP attention, all-to-all MoE, determinism
        # and --enforce-disable-... all weighed by the release itself, on the GPU it was shown.
        where = f" on {ctx.startup.get('device')}" if ctx.startup and ctx.startup.get("device") else ""
        if not fusion:
            return [ok(code, f"{release.label()}'s start-up configuration leaves the allreduce fusion off{where}, "
                             f"so the aux capture reads reduced states ({state})")]
        how = f"{release.label()}'s start-up configuration turns it on{where}"
        return [_fused_capture_problem(release, family, state, tp, how, forced, disabled_flag_fix(release))]
    if tp == 1:
        return [ok(code, f"TP 1: no allreduce to fuse, the aux capture is correct ({state})")]
    if disabled:
        return [ok(code, f"{FUSION_DISABLE_FLAG}: the aux capture reads reduced states ({state})")]
    if forced:
        how = f"{FUSION_ENABLE_FLAG} is given"
    elif cmd.has(DP_ATTENTION_FLAG):
        return [ok(code, f"{DP_ATTENTION_FLAG}: SGLang does not turn the allreduce fusion on by itself, "
                         f"so the aux capture reads reduced states ({state})")]
    else:
        archs = target.architectures if target is not None else ()
        gpus = {a: auto_fusion_gpus(release.version, a) for a in archs}
        on = next(((a, g) for a, g in gpus.items() if g), None)
        if target is not None and on is None:
            return [ok(code, f"{release.label()} does not turn the allreduce fusion on by itself for a "
                             f"{', '.join(archs) or 'target without architectures'} target ({state})")]
        how = (f"{release.label()} turns it on by itself for a {on[0]} target on {on[1]} GPUs (the GPU is not "
               "checked here)" if on else
               f"{release.label()} turns it on by itself for DeepSeek-V3/Kimi targets on SM90/SM100 GPUs, and "
               "the target's config was not read")
    level = problem if forced or target is not None else hint
    return [_fused_capture_problem(release, family, state, tp, how, forced, disabled_flag_fix(release), level)]


def disabled_flag_fix(release) -> str:
    if has_fusion_disable_flag(release.version):
        return f"add {FUSION_DISABLE_FLAG}"
    return f"use sglang {FUSION_DISABLE_FLAG_SINCE} or newer with {FUSION_DISABLE_FLAG}"


def _fused_capture_problem(release, family, state: str, tp: int, how: str, forced: bool, fix: str,
                           level=problem) -> Finding:
    if family is not None and family.state in (PENDING, LOST):
        fix = f"run '{release.apply_command()}', or {fix}"
    return level("launch.allreduce_fusion", f"TP {tp} with the FlashInfer allreduce fusion ({how}): with {state}, "
                 "EAGLE-3 captures each rank's partial sums before the allreduce, so the drafter sees wrong features",
                 wanted=f"{FUSION_DISABLE_FLAG}, or the fused capture fixed",
                 found=f"--tp {tp}" + (f", {FUSION_ENABLE_FLAG}" if forced else ""), hint=fix)


def _resolved_fusion(ctx: LaunchContext) -> bool | None:
    """Whether the release's start-up configuration turned the allreduce fusion on for this line
    (its own auto-enable, on the GPU it was shown); None: it did not run here."""
    got = ctx.startup
    if got is None or got.get("status") != "configured":
        return None
    fusion = got.get("fusion")
    return fusion if isinstance(fusion, bool) else None


def two_batch_overlap_findings(ctx: LaunchContext) -> list[Finding]:
    """EAGLE-3 on a DeepSeek/Kimi target with SGLang's two-batch overlap: no release captures the
    aux states of the layers the overlap path runs."""
    release, cmd, target = ctx.release, ctx.cmd, ctx.target
    code = "launch.two_batch_overlap"
    algos = cmd.values("--speculative-algorithm")
    if not (cmd.has(TBO_FLAG) and algos and algos[-1].upper() == "EAGLE3"):
        return []
    archs = set(target.architectures) if target is not None else set()
    if target is not None and not archs & DEEPSEEK_V2_MODEL_ARCHITECTURES:
        return []  # another model's forward: not judged here
    family = release.family(TBO_CAPTURE_FAMILY)
    state = family.state if family is not None else "as published"
    if state == REFUSED:
        return []  # no DeepSeek aux capture at all on this release: setup.* says so
    if state == APPLIED:
        when = (f"the server refuses it at start-up, when the capture layers are set after the weights "
                f"load ({release.name}/{TBO_CAPTURE_FAMILY} applied)")
    elif state == UPSTREAM:
        when = (f"{release.label()} fails at the first overlapped forward (CUDA-graph capture, or the first "
                "batch), after the weights load")
    else:
        when = (f"{release.label()} as published hands the drafter only the layers below first_k_dense_replace: "
                "a failure at the first overlapped batch, or with one layer captured a drafter on wrong features")
    level = problem if target is not None else hint
    return [level(code, f"{TBO_FLAG} with EAGLE-3 on a DeepSeek/Kimi target: the two-batch-overlap "
                        "path runs the layers from first_k_dense_replace on and captures no aux hidden states; "
                        f"no SGLang release supports it, and {when}",
                  wanted=f"EAGLE-3 without {TBO_FLAG}", found=TBO_FLAG,
                  hint=f"launch without {TBO_FLAG}")]
