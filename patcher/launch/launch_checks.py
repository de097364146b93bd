"""The findings only a whole launch command shows, one function per kind (``launch.*``, ``env.*``).

Each takes the parsed command (``launch_command``), the release as ``drafter.release`` describes it
and the facts of ``launch_facts``; none reads a version table of its own. ``doctor`` calls them.
"""

from __future__ import annotations

from pathlib import Path

from patcher.core.plan import State
from patcher.drafter.configs import TargetConfig
from patcher.drafter.findings import Finding, hint, ok, problem
from patcher.release import launch_facts
from patcher.release.launch_command import LaunchCommand, speculative_method
from patcher.release.release import Release


def env_findings(variables: dict[str, launch_facts.EnvVar], env: dict[str, str],
                 cmd: LaunchCommand, site: Path | None = None) -> list[Finding]:
    out = []
    for name, var in variables.items():
        code = f"env.{name}"
        given = "in the command" if name in cmd.env else "in the environment"
        parsed = launch_facts.env_parsed(cmd.spec, site, name, env) if name in env and var.read else None
        if parsed is not None and parsed.raises:
            out.append(problem(code, f"{name}={env[name]} ({given}): {parsed.how}, and that raises "
                               f"{parsed.raises}: the server stops at start-up", wanted=parsed.wanted,
                               found=f"{name}={env[name]}", hint=f"set {name} to {parsed.wanted}, or unset it"))
            continue
        if parsed is not None and parsed.ignored:
            out.append(hint(code, f"{name}={env[name]} ({given}): {parsed.how}, which ignores it with a warning "
                            f"({parsed.ignored}) and uses the default {var.default!r}", wanted=parsed.wanted,
                            found=f"{name}={env[name]}"))
            continue
        if var.only is not None:  # the one value start-up accepts; launch.runner says what any other does
            if name not in env:
                out.append(ok(code, f"{name} is not set: the release has one model runner and start-up checks it"))
            elif env[name] == var.only:
                out.append(ok(code, f"{name}={env[name]} ({given}): redundant, the release has one model runner"))
            continue
        if not var.read:
            if name in env:
                out.append(hint(code, f"{name}={env[name]} is set {given}, but this release does not read it",
                                found=f"{name}={env[name]}"))
            continue
        if name in env:
            default = f"default {var.default!r}" if var.default is not None else "no default"
            out.append(ok(code, f"{name}={env[name]} ({given}; {default})"))
        elif var.default is not None:
            out.append(ok(code, f"{name} is not set: the release's default {var.default!r}"))
        else:
            out.append(ok(code, f"{name} is not set, and the release has no default for it (it decides by itself)"))
    return out


def runner_findings(release: Release, env: dict[str, str], variables: dict[str, launch_facts.EnvVar],
                     target: TargetConfig | None, cmd: LaunchCommand) -> list[Finding]:
    assert release.version is not None
    parsed = launch_facts.env_parsed(cmd.spec, release.site, launch_facts.V2_RUNNER_ENV, env) \
        if launch_facts.V2_RUNNER_ENV in env else None
    if parsed is not None and parsed.raises:
        return []  # the server stops at start-up on the value (env.* says so): no runner runs
    runner = launch_facts.vllm_runner(release.version, env, variables.get(launch_facts.V2_RUNNER_ENV),
                                      target.architectures if target is not None else None,
                                      eagle3_pp=cmd.drafter is not None and (cmd.pp or 1) > 1,
                                      runners=launch_facts.vllm_runners(release.version, release.site),
                                      refuses_v2_env=launch_facts.v2_env_refused(release.site),
                                      default_v2=launch_facts.default_v2_architectures(release.site))
    if runner.name == "refused":
        return [problem("launch.runner", runner.why, wanted=f"{launch_facts.V2_RUNNER_ENV} unset (or 1)",
                        found=f"{launch_facts.V2_RUNNER_ENV}={env.get(launch_facts.V2_RUNNER_ENV)}",
                        hint=f"unset {launch_facts.V2_RUNNER_ENV}")]
    if runner.name == "v2" and cmd.drafter is not None and release.version < launch_facts.V2_RUNNER_EAGLE3_SINCE:
        return [problem("launch.runner",
                        f"the v2 model runner ({runner.why}) hands an EAGLE-3 drafter no aux hidden states on "
                        f"{release.label()}: it runs on the last layer alone",
                        wanted="the v1 runner", found=f"v2 ({runner.why})",
                        hint=f"unset {launch_facts.V2_RUNNER_ENV}, or use vllm "
                             f"{launch_facts.V2_RUNNER_EAGLE3_SINCE} or newer")]
    if runner.name == "unknown":
        what = ("file an issue with 'patcher verify --json'" if "moved" in runner.why else
                "put the target's local folder in the command")
        return [hint("launch.runner", runner.why, hint=what)]
    out = [ok("launch.runner", f"the {runner.name} model runner: {runner.why}")]
    return out + _eagle3_pp_findings(release, runner, target, cmd)


