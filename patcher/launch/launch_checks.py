"""The environment findings of a whole launch command (``env.*``): every variable the engine module
says doctor reads, as the install declares it and as the release parses the value it is given.
The engine's own launch checks (vLLM's model runner, SGLang's fusion) live in its module
(``Launch.checks``); ``doctor`` calls both.
"""

from __future__ import annotations

from pathlib import Path

from patcher.engine_specs.base import EngineSpec, EnvParsed, EnvVar
from patcher.findings import Finding, hint, ok, problem
from patcher.release.launch_command import LaunchCommand


def variables(spec: EngineSpec, site: Path | None) -> dict[str, EnvVar]:
    """The variables doctor reads for the engine, as the install at ``site`` declares them."""
    return spec.env.read(site) if spec.env is not None and site is not None else {}


def _parsed(spec: EngineSpec, site: Path | None, name: str, env: dict[str, str]) -> EnvParsed | None:
    """The release's own parsing of ``env[name]``; None: not runnable here."""
    return spec.env.parse(site, name, env) if spec.env is not None and site is not None else None


def env_findings(variables: dict[str, EnvVar], env: dict[str, str],
                 cmd: LaunchCommand, site: Path | None = None) -> list[Finding]:
    out = []
    for name, var in variables.items():
        code = f"env.{name}"
        given = "in the command" if name in cmd.env else "in the environment"
        parsed = _parsed(cmd.spec, site, name, env) if name in env and var.read else None
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
