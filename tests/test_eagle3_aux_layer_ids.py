"""sglang/eagle3-aux-layer-ids: every hunk is caught by a probe, on a real import.

For one release per variant (the newest of its range) in its CPU import environment: the
probes must fail on the published files, pass with the whole variant, and fail with any one
hunk left out. The files are written straight into the environment's site-packages from the
wheel's own sources and restored afterwards; every probe run is a fresh interpreter with an
empty bytecode cache, so no stale .pyc can answer for the source under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import hunks, manifest, matrix
from patcher.maintainer import cpu_env, wheels

FAMILY = next(f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == "eagle3-aux-layer-ids")

_RUNNER = r"""
import importlib, importlib.util, json, sys
folder, probes = sys.argv[1], json.loads(sys.argv[2])
spec = importlib.util.spec_from_file_location("family_probes", folder + "/probes.py")
checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checks)
out = {}
for p in probes:
    try:
        for m in p["preload"]:
            importlib.import_module(m)
        getattr(checks, p["check"])(importlib.import_module(p["module"]))
        out[p["id"]] = "passed"
    except AssertionError as e:
        out[p["id"]] = "failed: " + str(e)[:300]
    except BaseException as e:
        out[p["id"]] = f"error: {type(e).__name__}: {e}"[:300]
print("PROBES " + json.dumps(out))
"""


def _newest_per_variant() -> list[tuple[str, str]]:
    out = []
    for variant in FAMILY.variants:
        mine = [v for v in matrix.releases("sglang") if manifest.contains(variant.versions, Version(v))]
        out.append((variant.id, max(mine, key=Version)))
    return out


# A CI sample: v5 (0.5.9: the graph re-calls, the moved hook call and the id rule) and v7
# (the rule alone). Every variant: `python benchmarks/probe_mutation.py --family eagle3-aux-layer-ids`.
CASES = [(v, r) for v, r in _newest_per_variant() if v in ("v5", "v7")]


def _site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def _run_probes(python: Path, variant_id: str) -> dict[str, str]:
    probes = [{"id": p.id, "module": p.module, "check": p.check, "preload": list(p.preload)}
              for p in FAMILY.probes if variant_id in p.when]
    with tempfile.TemporaryDirectory() as pycache:
        env = dict(cpu_env.probe_env(), PYTHONPYCACHEPREFIX=pycache)
        proc = subprocess.run([str(python), "-c", _RUNNER, str(FAMILY.folder), json.dumps(probes)],
                              capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(),
                              timeout=cpu_env.PROBE_TIMEOUT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBES ")]
    assert lines, f"probe runner died: {proc.stderr[-2000:]}"
    return json.loads(lines[-1][len("PROBES "):])


def _write(site: Path, texts: dict[str, str]) -> None:
    for rel, text in texts.items():
        (site / rel).write_bytes(text.encode())  # exact bytes: no newline translation


def _patched(pristine: dict[str, str], patches, leave_out: tuple[str, int] | None) -> dict[str, str]:
    out = {}
    for fp in patches:
        keep = tuple(h for i, h in enumerate(fp.hunks) if (fp.path, i) != leave_out)
        out[fp.path] = hunks.join(hunks.apply(hunks.split(pristine[fp.path]), keep))
    return out


@pytest.mark.cpuenv
@pytest.mark.parametrize("variant_id,version", CASES, ids=[f"{v}-{r}" for v, r in CASES])
def test_probes_catch_every_hunk(variant_id, version):
    patches = FAMILY.patches[variant_id]
    tree = wheels.tree("sglang", version)
    pristine = {fp.path: (tree / fp.path).read_bytes().decode() for fp in patches}
    with cpu_env.using("sglang", version, log=lambda *a: None) as python:
        site = _site_packages(python)
        assert {rel: (site / rel).read_bytes().decode() for rel in pristine} == pristine, (
            "the environment's files are not the published ones (a previous run's leftovers?)")
        try:
            before = _run_probes(python, variant_id)
            assert before and any(r != "passed" for r in before.values()), (
                f"probes pass on the published {version}: {before}")
            _write(site, _patched(pristine, patches, None))
            full = _run_probes(python, variant_id)
            assert full and all(r == "passed" for r in full.values()), f"{variant_id} on {version}: {full}"
            survivors = []
            for fp in patches:
                for i in range(len(fp.hunks)):
                    _write(site, pristine)
                    _write(site, _patched(pristine, patches, (fp.path, i)))
                    res = _run_probes(python, variant_id)
                    if all(r == "passed" for r in res.values()):
                        survivors.append(f"{fp.path} hunk {i + 1}")
            assert not survivors, f"{variant_id} on {version}: no probe fails without {survivors}"
        finally:
            _write(site, pristine)


if __name__ == "__main__":  # pragma: no cover - a quick manual run: python tests/test_eagle3_aux_layer_ids.py
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
