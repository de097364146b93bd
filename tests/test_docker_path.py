"""The README's Dockerfile step: `python -m patcher apply` with no --python, --site or --engine, run by
the engine venv's own interpreter, patches the engine installed there (engines.find's default);
and `python -m patcher` as a container entrypoint runs it (no TTY, stdin closed): stdout is one
JSON document and the exit codes are the documented ones, on a real SGLang release.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.environment.engines import sha256_record
from tests.support import sglang_site as sglang_site_module
from tests.support import toy
from tests.support.sglang_site import REPO, SGLANG_FILES, released_family
from tests.support.toy_venv import as_engine, site_of

ROOT = Path(__file__).resolve().parent.parent
sglang_site = sglang_site_module.sglang_site
sg = sglang_site_module.sg


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


# --- the CLI as a container entrypoint runs it


def cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m patcher`` as a container entrypoint runs it: no TTY, stdin closed."""
    return subprocess.run([sys.executable, "-m", "patcher", *argv], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300, env=dict(os.environ, TERM="dumb"), check=False)


@pytest.mark.wheels
def test_cli_json_and_exit_codes_without_a_tty(sg, tmp_path):
    base = ["--engine", "sglang", "--site", str(sg), "--json", "--patches", str(released_family(tmp_path))]
    rec = {ln.split(",")[0]: ln.split(",")[1] for ln in (sg / "sglang-0.5.9.dist-info/RECORD").read_text().splitlines()}

    def family(proc) -> dict:
        (report,) = json.loads(proc.stdout)  # stdout is JSON and nothing else
        (fam,) = report["families"]
        assert report["exit"] == proc.returncode
        return fam

    p = cli("verify", *base, "--no-probes")
    assert p.returncode == 1 and family(p)["state"] == "pending" and p.stderr == "", p
    p = cli("apply", *base, "--dry-run", "--no-probes")
    assert p.returncode == 0 and family(p)["state"] == "pending", p
    assert sha256_record((sg / SGLANG_FILES[0]).read_bytes()) == rec[SGLANG_FILES[0]]
    p = cli("apply", *base, "--no-probes")
    assert p.returncode == 0 and family(p)["state"] == "applied", p
    assert json.loads(p.stdout)[0]["changed"] == list(SGLANG_FILES)
    # With probes: this partial tree (one module, no torch) cannot import the engine; whatever the
    # probe interpreter prints, stdout stays one JSON document and a failed probe is a non-zero exit.
    p = cli("verify", *base)
    fam = family(p)
    assert fam["state"] == "applied" and fam["probes"], p
    assert all(pr["status"] != "passed" for pr in fam["probes"])
    assert p.returncode == (1 if any(pr["status"] == "failed" for pr in fam["probes"]) else 0), p
    p = cli("verify", *base, "--strict")
    assert p.returncode == 1 and family(p)["state"] == "applied", p  # probes could not run: not fully proven
    # A hand edit inside the patched region: a conflict, exit 1, JSON still clean.
    f = sg / SGLANG_FILES[0]
    f.write_bytes(f.read_bytes().replace(b"unmatched = []", b"unmatched = list()", 1))
    p = cli("verify", *base, "--no-probes")
    assert p.returncode == 1 and family(p)["state"] == "conflict", p
    # An environment error: exit 2, the message on stderr, nothing on stdout that is not JSON.
    p = cli("verify", "--engine", "sglang", "--site", str(sg / "nowhere"), "--json")
    assert p.returncode == 2 and p.stderr.startswith("error:"), p
    assert p.stdout.strip() == "" or json.loads(p.stdout) is not None
    p = cli("verify", "--engine", "nonsense")
    assert p.returncode == 2 and p.stdout == "" and "invalid choice" in p.stderr, p
