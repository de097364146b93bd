"""The life of an install, end to end on a real pip install of the toy engine: apply, verify,
re-apply, revert; a pip reinstall or upgrade; a hand edit; newer and untested releases; a second
copy of the engine earlier on the path. Bytecode across these steps: test_bytecode.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from patcher.core.plan import State
from patcher.environment.engines import sha256_record
from patcher.installer import actions
from tests.support import toy, toy_venv
from tests.support.toy_venv import state

env = toy_venv.env


def snapshot(root: Path) -> dict[str, str]:
    """Hash of every file under root except our own bookkeeping, to prove "zero bytes changed"."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".kimi-patcher" not in p.parts:
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_apply_verify_reapply_revert(env):
    python, wheel, opts, site = env
    before = snapshot(site)
    assert toy.run_value(python) == 1
    r = actions.verify(toy.ENGINE, opts)
    assert state(r).state is State.PENDING and r.exit_code(False) == 1

    r = actions.apply(toy.ENGINE, opts)
    assert r.changed == ["toyengine/core.py"]
    assert state(r).state is State.APPLIED
    (probe,) = state(r).probes
    assert isinstance(probe.pop("seconds"), float)  # the module's import time (-v, JSON)
    assert probe == {"id": "value-is-2", "module": "toyengine.core", "status": "passed", "detail": ""}
    assert r.exit_code(True) == 0
    assert toy.run_value(python) == 2

    core = site / "toyengine" / "core.py"
    mtime = core.stat().st_mtime_ns
    again = actions.apply(toy.ENGINE, opts)
    assert again.changed == [] and state(again).state is State.APPLIED
    assert core.stat().st_mtime_ns == mtime  # a second apply writes nothing

    r = actions.revert(toy.ENGINE, opts)
    assert r.changed == ["toyengine/core.py"] and r.exit_code(False) == 0
    assert sha256_record(core.read_bytes()) == [
        ln.split(",")[1] for ln in (site / "toyengine-1.0.dist-info" / "RECORD").read_text().splitlines()
        if ln.startswith("toyengine/core.py,")][0]
    assert toy.run_value(python) == 1
    after = snapshot(site)
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == \
           {k: v for k, v in before.items() if "__pycache__" not in k}


def test_upgrade_reinstall_is_lost_then_reapplied(env):
    python, wheel, opts, site = env
    actions.apply(toy.ENGINE, opts)
    toy.pip_install(python, wheel, "--force-reinstall")
    r = actions.verify(toy.ENGINE, opts)
    assert state(r).state is State.LOST and r.exit_code(False) == 1
    assert "was applied (variant v1 on 1.0)" in state(r).detail
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.APPLIED and toy.run_value(python) == 2


def test_hand_edited_file_is_a_conflict_and_untouched(env):
    python, wheel, opts, site = env
    core = site / "toyengine" / "core.py"
    core.write_text(toy.MODULE_V1.replace("return 1", "return 7"))
    before = snapshot(site)
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.CONFLICT and r.exit_code(False) == 1
    assert r.changed == [] and "nothing was written" in r.notes[0]
    assert snapshot(site) == before


def test_newer_release_with_the_fix_is_upstream(env, tmp_path):
    python, wheel, opts, site = env
    toy.pip_install(python, toy.build_wheel(tmp_path / "wheels", "2.0", toy.PATCHED))
    r = actions.verify(toy.ENGINE, opts)
    assert state(r).state is State.UPSTREAM and r.exit_code(True) == 0
    assert state(r).probes[0]["status"] == "passed"


def test_declared_upstream_release_without_the_fix_is_a_conflict(env, tmp_path):
    python, wheel, opts, site = env
    toy.pip_install(python, toy.build_wheel(tmp_path / "wheels", "2.0"))  # claims the fix, lacks it
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.CONFLICT and r.changed == []
    assert "should carry the upstream fix (toy/toy#2) but toyengine/core.py lacks 'return 2'" in state(r).detail


def test_untested_release_matching_a_pre_image_needs_a_flag(env, tmp_path):
    python, wheel, opts, site = env
    toy.pip_install(python, toy.build_wheel(tmp_path / "wheels", "3.0"))
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.UNKNOWN and r.changed == [] and r.exit_code(False) == 1
    assert "files match variant v1's pre-image byte for byte" in state(r).detail
    opts.allow_untested = True
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.APPLIED and state(r).untested
    assert r.exit_code(False) == 0 and r.exit_code(True) == 1  # --strict: untested is not fully patched
    assert toy.run_value(python) == 2


def test_untested_release_with_the_fix_is_upstream_by_content(env, tmp_path):
    python, wheel, opts, site = env
    toy.pip_install(python, toy.build_wheel(tmp_path / "wheels", "3.0", toy.PATCHED))
    r = actions.verify(toy.ENGINE, opts)
    assert state(r).state is State.UPSTREAM and "3.0 itself is not in our matrix" in state(r).detail


def test_second_copy_earlier_on_path_fails_the_probe(env, tmp_path, monkeypatch):
    python, wheel, opts, site = env
    actions.apply(toy.ENGINE, opts)
    shadow = tmp_path / "shadow"
    (shadow / "toyengine").mkdir(parents=True)
    (shadow / "toyengine" / "__init__.py").write_text("")
    (shadow / "toyengine" / "core.py").write_text(toy.PATCHED)  # even a "patched" copy is the wrong file
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    with pytest.raises(Exception) as exc:
        actions.verify(toy.ENGINE, opts)
    assert "is imported from" in exc.value.what and "not from the copy installed at" in exc.value.what
    assert exc.value.exit_code == 2
