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

from concurrent.futures import ThreadPoolExecutor


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="the full proof: also run the tests marked 'full' (every release, every probe, "
                          "the mutant samples); about 30 minutes on 2 cores")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full"):
        return
    kept, left = [], []
    for item in items:
        (left if item.get_closest_marker("full") else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _releases(item) -> set[tuple[str, str]]:
    """The (engine, release) pairs a test names as parameters."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    engine, version = params.get("engine"), params.get("version")
    return {(engine, version)} if isinstance(engine, str) and isinstance(version, str) else set()


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
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda ev: wheels.tree(*ev), todo))

