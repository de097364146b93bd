"""``patcher doctor -- <server command>``: the launch the user is about to run, judged in seconds.

Built on the other commands, never beside them: the engine state is ``actions.verify``'s report
(probes only when asked), the drafter is judged by the drafter check's own entry point
(``drafter.checks.check_drafter``) with the command's flags, and what only the whole command
shows (the environment variables the release reads, the model runner vLLM will use, the TP size
with SGLang's allreduce fusion and EAGLE-3, paths that do not exist, another engine than the one
installed) comes from ``launch_facts``. Returns a report; never prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import actions, engines, launch_facts
from .drafter.checkpoint import read_checkpoint, read_config
from .drafter.checks import check_drafter
from .drafter.configs import TargetConfig, parse_drafter_config, parse_target_config
from .drafter.findings import PROBLEM, Finding, hint, ok, problem
from .drafter.release import Release, from_install
from .errors import NotInstalled, PatcherError
from .launch_command import LaunchCommand, effective_env

SCHEMA = "patcher.doctor/1"


@dataclass
class DoctorReport:
    command: LaunchCommand
    verify: actions.Report
    release: Release
    env: dict[str, launch_facts.EnvVar]
    environ: dict[str, str]  # the values the server starts with, for the variables in env
    launch: list[Finding] = field(default_factory=list)  # what only the whole command shows
    drafter: list[Finding] = field(default_factory=list)  # the drafter check's findings
    target_config: TargetConfig | None = None
    probes: bool = False  # whether verify ran its probes

    def findings(self) -> list[Finding]:
        return self.launch + self.drafter

    def reasons(self) -> list[str]:
        """Every reason for no-go, one phrase each: verify's, then each problem."""
        out = list(self.verify.reasons(False))
        out += [f"{f.code}: {f.message}" for f in self.findings() if f.level == PROBLEM]
        return out

    def next_steps(self) -> list[str]:
        """Commands that clear verify's reasons: apply, where families are pending or lost."""
        todo = [s for s in self.verify.statuses if s.state.value in ("pending", "lost")]
        return [self.release.apply_command()] if todo else []

    @property
    def exit_code(self) -> int:
        return 1 if self.reasons() else 0


def diagnose(cmd: LaunchCommand, *, python: str | None = None, site: Path | None = None,
             probes: bool = False, environ: dict[str, str] | None = None) -> DoctorReport:
    launch: list[Finding] = []
    if python is None and site is None and cmd.python is not None:
        if Path(cmd.python).exists():
            python = cmd.python  # the environment the command itself runs in
        else:
            launch.append(problem("launch.python", f"the command's interpreter {cmd.python} does not exist",
                                  wanted="an existing interpreter", found="missing",
                                  hint="fix the path, or pass --python for the environment that runs the server"))
    opts = actions.Options(python=python, site=site, probes=probes)
    try:
        report = actions.verify(cmd.engine, opts)
    except NotInstalled as missing:
        other = _other_engine(cmd.engine, python, site)
        if other is None:
            raise
        # The command starts one engine and this environment has the other: nothing else can be judged.
        raise EngineMismatch(cmd, other, missing) from None
    install = report.install
    located_by = f" --python {python}" if python else f" --site {site}" if site else ""
    release = replace(from_install(install), located_by=located_by)
    by = f" (located by {python}, the command's interpreter)" if python and python == cmd.python else ""
    launch.insert(0, ok("launch.engine", f"the command starts {cmd.engine}; {release.label()} is installed at "
                                         f"{install.site}{by}"))
    if cmd.entry == "sglang serve" and install.version < launch_facts.SGLANG_SERVE_SINCE:
        launch.append(problem("launch.entry", f"{release.label()} has no 'sglang serve' (from "
                              f"{launch_facts.SGLANG_SERVE_SINCE}): the command does not start",
                              wanted="python -m sglang.launch_server ...", found="sglang serve"))
    env = effective_env(cmd, environ)
    variables = launch_facts.env_vars(cmd.engine, install.site)
    launch += _env_findings(variables, env, cmd)
    launch += _path_findings(cmd)
    if cmd.values("--config"):
        launch.append(hint("launch.config", f"options in --config {cmd.values('--config')[-1]} are not read here: "
                           "doctor judges only what the command line says",
                           hint="put the options doctor reads (model, drafter, TP, speculative flags) on the line"))
    target = _target_config(cmd, launch)
    if cmd.tp_text is not None:
        launch.append(problem("launch.tp", f"the tensor-parallel size {cmd.tp_text!r} is not a whole number: "
                              "the server stops at argument parsing", wanted="e.g. --tp 8", found=cmd.tp_text))
    if cmd.engine == "vllm":
        launch += _runner_findings(release, env, variables, target, cmd)
    else:
        launch += _fusion_findings(release, cmd, target)
    doc = DoctorReport(cmd, report, release, variables, {k: env[k] for k in variables if k in env},
                       launch, target_config=target, probes=probes)
    doc.drafter = _drafter_findings(cmd, release, target)
    return doc


