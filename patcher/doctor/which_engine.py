"""Which engine a server command starts, and whether that is the engine installed where it runs:
the command read (``read_command``: an engine that states its launch reading by its spellings, one
that does not by its release's console scripts), a console command the release does not install
(``entry_findings``), and another engine than the one installed (``EngineMismatch``)."""

from __future__ import annotations

from pathlib import Path

from patcher import engine_specs
from patcher.doctor import command_checks
from patcher.environment import engines
from patcher.errors import NotInstalled, PatcherError
from patcher.findings import Finding, problem
from patcher.release.launch_command import LaunchCommand, interpreter_of, parse
from patcher.release.release import Release


def read_command(command: list[str], *, python: str | None = None, site: Path | None = None) -> LaunchCommand:
    """The server command as ``launch_command.parse`` reads it; where no engine that states its
    launch reading starts it, the console command of an installed engine without that capability,
    as its release's entry_points.txt declares it (else parse's usage error). The engine is looked
    for where --python/--site point, else beside the interpreter the command names by path, else here."""
    try:
        return parse(command)
    except PatcherError:
        if python is None and site is None:  # /venv/bin/plain-serve: that venv's, as for engines read by spellings
            named = interpreter_of(command)
            python = named if named is not None and Path(named).exists() else None
        scripts: dict[str, str] = {}
        for spec in engine_specs.ALL:
            if spec.launch is None:
                install, _ = engines.find_first([spec.name], python=python, site=site)
                declared = command_checks.console_scripts(install.dist_info) if install is not None else None
                scripts.update(dict.fromkeys(declared or (), spec.name))
        if not scripts:
            raise
        return parse(command, scripts)


def entry_findings(cmd: LaunchCommand, install: engines.Install, release: Release) -> list[Finding]:
    """A console command the release does not install (SGLang's ``sglang`` before 0.5.5), read
    from its ``entry_points.txt``: the line does not start."""
    spec = cmd.spec
    serve = next((s for s in spec.launch_rules.serve_commands if " ".join(s) == cmd.entry), None)
    scripts = command_checks.console_scripts(install.dist_info) if serve else None
    if serve is None or scripts is None or serve[0] in scripts:
        return []
    return [problem("launch.entry", f"{release.label()} has no '{cmd.entry}' (its entry_points.txt declares no "
                    f"'{serve[0]}' command): the command does not start",
                    wanted=f"python -m {spec.launch_rules.modules[0]} ..." if spec.launch_rules.modules else cmd.entry,
                    found=cmd.entry)]


class EngineMismatch(PatcherError):
    """The command starts one engine and the environment has only the other: no-go (exit 1)."""

    exit_code = 1

    def __init__(self, cmd: LaunchCommand, other: engines.Install, missing: NotInstalled) -> None:
        super().__init__(f"the command starts {cmd.engine}, but this environment has {other.engine} "
                         f"{other.version} and no {cmd.engine}",
                         wanted=f"{cmd.engine} installed where the command runs", found=missing.found,
                         hint="point --python/--site at the environment that runs the server")


def other_engine(engine: str, python: str | None, site: Path | None) -> engines.Install | None:
    return engines.find_first([n for n in engine_specs.NAMES if n != engine], python=python, site=site)[0]
