"""patcher/environment/engines.py: which copy of the engine Python imports, found without importing it; an
editable install without published hashes (a conflict, nothing written), a copy without
dist-info shadowing the wheel, a second installed copy, and an unreadable site-packages each get a
clear error and zero bytes changed, or patch only the copy Python imports (toy_copies' engine,
every file hashed before and after)."""

from __future__ import annotations

import json
import shutil

import pytest

from patcher.errors import PatcherError
from patcher.installer import actions
from tests.support import toy_copies
from tests.support.toy_copies import ENGINE, PATCHED, Env, new_env, refused, run, snapshot

base_venv = toy_copies.base_venv


@pytest.fixture
def env(base_venv, tmp_path) -> Env:
    return new_env(base_venv, tmp_path / "e")


def test_editable_install_without_published_hashes_writes_nothing(env):
    """An editable install is an install (issue 42; tests/test_editable.py on real releases), but
    with no published hashes for its release nothing proves its files are as published: every
    family is a conflict, exit 1, and no byte changes."""
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///x", "dir_info": {"editable": True}}))
    rep = refused(env, 1)
    assert "ships no published hashes" in rep.install.truth, rep.install.truth
    assert {s.state.value for s in rep.statuses} == {"conflict"}, rep.statuses
    refused(env, 1, action="verify")
    refused(env, 0, action="revert")  # nothing of ours there: revert's goal holds


def test_shadow_copy_without_dist_info_on_pythonpath(env, tmp_path, monkeypatch):
    shadow = tmp_path / "shadow"
    shutil.copytree(env.site / "toyengine", shadow / "toyengine")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    before = snapshot(shadow)
    rep = refused(env, 2)
    assert "not from the copy installed at" in rep.what, rep
    assert snapshot(shadow) == before


def test_two_installed_copies_patch_only_the_imported_one(env, tmp_path, monkeypatch):
    shadow = tmp_path / "shadow"
    shutil.copytree(env.site / "toyengine", shadow / "toyengine")
    for info in env.site.glob(f"{ENGINE}-*.dist-info"):
        shutil.copytree(info, shadow / info.name)
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    before = snapshot(env.site)
    code, rep = run("apply", env.opts(probes=True))
    assert code == 0, rep
    assert snapshot(env.site) == before, "the copy Python does not import was modified"
    assert (shadow / "toyengine/core.py").read_bytes() == PATCHED["toyengine/core.py"]
    assert any(str(env.site) in n for n in rep.notes), rep.notes
    assert all(p["status"] == "passed" for s in rep.statuses for p in s.probes)


def test_unreadable_site_packages(env, tmp_path):
    code, rep = run("verify", actions.Options(site=tmp_path / "nowhere", patches=env.patches, probes=False))
    assert code == 2 and isinstance(rep, PatcherError)