class EngineMismatch(PatcherError):
    """The command starts one engine and the environment has only the other: no-go (exit 1)."""

    exit_code = 1

    def __init__(self, cmd: LaunchCommand, other: engines.Install, missing: NotInstalled) -> None:
        super().__init__(f"the command starts {cmd.engine}, but this environment has {other.engine} "
                         f"{other.version} and no {cmd.engine}",
                         wanted=f"{cmd.engine} installed where the command runs", found=missing.found,
                         hint="point --python/--site at the environment that runs the server")


def _other_engine(engine: str, python: str | None, site: Path | None) -> engines.Install | None:
    other = "sglang" if engine == "vllm" else "vllm"
    try:
        return engines.find(other, python=python, site=site)
    except PatcherError:
        return None


def _env_findings(variables: dict[str, launch_facts.EnvVar], env: dict[str, str],
                  cmd: LaunchCommand) -> list[Finding]:
    out = []
    for name, var in variables.items():
        code = f"env.{name}"
        given = "in the command" if name in cmd.env else "in the environment"
        if not var.read:
            if name in env:
                out.append(hint(code, f"{name}={env[name]} is set {given}, but this release does not read it",
                                found=f"{name}={env[name]}"))
            continue
        if name in env:
            out.append(ok(code, f"{name}={env[name]} ({given}; default {var.default!r})"))
        else:
            out.append(ok(code, f"{name} is not set: the release's default {var.default!r}"))
    return out


def _looks_like_hub_id(value: str) -> bool:
    """``org/name``: vLLM and SGLang download it from the Hugging Face Hub."""
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "~"))


def _path_findings(cmd: LaunchCommand) -> list[Finding]:
    out = []
    for code, what, value in (("launch.target", "target", cmd.target), ("launch.drafter", "drafter", cmd.drafter)):
        if value is None:
            if what == "target":
                out.append(problem(code, "the command names no model", wanted="--model-path T (SGLang), "
                                   "vllm serve T or --model T (vLLM)", found="(absent)"))
            elif _speculative_flag(cmd):
                out.append(problem(code, f"{_speculative_flag(cmd)} without a drafter path: the EAGLE-3 launch "
                                   "has no draft model", wanted="--speculative-draft-model-path D (SGLang), "
                                   '"model": "D" in --speculative-config (vLLM)', found="(absent)"))
            else:
                out.append(hint(code, "the command names no drafter: speculative decoding is off, nothing of "
                                "EAGLE-3 is checked", wanted="--speculative-draft-model-path D (SGLang), "
                                '--speculative-config \'{"method": "eagle3", "model": "D", ...}\' (vLLM)'))
            continue
        path = Path(value).expanduser()
        if path.is_dir():
            out.append(ok(code, f"{what} folder {value} exists"))
        elif path.exists():
            out.append(problem(code, f"the {what} {value} is a file, not a model folder", wanted="a folder with "
                               "config.json", found="a file"))
        elif _looks_like_hub_id(value):
            out.append(hint(code, f"the {what} {value} is not a local folder: the engine will fetch it from the "
                            f"Hugging Face Hub; doctor reads no network, so its config was not checked",
                            hint=f"download it and pass the local folder to check the {what}"))
        else:
            out.append(problem(code, f"the {what} folder {value} does not exist: the server stops at load",
                               wanted="an existing folder", found="missing"))
    return out


