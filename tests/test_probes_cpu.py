"""Real-import probes: every variant (and every upstream entry that has probes) is applied on
at least one real release installed in a CPU environment, and its probes must *pass*:
the patched module imports and behaves as patched, in a fresh interpreter.

Releases are chosen as a small cover: the fewest releases such that each variant and
probed upstream entry of each family is exercised once (the newest release of each range
is preferred, since that is what users move to).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.cli.main import main
from patcher.core import manifest, matrix
from patcher.maintainer import cpu_env
from tests.support import progress
from tests.support.probe_ids import expected
from tests.support.tiers import SAMPLE, release_param

# Covered releases no CPU env line reaches (patcher/maintainer/cpu_envs/NOTES.md): declared here,
# so a release silently falling out of the real-import proof fails test_every_probed_entry_is_covered.
WITHOUT_CPU_ENV = {"vllm": {"0.9.0", "0.9.0.1", "0.9.1", "0.9.2"}, "sglang": set()}


def _needs(engine: str, releases: list[str]) -> dict[tuple, list[str]]:
    """(family, entry label, range) -> the releases among ``releases`` that exercise its probes."""
    need: dict[tuple, list[str]] = {}
    for v in releases:
        for f in manifest.load_all(manifest.PATCHES, (engine,)):
            entry = f.classify(Version(v))
            label = getattr(entry, "id", None)  # variant or upstream entry id; refused has none
            if label and any(label in p.when for p in f.probes):
                need.setdefault((f.id, label, str(getattr(entry, "versions", ""))), []).append(v)
    return need


def _cover(engine: str) -> list[str]:
    need = _needs(engine, [v for v in matrix.releases(engine) if cpu_env.reaches(engine, v)])
    chosen: list[str] = []
    todo = dict(need)
    while todo:
        # the release covering most remaining entries; ties go to the newest
        counts = {}
        for vs in todo.values():
            for v in vs:
                counts[v] = counts.get(v, 0) + 1
        best = max(counts, key=lambda v: (counts[v], Version(v)))
        chosen.append(best)
        todo = {k: vs for k, vs in todo.items() if best not in vs}
    return sorted(chosen, key=Version)


# The cover in the full tier; the default tier's sample (newest of each env line) always.
CASES = sorted({(e, v) for e in manifest.ENGINES for v in _cover(e)} | SAMPLE, key=lambda ev: (ev[0], Version(ev[1])))


@pytest.mark.parametrize("engine", manifest.ENGINES)
def test_every_probed_entry_is_covered(engine):
    """The releases without a CPU env are exactly the declared ones, and every probed variant or
    upstream entry still has a release with one: nothing drops out of the proof unnoticed."""
    dropped = {v for v in matrix.releases(engine) if not cpu_env.reaches(engine, v)}
    assert dropped == WITHOUT_CPU_ENV[engine]
    everywhere = _needs(engine, matrix.releases(engine))
    covered = _needs(engine, [v for v in matrix.releases(engine) if v not in dropped])
    assert set(everywhere) == set(covered), sorted(set(everywhere) - set(covered))
    chosen = set(_cover(engine))
    assert all(chosen & set(vs) for vs in covered.values())


def cli(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, (json.loads(out.getvalue())[0] if out.getvalue().startswith("[") else {}), err.getvalue()


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", [release_param(e, v) for e, v in CASES])
def test_probes_pass_on_real_import(engine, version):
    with cpu_env.using(engine, version, log=progress.say) as env:
        _apply_probe_revert(engine, version, str(env))


def _ships(engine: str, version: str, module: str) -> bool:
    """Whether the published wheel has the module (a probe of a module it removed is 'not in release')."""
    from patcher.maintainer import wheels

    base = wheels.tree(engine, version) / Path(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _apply_probe_revert(engine, version, python):
    cli("revert", "--engine", engine, "--python", python, "--no-probes")  # a previous run's leftovers
    # A generous wall clock: one interpreter per probed module, two at a time on the CI kind.
    code, report, err = cli("apply", "--engine", engine, "--python", python, "--json", "--probe-timeout", "900")
    assert report, err
    assert report["version"] == version
    ran = [(f["id"], p) for f in report["families"] for p in f["probes"]]
    assert {(fid, p["id"]) for fid, p in ran} == expected(engine, version)  # from the manifests
    bad = [f"{fid} {p['id']}: {p['status']}: {p['detail']}" for fid, p in ran if p["status"] != "passed"
           and not (p["status"] == "not in release" and not _ships(engine, version, p["module"]))]
    assert not bad, "\n".join(bad)
    # After apply every family is ours or upstream's; only a refusal (decided by content, never
    # written) may remain, and then apply exits 1 as verify would, naming it.
    states = {f["id"]: f["state"] for f in report["families"]}
    assert set(states.values()) <= {"applied", "upstream", "refused"}, states
    refused = sorted(fid for fid, s in states.items() if s == "refused")
    assert (code, report["exit"]) == ((1, 1) if refused else (0, 0)), (code, err, refused)
    assert all(any(fid in r for r in report.get("reasons", [])) for fid in refused), report.get("reasons")
    code, report, err = cli("revert", "--engine", engine, "--python", python, "--json")
    assert code == 0, err