def _eagle3_pp_findings(release: Release, runner: launch_facts.Runner, target: TargetConfig | None,
                        cmd: LaunchCommand) -> list[Finding]:
    """EAGLE-3 with pipeline parallelism on the v2 runner: a DeepSeek/Kimi target raises at load."""
    if runner.name != "v2" or cmd.drafter is None or (cmd.pp or 1) < 2 \
            or not launch_facts.v2_refuses_deepseek_eagle3_pp(release.site):
        return []
    archs = set(target.architectures) if target is not None else set()
    keep_v1 = ("; VLLM_USE_V2_MODEL_RUNNER=0 keeps the v1 runner" if "v1" in launch_facts.vllm_runners(
        release.version, release.site) else "") if release.version is not None else ""
    what = (f"{release.label()}'s v2 model runner raises at load for EAGLE-3 with pipeline parallelism on a "
            "DeepSeek/Kimi target: its DeepSeek model does not relay aux hidden states between pipeline stages "
            "(verify_supports_aux_hidden_states_over_pp)")
    if archs & launch_facts.DEEPSEEK_V2_MODEL_ARCHITECTURES:
        return [problem("launch.pipeline_parallel", what, wanted="pipeline parallel size 1 with EAGLE-3",
                        found=f"{cmd.pp} stages, {sorted(archs)[0]}", hint=f"use tensor parallelism alone{keep_v1}")]
    return [hint("launch.pipeline_parallel", what + "; whether this target is one was not read",
                 hint="put the target's local folder in the command")]


