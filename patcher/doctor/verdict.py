"""``patcher doctor -- <server command>``: the launch the user is about to run, judged in seconds.

Built on the other commands, never beside them: the engine state is ``actions.verify``'s report
(probes only when asked), the drafter is judged by the drafter check's own entry point
(``drafter.checks.check_drafter``) with the command's flags, and what only the whole command
shows comes from two places: the shared checks (how the line was read, the method, paths that do
not exist, the environment variables the release reads: ``command_checks``; a config file the
release does not merge: ``config_file``; another engine than the one installed: here), and the
engine module's own (``LaunchReading.checks``, each handed a ``LaunchContext``: vLLM's model runner,
SGLang's allreduce fusion and two-batch overlap). Returns a report; never prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from patcher import program
from patcher.core.plan import State
from patcher.doctor import command_checks, config_file, reading_checks, which_engine
from patcher.doctor.meets import NO, YES, FamilyMeet, MeetContext, judge
from patcher.drafter import loader_checks
from patcher.drafter.checkpoint import read_checkpoint, read_config
from patcher.drafter.checks import check_drafter
from patcher.drafter.configs import EAGLE3_LLAMA, DrafterConfig, TargetConfig, parse_drafter_config, parse_target_config
from patcher.engine_specs.base import SPECULATORS, EnvVar, LaunchContext
from patcher.environment import gpus
from patcher.errors import NotInstalled, PatcherError
from patcher.findings import PROBLEM, UNKNOWN, Finding, ok, problem, unknown
from patcher.installer import actions
from patcher.release import release_loader, release_parser
from patcher.release.launch_command import LaunchCommand, effective_env
from patcher.release.release import Release, from_statuses, located_by

SCHEMA = "patcher.doctor/1"
GO, NO_GO, CANNOT_TELL = "go", "no-go", "cannot tell"
PARSE = "launch.parse"  # how the line was read (patcher.doctor.reading_checks.reading_finding)
EXIT = {GO: 0, NO_GO: 1, CANNOT_TELL: 3}  # 2 is usage (README, docs/reference.md)


@dataclass
class DoctorReport:
    command: LaunchCommand
    verify: actions.Report
    release: Release
    env: dict[str, EnvVar]
    environ: dict[str, str]  # the values the server starts with, for the variables in env
    launch: list[Finding] = field(default_factory=list)  # what only the whole command shows
    drafter: list[Finding] = field(default_factory=list)  # the drafter check's findings
    target_config: TargetConfig | None = None
    probes: bool = False  # whether verify ran its probes
    families: list[FamilyMeet] = field(default_factory=list)  # the unready families, met or not
    strict: bool = False  # the install-wide verdict: every unready family is a reason (--strict)
    gpu: str | None = None  # the GPUs' compute capability major, where seen (--gpu, nvidia-smi)

    def install_reasons(self) -> list[str]:
        """verify's reasons this launch meets: every one with --strict (or where nothing was judged
        per launch), else the families it meets, each with why it matters here, and failed probes."""
        everything = list(self.verify.reasons(False))
        if self.strict or not self.families:
            return everything
        met = {fm.status.family.id: fm for fm in self.families if fm.meet.answer == YES}
        out = []
        for reason in everything:
            fid = reason.split(" ", 1)[0].rstrip(":")
            if ": probe " in reason:
                out.append(reason)
            elif fid in met:
                out.append(f"{reason} (this launch meets it: {met[fid].meet.why})")
        return out

    def findings(self) -> list[Finding]:
        return self.launch + self.drafter

    def reasons(self) -> list[str]:
        """Every reason for no-go, one phrase each: verify's, then each problem. Where the line may
        be read otherwise by the release (unsure), what was judged from it is no reason: only
        verify's and the unsure reading itself."""
        out = self.install_reasons()
        judged = [f for f in self.findings() if f.level in (PROBLEM, UNKNOWN)]
        if self.unsure_reading:
            judged = [f for f in judged if f.code == PARSE]
        return out + [f"{f.code}: {f.message}" for f in judged]

    @property
    def unsure_reading(self) -> bool:
        """The release's parser did not run, and the line has tokens it may read otherwise."""
        return any(f.code == PARSE and f.level == UNKNOWN for f in self.launch)

    def next_steps(self) -> list[str]:
        """Commands that clear the reasons: apply, where a family this launch meets (or may meet) is
        pending or lost (with --strict: any)."""
        spared = {fm.status.family.id for fm in self.families if fm.meet.answer == NO and not self.strict}
        todo = [s for s in self.verify.statuses if s.state in (State.PENDING, State.LOST)
                and s.family.id not in spared]
        return [self.release.apply_command()] if todo else []

    @property
    def parsed_by(self) -> str:
        """Who read the command line: "release" (its own parser), "spellings" (doctor's, where
        the release's parser does not import) or "none" (its engine states no reading of it)."""
        if not self.command.read:
            return "none"
        line = next((f for f in self.launch if f.code == PARSE), None)
        return "release" if line is not None and line.level in ("ok", "problem") else "spellings"

    @property
    def verdict(self) -> str:
        """go: every line proven; no-go: a reason is proven (verify's, or a problem); cannot tell:
        no problem, but a line doctor could not read as the release reads it (unknown)."""
        if self.install_reasons():
            return NO_GO
        if self.unsure_reading:
            return CANNOT_TELL  # a problem judged from a misread line would be a false no-go
        if any(f.level == PROBLEM for f in self.findings()):
            return NO_GO
        return CANNOT_TELL if any(f.level == UNKNOWN for f in self.findings()) else GO

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]


