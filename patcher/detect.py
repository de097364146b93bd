"""The engine release ``drafter check|fix`` look at: located like the other commands do.

``--python`` / ``--site`` locate the engine in another environment (``patcher.engines.find``,
as ``actions.locate`` does); every family is then assessed on that install's files.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from . import engines
from .drafter.release import Release, from_install
from .errors import NotInstalled, PatcherError


def drafter_detect(engine: str | None, python: str | None = None, site: Path | None = None) -> Release | None:
    """The installed release of ``engine`` (or of the first engine installed), or None.

    In this interpreter's environment a missing or broken engine only means "none installed":
    the check then runs on the drafter alone. An environment named with --python/--site must
    hold the engine: anything else is an error, not a silent fallback.
    """
    explicit = python is not None or site is not None
    names = [engine] if engine else ["sglang", "vllm"]
    missing: NotInstalled | None = None
    for name in names:
        try:
            install = engines.find(name, python=python, site=site)
        except NotInstalled as exc:
            missing = exc
            continue
        except PatcherError:
            if explicit:
                raise
            continue
        release = from_install(install)
        if explicit:  # hints then name the same environment
            release = replace(release, located_by=f" --python {python}" if python else f" --site {site}")
        return release
    if explicit:
        if engine is None:
            where = f"site: {site}" if site is not None else f"python: {python}"
            raise NotInstalled("neither sglang nor vllm is installed there", wanted="an sglang or vllm distribution",
                               found=f"none ({where})", hint="pass the interpreter or site-packages of the "
                                                              "environment that runs the engine")
        assert missing is not None
        raise missing
    return None
