"""patcher/drafter/locate.py: the engine release and a family's state, read in the engine's own interpreter
(what `patcher drafter check` uses to name the release it checks against)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from patcher.core import manifest
from tests.support import toy
from tests.support.toy_venv import as_engine

ROOT = Path(__file__).resolve().parent.parent


def test_detect_reports_the_installed_engine_and_its_key_family_state(tmp_path, monkeypatch):
    """patcher.drafter.locate.drafter_detect in the engine's own interpreter: the release, and a family's
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
    code = ("from patcher.drafter.locate import drafter_detect; r = drafter_detect({!r}); "
            "print(None if r is None else (r.name, str(r.version), str(r.state('k25-aux-capture'))))")
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
