"""Which families a run acts on: --engine, --only and --skip resolved against the catalogue.

A name is a family id (``sglang/k25-aux-capture``) or a bare name (``k25-aux-capture``),
which selects that family in every engine that has it. A name that selects nothing, and
a family both selected and skipped, are usage errors: a run that silently acts on nothing
would report "ok" for work it never did.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from patcher import program
from patcher.core import manifest
from patcher.core.manifest import Family
from patcher.errors import SelectionError


def _named(every: tuple[Family, ...], name: str) -> list[Family]:
    return [f for f in every if name in (f.id, f.name)]


def _did_you_mean(every: tuple[Family, ...], name: str) -> str:
    known = sorted({f.id for f in every} | {f.name for f in every})
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else ""


def scope(engine: str, only: tuple[str, ...], skip: tuple[str, ...], patches: Path = manifest.PATCHES,
          engines: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The engines a run acts on, after checking every name; ``engine`` is --engine's value."""
    engines = manifest.ENGINES if engines is None else engines  # read at call time, not at import
    wanted = engines if engine == "all" else (engine,)
    mine = manifest.load_all(patches, wanted) if only or skip else ()
    every: tuple[Family, ...] = ()  # the other engines' families, loaded only to explain a name not here
    picked: dict[str, set[str]] = {"--only": set(), "--skip": set()}
    for flag, names in (("--only", only), ("--skip", skip)):
        for name in names:
            anywhere = _named(mine, name)
            if not anywhere:
                every = every or manifest.load_all(patches, engines)
                anywhere = _named(every, name)
            if not anywhere:
                raise SelectionError(f"{flag} {name}: no such patch family",
                                     wanted=f"an id from '{program.command('list')}'", found=name,
                                     hint=_did_you_mean(every, name))
            here = [f for f in anywhere if f.engine in wanted]
            if not here:
                raise SelectionError(f"{flag} {name} selects nothing with --engine {engine}",
                                     wanted=f"a {engine} family", found=", ".join(f.id for f in anywhere),
                                     hint=f"drop --engine {engine}, or name a {engine} family")
            picked[flag] |= {f.id for f in here}
    both = sorted(picked["--only"] & picked["--skip"])
    if both:
        raise SelectionError(f"--only and --skip both name {both[0]}", wanted="each family in at most one of them",
                             found=f"--only {both[0]} --skip {both[0]}",
                             hint="--only already leaves out every family it does not name")
    if only:
        return tuple(e for e in wanted if any(i.startswith(e + "/") for i in picked["--only"]))
    return wanted


def families(engine: str, only: tuple[str, ...], skip: tuple[str, ...], patches: Path,
             every_family: bool = False) -> tuple[Family, ...]:
    """The families of one engine a run acts on: those --only names, else the default ones
    (every one for revert, which must undo opt-in families too) minus --skip. The CLI
    checks the names first with scope(); this only refuses names no engine knows."""
    mine = manifest.load_all(patches, (engine,))
    for name in (*only, *skip):
        if not _named(mine, name) and not _named(manifest.load_all(patches), name):
            raise SelectionError(f"no patch family {name!r}", wanted=f"an id from '{program.command('list')}'",
                                 found=name)
    if only:
        return tuple(f for f in mine if any(n in (f.id, f.name) for n in only))
    return tuple(f for f in mine if (every_family or f.default) and not any(n in (f.id, f.name) for n in skip))