def diagnose(cmd: LaunchCommand, *, python: str | None = None, site: Path | None = None,
             probes: bool = False, environ: dict[str, str] | None = None, strict: bool = False,
             gpu: str | None = None, stage: Callable[[str], None] | None = None) -> DoctorReport:
    """The launch judged; ``strict``: every unready family of the install is a reason (today's
    verify), else only those this launch meets; ``gpu``: the GPUs' compute capability major where
    known (else nvidia-smi's, where it answers); ``stage``: told each slow step as it starts."""
    stage = stage or _quiet
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
        stage(f"reading the {cmd.engine} install" + (" and running its probes" if probes else ""))
        report = actions.verify(cmd.engine, opts)
    except NotInstalled as missing:
        other = which_engine.other_engine(cmd.engine, python, site)
        if other is None:
            raise
        # The command starts one engine and this environment has the other: nothing else can be judged.
        raise which_engine.EngineMismatch(cmd, other, missing) from None
    install = report.install
    release = replace(from_statuses(install, report.statuses), located_by=located_by(python, site))
    by = f" (located by {python}, the command's interpreter)" if python and python == cmd.python else ""
    launch.insert(0, ok("launch.engine", f"the command starts {cmd.engine}; {release.label()} is installed at "
                                         f"{install.site}{by}"))
    if not cmd.read:  # the engine states no launch reading: its install is judged, its line is not
        launch.append(unknown(PARSE, f"{release.label()}: the line is not checked for this engine (its module "
                              "states no reading of its launch lines): its options, target, drafter and "
                              "environment are not read", hint=f"{program.command('verify --engine ' + cmd.engine)} "
                              "judges the install; the line itself is yours to check"))
        return DoctorReport(cmd, report, release, {}, {}, launch, probes=probes, strict=strict)
    env = effective_env(cmd, environ)
    variables = command_checks.variables(cmd.spec, install.site)
    as_given = release_parser.server_argv(cmd)  # what the release's loader is built from (the drafter check)
    _ask_loader_ahead(cmd, release, as_given)  # on the other core, while the parser reads the line
    gpu = gpu if gpu is not None else gpus.major()
    stage(f"reading the line with {release.label()}'s own parser and start-up configuration (the first time "
          "for a line, it imports the engine)")
    spelled = config_file.respelled(cmd)  # read as written, and with its config file merged
    (cmd, reading), *merged = release_parser.read_many([cmd, *([spelled.command] if spelled else [])],
                                                       install, gpu, env)
    launch.append(reading_checks.reading_finding(reading, release))
    launch += config_file.unmerged(spelled, cmd, reading, merged[0] if merged else None, release)
    launch += reading_checks.startup_findings(reading, release)
    if reading.status == "rejected":  # the server stops at argument parsing: nothing else of the line runs
        return DoctorReport(cmd, report, release, variables, {k: env[k] for k in variables if k in env},
                            launch, probes=probes)
    launch += which_engine.entry_findings(cmd, install, release)
    launch += command_checks.env_findings(variables, env, cmd, install.site)
    unreadable: list[Finding] = []
    target = _target_config(cmd, unreadable)
    drafter_config = _drafter_config(cmd)
    method = command_checks.method_of(release, cmd, target, eagle3_drafter=drafter_config is not None
                                      and drafter_config.format in (SPECULATORS, EAGLE3_LLAMA))
    launch += command_checks.path_findings(cmd, method) + unreadable
    if cmd.tp_text is not None:
        launch.append(problem("launch.tp", f"the tensor-parallel size {cmd.tp_text!r} is not a whole number: "
                              "the server stops at argument parsing", wanted="e.g. --tp 8", found=cmd.tp_text))
    launch += method.findings
    context = LaunchContext(release, cmd, target, env, variables, parsed_by_release=reading.by == "release",
                            startup=reading.startup)
    for check in cmd.spec.launch_rules.checks:  # what the engine's server does with the whole command
        launch += check(context)
    doc = DoctorReport(cmd, report, release, variables, {k: env[k] for k in variables if k in env},
                       launch, target_config=target, probes=probes, strict=strict, gpu=gpu)
    stops = reading.startup is not None and reading.startup["status"] == "refused"  # before any weight
    stage(f"asking {release.label()}'s own loader about the drafter")
    runner = cmd.spec.launch_rules.runner(context) if cmd.spec.launch_rules.runner is not None else None
    doc.drafter = (_drafter_findings(cmd, release, target, as_given, env, runner)
                   if method.kind == command_checks.EAGLE and not stops else [])
    _judge_families(doc, context, tuple(as_given))
    return doc


