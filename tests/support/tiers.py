"""The default tier's real-wheel sample: the newest covered release of each CPU env line.

Those releases are what users move to, and one per line proves each lock file still imports
the engine. Every other release runs with ``pytest --full`` (tests/conftest.py).
"""

from __future__ import annotations

import os

import pytest
from packaging.version import Version

from patcher.core import manifest, matrix
from patcher.maintainer import cpu_env


def _newest_per_line() -> frozenset[tuple[str, str]]:
    newest: dict[str, tuple[str, str]] = {}
    for engine in manifest.ENGINES:
        for version in matrix.releases(engine):
            if not cpu_env.reaches(engine, version):
                continue
            line = cpu_env.line_for(engine, version)
            if line not in newest or Version(version) > Version(newest[line][1]):
                newest[line] = (engine, version)
    return frozenset(newest.values())


SAMPLE = _newest_per_line()


def release_param(engine: str, version: str, *more):
    """``engine, version, *more`` as a pytest param: default tier when in the sample, else full."""
    marks = () if (engine, version) in SAMPLE else (pytest.mark.full,)
    return pytest.param(engine, version, *more, marks=marks, id=f"{engine}-{version}")


def examples(ci: int) -> int:
    """Hypothesis examples for a property test: ``ci`` under CI (``CI`` set, as .ci/run runs),
    a tenth of it (at least 20) on a developer's run, where the suite must stay fast."""
    return ci if os.environ.get("CI") else max(20, ci // 10)
