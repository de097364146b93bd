"""Test tiers and the wheel prefetch.

Two tiers (tests/README.md says which command proves what):

* ``pytest``: pure tests, toy virtualenvs, and a real-wheel sample: the newest release of each
  CPU env line applied, verified, reverted and probed on a real import, plus the state of
  every family on every covered release (the matrix check). Minutes with the caches warm.
* ``pytest --full``: adds the tests marked ``full``, the whole proof: every variant on every
  release it claims, every probed entry on a real import, the mutant samples, port's proofs.
  ``.ci/run`` runs the default tier, then ``pytest --full -m full`` (only what it added).

Wheels are fetched lazily by ``patcher.maintainer.wheels.tree``; this file only fetches, four at
a time, the releases the *selected* tests name as parameters, so a cold run does not download
them one test at a time, and ``--collect-only`` or a one-test ``-k`` fetches nothing else.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from patcher.core import manifest
from tests.support import progress


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="the full proof: also run the tests marked 'full' (every release, every probe, "
                          "the mutant samples); about 30 minutes on 2 cores")


@pytest.hookimpl(trylast=True)  # after the terminal plugin has made its reporter
def pytest_configure(config):
    """Each xdist worker past the first gets a set of CPU environments of its own
    (``KIMI_PATCHER_ENVS``): a worker swapping a release into a line would otherwise hold that line's
    lock while the other waits on it (issue 57: 1 of 2 cores busy through most of the full tier).
    The controller (or a run without xdist) names its terminal for the progress lines of wheel
    fetches and environment builds; xdist workers, started later, inherit the variable."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker not in (None, "gw0") and "KIMI_PATCHER_ENVS" not in os.environ:
        from patcher.maintainer.wheels import CACHE

        os.environ["KIMI_PATCHER_ENVS"] = str(CACHE / f"envs-{worker}")
    if hasattr(config, "workerinput") or progress.ENV in os.environ:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    where = progress.destination(bool(reporter is not None and reporter.isatty))
    if where:
        os.environ[progress.ENV] = where


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--full"):
        kept, left = [], []
        for item in items:
            (left if item.get_closest_marker("full") else kept).append(item)
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept
    _schedule_cpu_env_tests(items)


def _schedule_cpu_env_tests(items) -> None:
    """Real-import tests first, each release's tests together, in release order.

    Under pytest-xdist (``--dist loadgroup``, pyproject.toml) the tests of one release form one
    group, run by one worker, so its tests in a row (its probes, its loader grid, a mutant sample on
    it) swap it into the worker's CPU env once. Each worker has its own set of CPU envs
    (``pytest_configure``), so two workers never wait on one line's lock. They go first because
    they are the longest (tens of seconds to minutes each): started last, one of them would leave
    the other core idle at the end of the run. Without xdist the marks change nothing but the order."""
    from packaging.version import Version

    from patcher.maintainer import cpu_env

    def line_and_release(item) -> tuple[str, Version] | None:
        if not item.get_closest_marker("cpuenv"):
            return None
        for engine, version in _releases(item):
            try:
                return cpu_env.line_for(engine, version), Version(version)
            except ValueError:
                return None
        return None

    heavy = {}
    for item in items:
        where = line_and_release(item)
        if where is not None:
            heavy[item.nodeid] = where
            item.add_marker(pytest.mark.xdist_group(f"{where[0]}-{where[1]}"))
    order = {nodeid: i for i, nodeid in enumerate(sorted(heavy, key=lambda n: heavy[n]))}
    items.sort(key=lambda item: (0, order[item.nodeid]) if item.nodeid in order else (1, 0))


def _releases(item) -> set[tuple[str, str]]:
    """The (engine, release) pairs a test names as parameters: ``engine`` and ``version``, or a
    mutant sample's ``fam`` and ``variant`` (judged on the release patcher.maintainer.mutation picks)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    engine, version = params.get("engine"), params.get("version")
    if isinstance(engine, str) and isinstance(version, str):
        return {(engine, version)}
    fam, variant = params.get("fam"), params.get("variant")
    if isinstance(fam, manifest.Family) and isinstance(variant, manifest.Variant):
        from patcher.maintainer import mutation

        release = mutation.release_for(fam.engine, variant)
        return {(fam.engine, release)} if release else set()
    return set()


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    wanted = {ev for item in session.items if item.get_closest_marker("wheels") for ev in _releases(item)}
    if not wanted:
        return
    from patcher.maintainer import wheels

    todo = sorted(ev for ev in wanted if not (wheels.TREES / f"{ev[0]}-{ev[1]}" / ".complete").exists())
    if not todo:
        return
    wheels.CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    say = progress.say if os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0" else (lambda line: None)  # once
    say(f"fetching {len(todo)} published wheel(s) the selected tests need: "
                 f"{', '.join(f'{e} {v}' for e, v in todo)}")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda ev: wheels.tree(*ev), todo))
    say(f"fetched {len(todo)} wheel(s) in {time.monotonic() - t0:.0f} s")

