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

from patcher import engine_specs
from patcher.cli.main import main
from patcher.core import manifest, matrix
from patcher.environment import engines
from patcher.maintainer import cpu_env
from tests.support import progress, recorded
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


@pytest.mark.parametrize("engine", [s.name for s in engine_specs.ALL if s.cpu_env_lines])  # a CPU env: a capability
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
    """Recorded per input (``recorded.truth``: the release's files, the CPU env, all of our own
    files): a release whose inputs did not change is judged on the record; the default tier's
    sample runs the probes again and must find what is recorded. Only a passing run is recorded."""
    with cpu_env.using(engine, version, log=progress.say) as env:
        cli("revert", "--engine", engine, "--python", str(env), "--no-probes")  # a previous run's leftovers
        install = engines.find_first([engine], python=str(env))[0]
        assert install is not None and str(install.version) == version
        parts = [recorded.our_files(), *recorded.release_parts(install)]
        ran = recorded.truth("probes", parts, lambda: _judged(engine, version, _apply_probe_revert(engine, str(env))),
                             fresh=(engine, version) in SAMPLE)
    _judged(engine, version, ran)


def _ships(engine: str, version: str, module: str) -> bool:
    """Whether the published wheel has the module (a probe of a module it removed is 'not in release')."""
    from patcher.maintainer import wheels

    base = wheels.tree(engine, version) / Path(*module.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _apply_probe_revert(engine: str, python: str) -> dict:
    """apply with its probes, then revert: what the two said, in a form that is the same every run
    (no timings; a probe's detail only where it did not pass)."""
    # A generous wall clock: one interpreter per probed module, two at a time on the CI kind.
    code, report, err = cli("apply", "--engine", engine, "--python", python, "--json", "--probe-timeout", "900")
    assert report, err
    reverted, _, revert_err = cli("revert", "--engine", engine, "--python", python, "--json")
    refused = sorted(f["id"] for f in report["families"] if f["state"] == "refused")
    return {"version": report["version"], "code": code, "exit": report["exit"],
            "states": {f["id"]: f["state"] for f in report["families"]},
            "probes": [[f["id"], p["id"], p["status"], p["module"], "" if p["status"] == "passed" else p["detail"]]
                       for f in report["families"] for p in f["probes"]],
            "refused_named": all(any(fid in r for r in report.get("reasons", [])) for fid in refused),
            "revert": reverted, "revert_error": revert_err[-500:] if reverted else ""}


def _judged(engine: str, version: str, ran: dict) -> dict:
    assert ran["version"] == version
    assert {(fid, pid) for fid, pid, *_ in ran["probes"]} == expected(engine, version)  # from the manifests
    bad = [f"{fid} {pid}: {status}: {detail}" for fid, pid, status, module, detail in ran["probes"]
           if status != "passed" and not (status == "not in release" and not _ships(engine, version, module))]
    assert not bad, "\n".join(bad)
    # After apply every family is ours or upstream's; only a refusal (decided by content, never
    # written) may remain, and then apply exits 1 as verify would, naming it.
    assert set(ran["states"].values()) <= {"applied", "upstream", "refused"}, ran["states"]
    refused = sorted(fid for fid, s in ran["states"].items() if s == "refused")
    assert (ran["code"], ran["exit"]) == ((1, 1) if refused else (0, 0)), (ran["code"], refused)
    assert ran["refused_named"], refused
    assert ran["revert"] == 0, ran["revert_error"]
    return ran
