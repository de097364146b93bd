"""The engine release ``drafter check|fix`` look at: the located install, or the one named.

``--python`` / ``--site`` locate the engine in another environment (``patcher.environment.engines.find``,
as ``actions.locate`` does); every family is then assessed on that install's files.
``--engine-version`` names a release instead (``release.from_version``: its published files as
the manifests declare them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patcher import engine_specs
from patcher.environment import engines
from patcher.errors import DrafterInputError, NotInstalled, PatcherError
from patcher.release.release import Release, from_install, from_version, located_by

Detect = Callable[[str | None, "str | None", "Path | None"], "Release | None"]


def drafter_detect(engine: str | None, python: str | None = None, site: Path | None = None) -> Release | None:
    """The installed release of ``engine`` (or of the first engine installed), or None.

    In this interpreter's environment a missing or broken engine only means "none installed":
    the check then runs on the drafter alone. An environment named with --python/--site must
    hold the engine: anything else is an error, not a silent fallback.
    """
    explicit = python is not None or site is not None
    names = [engine] if engine else sorted(engine_specs.NAMES)  # alphabetical, as the message below
    install, missing = engines.find_first(names, python=python, site=site, strict=explicit)
    if install is not None:
        # hints then name the same environment
        return replace(from_install(install), located_by=located_by(python, site))
    if explicit:
        if engine is None:
            where = f"site: {site}" if site is not None else f"python: {python}"
            raise NotInstalled(f"neither {' nor '.join(names)} is installed there",
                               wanted=f"a distribution of {' or '.join(names)}",
                               found=f"none ({where})", hint="pass the interpreter or site-packages of the "
                                                              "environment that runs the engine")
        assert missing is not None
        raise missing
    return None


def resolve_engine(name: str | None, version: str | None, detect: Detect,
                   python: str | None = None, site: Path | None = None) -> Release | None:
    """The release to check against: ``--engine-version`` over the located install, which is
    used as is only when it is that very release (its assessed family states say nothing
    about another)."""
    explicit = python is not None or site is not None
    try:
        detected = detect(name, python, site)
    except PatcherError:
        if version is None or explicit:
            raise
        # A broken install here must not block checking against a release named explicitly.
        detected = None
    if detected is not None and name is not None and detected.name != name:
        detected = None  # the caller's detector answered for another engine
    if version is None:
        if detected is not None:
            return detected
        return from_version(name, None) if name is not None else None
    try:
        wanted = Version(version)
    except InvalidVersion:
        raise DrafterInputError("--engine-version is not a version", wanted="e.g. 0.5.11 or 0.10.1.1",
                                found=repr(version)) from None
    engine = name or (detected.name if detected is not None else None)
    if engine is None:
        raise DrafterInputError("--engine-version needs --engine", wanted=f"--engine {'|'.join(engine_specs.NAMES)}",
                                found="no engine named and none installed")
    if detected is not None and detected.name == engine and detected.version == wanted:
        return replace(detected, source="installed+flags")
    return from_version(engine, wanted)
