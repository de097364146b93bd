"""Every hunk of sm120-allreduce-fusion is caught by a probe, on a real import.

For each variant that keeps SGLang's own auto-enables off SM 12.x (v12-v14) or guards the
0.5.14+ resolver (v6-v11), on the newest release of its range installed in a CPU import
environment: the whole variant passes its probes, the pristine release fails them, and
each mutant that leaves one hunk out (the rest applied) fails a probe or fails to apply.
A hunk no probe notices would be a hunk nothing proves.
"""

from __future__ import annotations

import io

import pytest
from packaging.version import Version

from patcher import bytecode, engines, hunks, manifest, matrix, probes
from patcher.__main__ import main
from patcher.errors import HunkFailed
from patcher.maintainer import cpu_env
from patcher.plan import State, Status, decode, encode

ENGINE = "sglang"
FAMILY = "sm120-allreduce-fusion"
# A CI sample (about 4 minutes a variant on 2 cores): one auto-enable variant and one resolver
# guard. Every variant, every hunk: `python benchmarks/probe_mutation.py --family sm120-allreduce-fusion`.
CHECKED = ("v14", "v11")


def _family() -> manifest.Family:
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, (ENGINE,)) if f.name == FAMILY]
    return fam


def _newest(fam: manifest.Family, vid: str) -> str:
    (variant,) = [v for v in fam.variants if v.id == vid]
    return max((v for v in matrix.releases(ENGINE) if manifest.contains(variant.versions, Version(v))), key=Version)


def _probe(install: engines.Install, fam: manifest.Family, vid: str, files: dict[str, bytes]) -> list[dict]:
    """Write `files` into the install, drop their bytecode, run the variant's probes."""
    for rel, data in files.items():
        install.path(rel).write_bytes(data)
    bytecode.remove(install, list(files))
    st = Status(fam, State.APPLIED, "mutant under test", variant=vid)
    probes.run(install, [st])
    assert st.probes, f"no probe ran for {vid}"
    return st.probes


def _apply(pristine: dict[str, bytes], patches) -> dict[str, bytes]:
    out = dict(pristine)
    for fp in patches:
        out[fp.path] = encode(hunks.join(hunks.apply(hunks.split(decode(out[fp.path])), fp.hunks)))
    return out


def _failed(results: list[dict]) -> list[str]:
    return [f"{r['id']}: {r['detail']}" for r in results if r["status"] != "passed"]


@pytest.mark.cpuenv
@pytest.mark.parametrize("vid", CHECKED)
def test_every_hunk_is_caught(vid):
    fam = _family()
    version = _newest(fam, vid)
    patches = fam.patches[vid]
    with cpu_env.using(ENGINE, version) as python:
        main(["revert", "--engine", ENGINE, "--python", str(python), "--no-probes"], out=io.StringIO(),
             err=io.StringIO())  # a previous run's leftovers
        install = engines.find(ENGINE, python=str(python))
        pristine = {fp.path: install.read(fp.path) for fp in patches}
        assert all(install.pristine(rel, data) for rel, data in pristine.items()), "env is not pristine"
        try:
            whole = _probe(install, fam, vid, _apply(pristine, patches))
            assert not _failed(whole), f"{vid} on {version}: " + "; ".join(_failed(whole))
            assert _failed(_probe(install, fam, vid, pristine)), f"probes pass on pristine {version}"
            missed = []
            for i, fp in enumerate(patches):
                for j in range(len(fp.hunks)):
                    rest = [f if k != i else hunks.FilePatch(f.path, f.hunks[:j] + f.hunks[j + 1:])
                            for k, f in enumerate(patches)]
                    try:
                        mutant = _apply(pristine, rest)
                    except HunkFailed:
                        continue  # does not apply: caught
                    if not _failed(_probe(install, fam, vid, mutant)):
                        missed.append(f"{fp.path} hunk {j + 1} (@@ -{fp.hunks[j].old_start})")
            assert not missed, f"{vid} on {version}: no probe fails without " + ", ".join(missed)
        finally:
            for rel, data in pristine.items():
                install.path(rel).write_bytes(data)
            bytecode.remove(install, list(pristine))
