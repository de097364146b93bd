"""The README's Dockerfile step: `python -m patcher apply` with no --python, --site or --engine, run by
the engine venv's own interpreter, patches the engine installed there (engines.find's default)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support import toy
from tests.support.toy_venv import as_engine, site_of

ROOT = Path(__file__).resolve().parent.parent


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
