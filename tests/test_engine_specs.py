"""patcher/engine_specs/: one description per engine, and the facts every other part reads from it
agree with the patch set on disk (a description that drifted from releases.txt would send a
release to no CPU env line, or list an engine whose patches do not exist)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.core import manifest, matrix
from patcher.doctor import command_checks
from patcher.maintainer import cpu_env

ENGINES = engine_specs.NAMES
# The engines with each capability (issue 59): a CPU env, a launch reading, environment rules.
WITH_CPU_ENV = [s.name for s in engine_specs.ALL if s.cpu_env_lines]
WITH_LAUNCH = [s.name for s in engine_specs.ALL if s.launch is not None]
WITH_ENV = [s.name for s in engine_specs.ALL if s.env is not None]


def test_every_engine_with_patches_has_a_description_and_no_other():
    on_disk = sorted(p.parent.name for p in manifest.PATCHES.glob("*/releases.txt"))
    assert sorted(ENGINES) == on_disk
    assert all(engine_specs.spec(n).name == n for n in ENGINES)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_covers_from_its_first_release(engine):
    releases = matrix.releases(engine)
    assert releases, f"{engine}: releases.txt lists nothing"
    assert min(map(Version, releases)) == Version(engine_specs.spec(engine).first_covered)


@pytest.mark.parametrize("engine", WITH_CPU_ENV)
def test_every_release_from_the_first_cpu_env_line_on_is_in_exactly_one_line(engine):
    """The window starts at the oldest covered release; from the first CPU env line on, every
    covered release imports in exactly one line (which older releases have none, and that every
    probed entry still has a release with one: test_probes_cpu.py::test_every_probed_entry_is_covered)."""
    spec = engine_specs.spec(engine)
    releases = matrix.releases(engine)
    reached = [v for v in releases if Version(v) >= Version(spec.cpu_env_lines[0].first)]
    assert reached
    for version in reached:
        holding = [line.name for line in spec.cpu_env_lines
                   if Version(line.first) <= Version(version)
                   and (line.last is None or Version(version) <= Version(line.last)
                        or Version(version).base_version == Version(line.last).base_version)]
        assert len(holding) == 1, (engine, version, holding)
        assert cpu_env.line_for(engine, version) == holding[0]


@pytest.mark.parametrize("engine", WITH_CPU_ENV)
def test_each_cpu_env_line_has_its_lock_file_and_lines_follow_each_other(engine):
    lines = engine_specs.spec(engine).cpu_env_lines
    assert Version(lines[0].first) >= Version(engine_specs.spec(engine).first_covered)
    assert lines[-1].last is None, "the newest line is open-ended: a new release lands in it"
    for line in lines:
        assert line.lock.is_file(), line.name
    every = [line.name for s in engine_specs.ALL for line in s.cpu_env_lines]
    assert len(every) == len(set(every)), "a line's name is its env folder: two engines may not share one"
    for older, newer in zip(lines, lines[1:]):
        assert older.last is not None and Version(older.last) < Version(newer.first)


@pytest.mark.parametrize("engine", WITH_ENV)
def test_environment_facts_are_well_formed(engine):
    spec = engine_specs.spec(engine)
    assert spec.env is not None and spec.env.names and all(n.isupper() for n in spec.env.names)
    assert command_checks.variables(spec, None) == {}  # no install, nothing read


@pytest.mark.parametrize("engine", WITH_LAUNCH)
def test_launch_facts_are_well_formed(engine):
    for name, spellings in engine_specs.spec(engine).launch_rules.spellings.items():
        assert spellings and all(s.startswith("-") for s in spellings), name


@pytest.mark.parametrize("engine", ENGINES)
def test_registry_facts_are_well_formed(engine):
    spec = engine_specs.spec(engine)
    for arch, since in spec.registered_since.items():
        assert Version(since) >= Version(spec.first_covered), arch
