"""Every hunk of sglang/eagle3-drafter-keys is caught by a probe (issue #13's bar).

For each variant, on a real release installed in a CPU environment: the pristine files must
fail a probe, the full patch must pass every probe, and each patch set with one hunk left out
must fail a probe (or fail to apply). The patched texts are built in memory from the release's
published files and imported under the engine's own module names from a temporary folder, so
the shared environment is never written to.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import hunks, manifest
from patcher.maintainer import cpu_env, wheels

FAMILY = "eagle3-drafter-keys"
# v1's newest release, and v2's first and newest (the MLA fc_norm and input_norm boundaries).
# One release per variant in CI; every release: `python benchmarks/probe_mutation.py --family eagle3-drafter-keys`.
CASES = [("v1", "0.5.11"), ("v2", "0.5.23")]

# Run in the env's interpreter: import each variant of a module from a file under the
# module's own name and run the family's probes on it. Prints {label: [failed probe ids]}.
_RUNNER = r"""
import importlib, importlib.util, json, sys
spec = json.loads(sys.argv[1])
ps = importlib.util.spec_from_file_location("_probes", spec["probes"])
probes = importlib.util.module_from_spec(ps)
ps.loader.exec_module(probes)
for mod in spec["preload"]:
    importlib.import_module(mod)
out = {}
for label, files in spec["cases"].items():
    failed = []
    mods = {}
    for name, path in files.items():
        s = importlib.util.spec_from_file_location(name, path)
        m = importlib.util.module_from_spec(s)
        sys.modules[name] = m
        s.loader.exec_module(m)
        mods[name] = m
    for pid, module, check in spec["checks"]:
        if module not in mods:
            continue
        try:
            getattr(probes, check)(mods[module])
        except Exception as e:
            failed.append(f"{pid}: {type(e).__name__}: {str(e)[:200]}")
    out[label] = failed
print("RESULT " + json.dumps(out))
"""


def _family():
    return next(f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == FAMILY)


def _module(rel: str) -> str:
    return rel[: -len(".py")].replace("/", ".")


def _texts(tree: Path, patches, leave_out: tuple[str, int] | None) -> dict[str, str] | None:
    """Each target file with every hunk applied except `leave_out`; None if it cannot apply."""
    out = {}
    for fp in patches:
        keep = tuple(h for i, h in enumerate(fp.hunks) if (fp.path, i) != leave_out)
        try:
            out[fp.path] = hunks.join(hunks.apply(hunks.split((tree / fp.path).read_text()), keep))
        except Exception:
            return None
    return out


@pytest.mark.cpuenv
@pytest.mark.parametrize("variant,version", CASES, ids=[f"{v}-{r}" for v, r in CASES])
def test_every_hunk_is_caught_by_a_probe(variant, version, tmp_path):
    fam = _family()
    assert fam.classify(Version(version)).id == variant
    patches = fam.patches[variant]
    tree = wheels.tree("sglang", version)
    checks = [(p.id, p.module, p.check) for p in fam.probes if variant in p.when]
    cases: dict[str, dict[str, str] | None] = {"pristine": {fp.path: (tree / fp.path).read_text() for fp in patches},
                                               "full": _texts(tree, patches, None)}
    for fp in patches:
        for i in range(len(fp.hunks)):
            cases[f"without {fp.path} hunk {i + 1}"] = _texts(tree, patches, (fp.path, i))
    # Finer than a hunk, issue #13's case: the stacked (q/k/v/gate/up) branch no longer records
    # the key it could not place, while everything else stays patched.
    full = cases["full"]
    assert full is not None
    llama = "sglang/srt/models/llama_eagle3.py"
    record = "                else:\n                    unmatched.append(ckpt_name)\n                break\n"
    assert full[llama].count(record) == 1
    unrecorded = full[llama].replace(record, "                break\n")
    cases["without the stacked-branch record"] = dict(full, **{llama: unrecorded})
    refused = [label for label, texts in cases.items() if texts is None]
    files = {}
    for label, texts in cases.items():
        if texts is None:
            continue
        files[label] = {}
        for rel, text in texts.items():
            path = tmp_path / label.replace(" ", "_").replace("/", "_") / Path(rel).name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            files[label][_module(rel)] = str(path)
    spec = {"probes": str(fam.folder / "probes.py"), "checks": checks, "cases": files,
            "preload": sorted({m for p in fam.probes for m in p.preload})}
    with cpu_env.using("sglang", version) as python:
        run = subprocess.run([str(python), "-c", _RUNNER, json.dumps(spec)], capture_output=True, text=True,
                             timeout=cpu_env.PROBE_TIMEOUT)
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, run.stderr[-3000:]
    failed = json.loads(line[0][len("RESULT "):])
    for label, bad in failed.items():  # the table: what caught each mutant (pytest -s shows it)
        sys.stderr.write(f"{variant} on {version}: {label}: {bad[0] if bad else 'NOT DETECTED'}\n")
    sys.stderr.write(f"{variant} on {version}: {len(files) - 2} mutants run, {len(refused)} refused to apply\n")
    assert failed["pristine"], "the probes pass on the published files"
    assert not failed.pop("full"), f"the full patch fails: {failed}"
    undetected = [label for label, bad in failed.items() if not bad]
    assert not undetected, f"mutants no probe catches: {undetected}"