def _quiet(what: str) -> None:
    """The stages told to no one (a pipe, --json): doctor's own, so it never calls back up."""


def _judge_families(doc: DoctorReport, context: LaunchContext, as_given: tuple[str, ...]) -> None:
    """Each unready family, met by this launch or not (patcher.doctor.meets)."""
    ctx = MeetContext(context, tuple(doc.findings()), doc.gpu, as_given, _drafter_config(doc.command))
    doc.families, lines = judge(doc.verify.statuses, ctx, doc.strict, doc.release.apply_command())
    doc.launch += lines


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


def _drafter_findings(cmd: LaunchCommand, release: Release, target: TargetConfig | None,
                      as_given: list[str], env: dict[str, str], runner: str | None) -> list[Finding]:
    if cmd.drafter is None or not Path(cmd.drafter).expanduser().is_dir():
        return []  # command_checks.path_findings said why
    folder = Path(cmd.drafter).expanduser()
    try:
        ckpt = read_checkpoint(folder)
        drafter = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    except PatcherError as exc:
        return [problem("drafter.unreadable", f"the drafter cannot be read: {exc.what}", wanted=exc.wanted,
                        found=exc.found, hint=exc.hint)]
    folder_of_target = Path(cmd.target).expanduser() if target is not None and cmd.target else None
    findings = check_drafter(ckpt, drafter, target, release, cmd.flags, target_folder=folder_of_target,
                             launch_argv=as_given, env=env, runner=runner)
    # setup.* repeat the family states verify reports above: each fact is shown once.
    return [_doctor_words(f) for f in findings if not f.code.startswith("setup.")]


def _ask_loader_ahead(cmd: LaunchCommand, release: Release, as_given: list[str]) -> None:
    """The drafter check will ask the release's loader: start it now, in its own interpreter, so the
    two engine imports (the parser's, the loader's) run side by side. The question is the one
    ``_drafter_findings`` asks where the line reads the same after the release's parse; where it
    does not, the answer is only a cache entry nobody reads."""
    if cmd.drafter is None or not Path(cmd.drafter).expanduser().is_dir() or release.site is None \
            or release.spec.drafter is None:
        return
    target = Path(cmd.target).expanduser() if cmd.target and Path(cmd.target).expanduser().is_dir() else None
    if target is not None and not (target / "config.json").is_file():
        target = None
    try:
        ckpt = read_checkpoint(Path(cmd.drafter).expanduser())
    except PatcherError:
        return  # the drafter check says why
    release_loader.ask_ahead(release.name, release.python, release.site,
                             loader_checks.question(ckpt, release, as_given, target))


def _drafter_config(cmd: LaunchCommand) -> DrafterConfig | None:
    """The drafter's config as the drafter check read it (None: no local drafter, or unreadable)."""
    if cmd.drafter is None or not Path(cmd.drafter).expanduser().is_dir():
        return None
    folder = Path(cmd.drafter).expanduser()
    try:
        return parse_drafter_config(read_config(folder), folder / "config.json")
    except PatcherError:
        return None


_TARGET_FLAG = re.compile(r"pass --target(?: KIMI_FOLDER)?")


def _doctor_words(f: Finding) -> Finding:
    """The drafter check's findings in doctor's terms: doctor has no --target option, it reads the
    target the command names (a local folder)."""
    said = "name the target's local folder in the command"
    return replace(f, message=_TARGET_FLAG.sub(said, f.message).replace("no --target:", "no local target folder:"),
                   hint=_TARGET_FLAG.sub(said, f.hint))