def _speculative_flag(cmd: LaunchCommand) -> str:
    """The EAGLE option the command gives, as written; empty when none (or another method, e.g.
    ngram, which needs no draft model)."""
    algos = cmd.values("--speculative-algorithm")
    if cmd.engine == "sglang" and algos and algos[-1].upper() in ("EAGLE", "EAGLE3"):
        return f"--speculative-algorithm {algos[-1]}"
    configs = cmd.values("--speculative-config")
    if cmd.engine == "vllm" and configs:
        try:
            spec = json.loads(configs[-1])
        except ValueError:
            return ""  # the drafter check's flags.speculative_config says so, when there is a drafter
        if isinstance(spec, dict) and spec.get("method") in ("eagle", "eagle3"):
            return f"--speculative-config {configs[-1]}"
    return ""


def _target_config(cmd: LaunchCommand, launch: list[Finding]) -> TargetConfig | None:
    if cmd.target is None or not Path(cmd.target).expanduser().is_dir():
        return None
    folder = Path(cmd.target).expanduser()
    try:
        return parse_target_config(read_config(folder), folder / "config.json")
    except PatcherError as exc:
        launch.append(problem("launch.target", f"the target's config cannot be read: {exc.what}",
                              wanted=exc.wanted, found=exc.found, hint=exc.hint))
        return None


def _runner_findings(release: Release, env: dict[str, str], variables: dict[str, launch_facts.EnvVar],
                     target: TargetConfig | None, cmd: LaunchCommand) -> list[Finding]:
    assert release.version is not None
    runner = launch_facts.vllm_runner(release.version, env, variables.get(launch_facts.V2_RUNNER_ENV),
                                      target.architectures if target is not None else None,
                                      eagle3_pp=cmd.drafter is not None and (cmd.pp or 1) > 1)
    if runner.name == "v2" and cmd.drafter is not None and release.version < launch_facts.V2_RUNNER_EAGLE3_SINCE:
        return [problem("launch.runner",
                        f"the v2 model runner ({runner.why}) hands an EAGLE-3 drafter no aux hidden states on "
                        f"{release.label()}: it runs on the last layer alone",
                        wanted="the v1 runner", found=f"v2 ({runner.why})",
                        hint=f"unset {launch_facts.V2_RUNNER_ENV}, or use vllm "
                             f"{launch_facts.V2_RUNNER_EAGLE3_SINCE} or newer")]
    if runner.name == "unknown":
        return [hint("launch.runner", runner.why, hint="put the target's local folder in the command")]
    return [ok("launch.runner", f"the {runner.name} model runner: {runner.why}")]


def _fusion_findings(release: Release, cmd: LaunchCommand, target: TargetConfig | None) -> list[Finding]:
    """SGLang 0.5.4.post2-0.5.13.post1 capture the aux states before the fused allreduce."""
    assert release.version is not None
    code = "launch.allreduce_fusion"
    if cmd.drafter is None:
        return []
    tp = cmd.tp or 1
    family = release.family(launch_facts.FUSED_CAPTURE_FAMILY)
    if family is not None:
        buggy = not family.ok
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
    if family is not None and family.state in ("pending", "lost"):
        fix = f"run '{release.apply_command()}', or {fix}"
    level = problem if forced or target is not None else hint
    return [level(code, f"TP {tp} with the FlashInfer allreduce fusion ({how}): with {state}, EAGLE-3 captures "
                        "each rank's partial sums before the allreduce, so the drafter sees wrong features",
                    wanted=f"{launch_facts.FUSION_DISABLE_FLAG}, or the fused capture fixed",
                    found=f"--tp {tp}" + (f", {launch_facts.FUSION_ENABLE_FLAG}" if forced else ""), hint=fix)]


def _drafter_findings(cmd: LaunchCommand, release: Release, target: TargetConfig | None) -> list[Finding]:
    if cmd.drafter is None or not Path(cmd.drafter).expanduser().is_dir():
        return []  # _path_findings said why
    folder = Path(cmd.drafter).expanduser()
    try:
        ckpt = read_checkpoint(folder)
        drafter = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    except PatcherError as exc:
        return [problem("drafter.unreadable", f"the drafter cannot be read: {exc.what}", wanted=exc.wanted,
                        found=exc.found, hint=exc.hint)]
    findings = check_drafter(ckpt, drafter, target, release, cmd.flags)
    # setup.* repeat the family states verify reports above: each fact is shown once.
    return [f for f in findings if not f.code.startswith("setup.")]