def fusion_findings(release: Release, cmd: LaunchCommand, target: TargetConfig | None) -> list[Finding]:
    """SGLang 0.5.4.post2-0.5.13.post1 capture the aux states before the fused allreduce."""
    assert release.version is not None
    code = "launch.allreduce_fusion"
    if cmd.drafter is None or speculative_method(cmd) != "EAGLE3":
        return []  # no EAGLE-3 aux capture for the fusion to meet (the drafter check says what runs)
    tp = cmd.tp or 1
    family = release.family(launch_facts.FUSED_CAPTURE_FAMILY)
    if family is not None:  # refused: the release has no aux capture at all (setup.* says so), nothing to corrupt
        buggy = not family.ok and family.state is not State.REFUSED
        state = f"{family.family.id} {family.state}"
    else:
        buggy = launch_facts.fused_capture_bug_by_version(release.version)
        state = f"{release.label()} as published"
    disabled = cmd.has(launch_facts.FUSION_DISABLE_FLAG)
    if disabled and not launch_facts.has_fusion_disable_flag(release.version):
        return [problem(code, f"{release.label()} has no {launch_facts.FUSION_DISABLE_FLAG}: the server stops at "
                              "argument parsing", wanted=f"a flag of {release.label()}",
                        found=launch_facts.FUSION_DISABLE_FLAG,
                        hint="leave it out" if not buggy else
                        f"use sglang {launch_facts.FUSION_DISABLE_FLAG_SINCE} or newer with it")]
    if not buggy:
        return [ok(code, f"EAGLE-3 aux capture with the allreduce fusion: correct ({state})")]
    if tp == 1:
        return [ok(code, f"TP 1: no allreduce to fuse, the aux capture is correct ({state})")]
    if disabled:
        return [ok(code, f"{launch_facts.FUSION_DISABLE_FLAG}: the aux capture reads reduced states ({state})")]
    forced = cmd.has(launch_facts.FUSION_ENABLE_FLAG)
    if forced:
        how = f"{launch_facts.FUSION_ENABLE_FLAG} is given"
    elif cmd.has(launch_facts.DP_ATTENTION_FLAG):
        return [ok(code, f"{launch_facts.DP_ATTENTION_FLAG}: SGLang does not turn the allreduce fusion on by itself, "
                         f"so the aux capture reads reduced states ({state})")]
    else:
        archs = target.architectures if target is not None else ()
        gpus = {a: launch_facts.auto_fusion_gpus(release.version, a) for a in archs}
        on = next(((a, g) for a, g in gpus.items() if g), None)
        if target is not None and on is None:
            return [ok(code, f"{release.label()} does not turn the allreduce fusion on by itself for a "
                             f"{', '.join(archs) or 'target without architectures'} target ({state})")]
        how = (f"{release.label()} turns it on by itself for a {on[0]} target on {on[1]} GPUs (the GPU is not "
               "checked here)" if on else
               f"{release.label()} turns it on by itself for DeepSeek-V3/Kimi targets on SM90/SM100 GPUs, and "
               "the target's config was not read")
    if launch_facts.has_fusion_disable_flag(release.version):
        fix = f"add {launch_facts.FUSION_DISABLE_FLAG}"
    else:
        fix = f"use sglang {launch_facts.FUSION_DISABLE_FLAG_SINCE} or newer with {launch_facts.FUSION_DISABLE_FLAG}"
    if family is not None and family.state in (State.PENDING, State.LOST):
        fix = f"run '{release.apply_command()}', or {fix}"
    level = problem if forced or target is not None else hint
    return [level(code, f"TP {tp} with the FlashInfer allreduce fusion ({how}): with {state}, EAGLE-3 captures "
                        "each rank's partial sums before the allreduce, so the drafter sees wrong features",
                    wanted=f"{launch_facts.FUSION_DISABLE_FLAG}, or the fused capture fixed",
                    found=f"--tp {tp}" + (f", {launch_facts.FUSION_ENABLE_FLAG}" if forced else ""), hint=fix)]


def two_batch_overlap_findings(release: Release, cmd: LaunchCommand, target: TargetConfig | None) -> list[Finding]:
    """EAGLE-3 on a DeepSeek/Kimi target with SGLang's two-batch overlap: no release captures the
    aux states of the layers the overlap path runs."""
    code = "launch.two_batch_overlap"
    algos = cmd.values("--speculative-algorithm")
    if not (cmd.has(launch_facts.TBO_FLAG) and algos and algos[-1].upper() == "EAGLE3"):
        return []
    archs = set(target.architectures) if target is not None else set()
    if target is not None and not archs & launch_facts.DEEPSEEK_V2_MODEL_ARCHITECTURES:
        return []  # another model's forward: not judged here
    family = release.family(launch_facts.TBO_CAPTURE_FAMILY)
    state = family.state if family is not None else "as published"
    if state is State.REFUSED:
        return []  # no DeepSeek aux capture at all on this release: setup.* says so
    if state is State.APPLIED:
        when = (f"the server refuses it at start-up, when the capture layers are set after the weights "
                f"load ({release.name}/{launch_facts.TBO_CAPTURE_FAMILY} applied)")
    elif state is State.UPSTREAM:
        when = (f"{release.label()} fails at the first overlapped forward (CUDA-graph capture, or the first "
                "batch), after the weights load")
    else:
        when = (f"{release.label()} as published hands the drafter only the layers below first_k_dense_replace: "
                "a failure at the first overlapped batch, or with one layer captured a drafter on wrong features")
    level = problem if target is not None else hint
    return [level(code, f"{launch_facts.TBO_FLAG} with EAGLE-3 on a DeepSeek/Kimi target: the two-batch-overlap "
                        "path runs the layers from first_k_dense_replace on and captures no aux hidden states; "
                        f"no SGLang release supports it, and {when}",
                  wanted=f"EAGLE-3 without {launch_facts.TBO_FLAG}", found=launch_facts.TBO_FLAG,
                  hint=f"launch without {launch_facts.TBO_FLAG}")]
