"""Session set-up: fetch every covered release's wheel in parallel before the tests need it.

A cold machine would otherwise download ~85 wheels one test at a time; four at once is
what the registry and two cores handle well. Each fetch is resumable (patcher/maintainer/wheels.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def pytest_collection_finish(session):
    if not any(item.get_closest_marker("wheels") or item.get_closest_marker("cpuenv") for item in session.items):
        return
    from patcher import manifest, matrix
    from patcher.maintainer import wheels

    todo = [(e, v) for e in manifest.ENGINES for v in matrix.releases(e)
            if not (wheels.TREES / f"{e}-{v}" / ".complete").exists()]
    if not todo:
        return
    wheels.CACHE.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda ev: wheels.tree(*ev), todo))
