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

import pytest
from packaging.version import Version

from patcher import manifest, matrix
from patcher.__main__ import main
from patcher.maintainer import cpu_env


def _cover(engine: str) -> list[str]:
    fams = manifest.load_all(manifest.PATCHES, (engine,))
    need = {}  # (family, entry label) -> releases that exercise it
    for v in matrix.releases(engine):
        try:
            cpu_env.line_for(engine, v)
        except ValueError:
            continue  # no CPU env line reaches this release (see patcher/maintainer/cpu_envs/NOTES.md)
        for f in fams:
            entry = f.classify(Version(v))
            label = getattr(entry, "id", None)  # variant or upstream entry id; refused has none
            if label and any(label in p.when for p in f.probes):
                need.setdefault((f.id, label, str(entry.versions)), []).append(v)
    chosen: list[str] = []
    todo = dict(need)
    while todo:
        # the release covering most remaining entries; ties go to the newest
        counts = {}
        for key, vs in todo.items():
            for v in vs:
                counts[v] = counts.get(v, 0) + 1
        best = max(counts, key=lambda v: (counts[v], Version(v)))
        chosen.append(best)
        todo = {k: vs for k, vs in todo.items() if best not in vs}
    return sorted(chosen, key=Version)


CASES = [(e, v) for e in manifest.ENGINES for v in _cover(e)]


def cli(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, (json.loads(out.getvalue())[0] if out.getvalue().startswith("[") else {}), err.getvalue()


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", CASES, ids=[f"{e}-{v}" for e, v in CASES])
def test_probes_pass_on_real_import(engine, version):
    with cpu_env.using(engine, version) as env:
        _apply_probe_revert(engine, version, str(env))


def _apply_probe_revert(engine, version, python):
    cli("revert", "--engine", engine, "--python", python, "--no-probes")  # a previous run's leftovers
    code, report, err = cli("apply", "--engine", engine, "--python", python, "--json")
    assert report, err
    assert report["version"] == version
    ran = [(f["id"], p) for f in report["families"] for p in f["probes"]]
    assert ran, "no probe ran"
    bad = [f"{fid} {p['id']}: {p['status']}: {p['detail']}" for fid, p in ran if p["status"] != "passed"]
    assert not bad, "\n".join(bad)
    code, report, err = cli("revert", "--engine", engine, "--python", python, "--json")
    assert code == 0, err
