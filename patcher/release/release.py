"""The engine release a drafter is checked against, with the state of every patch family on it.

The family states are the single source of what a release does for EAGLE-3 on a Kimi target:
they come from the manifests (``patches/<engine>/*/patch.toml``), assessed on the located
install's files exactly as ``patcher verify`` assesses them (``patcher.core.plan.assess``, no
probes), or, for a release named only by ``--engine-version``, classified by the manifests'
version ranges (what the published files of that release would be). The drafter checks ask
this object; they never compare versions against a table of their own for anything the
manifests know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from patcher import engine_specs
from patcher.core import manifest
from patcher.core.manifest import Family, Refused
from patcher.core.plan import OK_STATES, State, Status, declared
from patcher.engine_specs.base import Ask, EngineSpec
from patcher.environment.engines import Install


@dataclass(frozen=True)
class FamilyState:
    """One family as ``patcher verify`` would report it on this release."""

    family: Family
    state: State  # a plain string is taken as the State it names
    detail: str
    hint: str = ""
    upstream_id: str = ""  # which [[upstream]] entry holds, when state is "upstream"
    use: str = ""  # for "refused": the release the manifest names instead

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", State(self.state))

    @classmethod
    def of(cls, st: Status, version: Version) -> FamilyState:
        """``patcher.core.plan``'s status of the family, as the drafter reads it."""
        entry = st.family.classify(version)
        return cls(st.family, st.state, st.detail, st.hint, st.upstream_id if st.state is State.UPSTREAM else "",
                   entry.use if isinstance(entry, Refused) else "")

    @property
    def ok(self) -> bool:
        return self.state in OK_STATES


@dataclass(frozen=True)
class Release(Ask):
    """The engine release a drafter is checked against; what the engines' rules ask of it is
    answered by ``Ask`` (engine_specs/base.py) from these fields."""

    name: str
    version: Version | None  # None: engine named by --engine but no release known
    source: str  # "installed" (located install), "flags" (--engine-version) or "installed+flags"
    families: tuple[FamilyState, ...] = ()
    site: Path | None = None  # the located install's site-packages, when there is one
    python: str | None = None  # the interpreter it was located by
    located_by: str = ""  # " --python X" / " --site Y" when the user named another environment
    # its engine's module: every engine-specific rule is asked of it, never of the name
    spec: EngineSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", engine_specs.spec(self.name))

    @property
    def proven(self) -> bool:
        """Whether the release is one whose published files the wheel tests read (releases.txt):
        only there is a rule of ours about it (``patcher.drafter.facts``) a proven fact. Elsewhere a
        rule is an extrapolation, and what it says is ``unknown``."""
        return self.version is not None and any(self.version in f.family.covered for f in self.families)

    def unproven_why(self) -> str:
        """Why a rule says nothing certain here, for an ``unknown`` finding's ``found`` line."""
        covered = sorted({v for f in self.families for v in f.family.covered})
        span = f"{covered[0]} to {covered[-1]}" if covered else "none"
        return (f"{self.label()} is not one of the releases patcher's rules are proven on "
                f"(those in VERSIONS.md: {span})")


def located_by(python: str | None, site: Path | None) -> str:
    """How the user named the environment, for the commands a hint prints ("" : this one's)."""
    return f" --python {python}" if python else f" --site {site}" if site else ""


def from_install(install: Install, source: str = "installed", patches: Path = manifest.PATCHES) -> Release:
    """The release on a located install, each family assessed on its files like ``verify`` does."""
    from patcher.core import write
    from patcher.core.plan import assess

    fams = manifest.load_all(patches, (install.engine,))
    return from_statuses(install, assess(install, fams, write.read_state(install)), source)


def from_statuses(install: Install, statuses: list[Status], source: str = "installed") -> Release:
    """The release as a verify report found it (doctor: the family states are computed once)."""
    states = [FamilyState.of(st, install.version) for st in statuses]
    return Release(install.engine, install.version, source, tuple(states), install.site, install.python)


def from_version(engine: str, version: Version | None, source: str = "flags",
                 patches: Path = manifest.PATCHES) -> Release:
    """A release named on the command line: its published files as the manifests declare them."""
    if version is None:
        return Release(engine, None, source)
    states = [FamilyState.of(declared(f, version), version) for f in manifest.load_all(patches, (engine,))]
    return Release(engine, version, source, tuple(states))
