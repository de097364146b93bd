"""README promises that no other test checked, each on a real pip install of the toy engine.

Every test here was checked by breaking the code it guards (see the docstrings): a test that
still passes with its guarantee removed is a defect.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from patcher import manifest
from tests.support import toy, toy_venv
from tests.support.toy_venv import as_engine, site_of

ROOT = Path(__file__).resolve().parent.parent
venv = toy_venv.venv


# ------------------------------------------------------------------ requires: blocked, warning, --strict


# ------------------------------------------------------------------ file modes, revert safety, refusals


# ------------------------------------------------------------------ the Docker path and detect.py


def _engine_family(root: Path, engine: str) -> Path:
    fam = root / engine / "fix"
    fam.mkdir(parents=True)
    (fam / "patch.toml").write_text(toy.MANIFEST.replace("toyengine/", f"{engine}/"))
    (fam / "v1.diff").write_text(toy.DIFF.replace("toyengine/", f"{engine}/"))
    (fam / "probes.py").write_text(toy.PROBES)
    return root


def test_default_docker_path_patches_the_running_interpreters_engine(tmp_path, monkeypatch):
    """`python -m patcher apply` with no --python/--site/--engine, run by the venv's own python,
    finds the engine installed in that venv (the README's Dockerfile). Broken by: engines.find
    defaulting to another interpreter than sys.executable."""
    as_engine(monkeypatch, "sglang")
    venv = tmp_path / "venv"
    python = toy.make_venv_seeing_ours(venv)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    toy.pip_install(python, toy.build_wheel(wheels, "1.0"))
    patches = _engine_family(tmp_path / "patches", "sglang")
    (patches / "sglang" / "fix" / "probes.py").write_text(toy.PROBES.replace("toyengine", "sglang"))
    manifest = patches / "sglang" / "fix" / "patch.toml"
    manifest.write_text(manifest.read_text().replace('module = "toyengine.core"', 'module = "sglang.core"'))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([str(python), "-m", "patcher", "apply", "--patches", str(patches), "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (report,) = json.loads(run.stdout)  # --engine all: sglang only, vllm is not installed
    assert report["engine"] == "sglang" and report["python"] == str(python)
    assert report["site"] == str(site_of(python))
    assert report["families"][0]["probes"][0]["status"] == "passed"
    value = subprocess.run([str(python), "-c", "import sglang.core as c; print(c.value())"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert value == "2"


def test_detect_reports_the_installed_engine_and_its_key_family_state(tmp_path, monkeypatch):
    """patcher.detect.drafter_detect in the engine's own interpreter: the release, and a family's
    state from the shipped manifests (a release in an upstream range whose file holds the evidence:
    upstream; without it: conflict). Broken by: drafter_detect returning no state or looking the
    engine up in another interpreter."""
    as_engine(monkeypatch, "sglang")
    venv = tmp_path / "venv"
    python = toy.make_venv_seeing_ours(venv)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == "k25-aux-capture"]
    (entry,) = [u for u in fam.upstream if len(u.evidence) == 1 and u.since == "0.5.10"]
    (ev,) = entry.evidence  # that entry's proof, as a one-file release
    fixed = "".join(f"# {s}\n" for s in ev.contains).encode()
    release = entry.since
    sources = {"sglang/__init__.py": b"", ev.file: fixed}
    code = ("from patcher.detect import drafter_detect; r = drafter_detect({!r}); "
            "print(None if r is None else (r.name, str(r.version), r.state('k25-aux-capture')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def detect(engine):
        return subprocess.run([str(python), "-c", code.format(engine)], capture_output=True, text=True,
                              check=True, env=env, cwd=tmp_path).stdout.strip()

    assert detect(None) == "None"  # no engine installed in this interpreter
    toy.pip_install(python, toy.build_wheel(wheels, release, sources=sources))
    assert detect("sglang") == f"('sglang', '{release}', 'upstream')"
    assert detect(None) == detect("sglang")
    assert detect("vllm") == "None"
    toy.pip_install(python, toy.build_wheel(wheels, release, sources={**sources, ev.file: b"no fix\n"}),
                    "--force-reinstall")
    assert detect("sglang") == f"('sglang', '{release}', 'conflict')"  # claims the fix, lacks it


# ------------------------------------------------------------------ found by mutmut (issue 13, section 4)


