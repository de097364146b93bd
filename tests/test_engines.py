"""patcher/environment/engines.py: which copy of the engine Python imports, found without importing it; an
editable install without published hashes (a conflict, nothing written), a copy without
dist-info shadowing the wheel, a second installed copy, and an unreadable site-packages each get a
clear error and zero bytes changed, or patch only the copy Python imports (toy_copies' engine,
every file hashed before and after)."""

from __future__ import annotations

import json
import re
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


def test_two_dist_infos_beside_the_package_are_refused_not_guessed(env):
    """pip's leftovers of an interrupted install (seen in our own CPU envs after a killed CI run): two
    dist-infos claim the one package folder. Which release its files are cannot be told; every command
    refuses, names both, and changes nothing."""
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    stale = env.site / f"{ENGINE}-0.9.dist-info"
    shutil.copytree(info, stale)
    meta = stale / "METADATA"
    meta.write_text(re.sub(r"(?m)^Version: .*$", "Version: 0.9", meta.read_text()))
    for action, code in (("apply", 2), ("verify", 2), ("revert", 2)):
        rep = refused(env, code, action=action)
        assert f"{ENGINE} is installed 2 times in {env.site}" in rep.what, rep
        assert "0.9 (toyengine-0.9.dist-info)" in rep.found and info.name in rep.found, rep.found
        assert "pip uninstall -y" in rep.hint, rep.hint


def test_one_dist_info_on_the_path_twice_is_one_install(env, tmp_path, monkeypatch):
    """The same site-packages under a second name (a venv's lib64 -> lib, on sys.path on some
    distributions) lists each dist-info twice: one install, not pip's leftovers."""
    alias = tmp_path / "alias"
    alias.symlink_to(env.site, target_is_directory=True)
    monkeypatch.setenv("PYTHONPATH", str(alias))
    code, rep = run("verify", env.opts())
    assert code == 1 and not isinstance(rep, PatcherError), rep  # pending, as without the alias
    assert rep.notes == [], rep.notes  # and no "another copy" of it


def test_unreadable_site_packages(env, tmp_path):
    code, rep = run("verify", actions.Options(site=tmp_path / "nowhere", patches=env.patches, probes=False))
    assert code == 2 and isinstance(rep, PatcherError)


def _files_at(site):
    from packaging.version import Version

    from patcher.environment.engines import Install

    rels = ["pkg/__init__.py", "pkg/models/a.py", "pkg/models/b.py", "pkg/c.py"]
    for rel in rels:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(rel)
    return Install("pkg", Version("1.0"), site, site / "pkg-1.0.dist-info", {r: "" for r in rels},
                   None, None, None, None)


def test_every_link_on_the_way_to_an_engine_file_is_refused_each_time_it_is_asked(tmp_path):
    """Install.path resolves each folder once (a scope reading walks thousands of files): a folder or
    file turned into a link after an earlier read is refused all the same, each in its own words, and a
    site-packages reached through a link (a venv's lib64) is no link below it."""
    real = tmp_path / "real-site"
    real.mkdir()
    (tmp_path / "lib64").symlink_to(real)
    install = _files_at(tmp_path / "lib64")
    assert install.read("pkg/models/a.py") == b"pkg/models/a.py"  # through the site's own link: fine
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text("theirs")
    (real / "pkg/c.py").unlink()
    (real / "pkg/c.py").symlink_to(outside / "a.py")
    with pytest.raises(PatcherError, match="leads outside site-packages"):
        install.path("pkg/c.py")
    (real / "pkg/c.py").unlink()
    (real / "pkg/c.py").symlink_to(real / "pkg/__init__.py")
    with pytest.raises(PatcherError, match="pkg/c.py is a symlink"):
        install.path("pkg/c.py")
    shutil.move(real / "pkg/models", real / "pkg/models-real")  # the folder read above, now a link inside
    (real / "pkg/models").symlink_to(real / "pkg/models-real")
    with pytest.raises(PatcherError, match="passes through a symlinked directory"):
        install.read("pkg/models/b.py")
    with pytest.raises(PatcherError, match="passes through a symlinked directory"):
        install.read("pkg/models/a.py")
