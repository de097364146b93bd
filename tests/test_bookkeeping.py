"""patcher/core/bookkeeping.py: our own bookkeeping (``<site>/.kimi-patcher/``: lock, journal, backups,
state) is untrusted input.

On a real published SGLang release (tests/support/bookkeeping_site.py), a forged journal must
not make recovery write outside site-packages, and malformed files of ours must give a one-line
error or a documented recovery, never a traceback, never a write outside RECORD. Arbitrary bytes
and JSON in each file (hypothesis): test_bookkeeping_properties.py. The figures of the
hostile-input campaign are printed at the end of the module.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from patcher.core import write
from patcher.environment.engines import sha256_record
from tests.support import bookkeeping_site
from tests.support.bookkeeping_site import (
    ENGINE,
    TARGET,
    VERSION,
    _plant,
    _release_site,
    assert_clean_error,
    run,
    snapshot,
)

release_site = bookkeeping_site.release_site
starts = bookkeeping_site.starts

pytestmark = pytest.mark.wheels

FIGURES = {"hostile inputs": 0, "tracebacks": 0, "writes outside RECORD": 0, "left unrevertable": 0}


@pytest.fixture(scope="module", params=[VERSION, "0.5.10.post1"])  # the two releases the hostile-input review tried
def attacked_site(request, tmp_path_factory) -> Path:
    return _release_site(tmp_path_factory, request.param)


@pytest.fixture
def box(release_site, tmp_path) -> Path:
    """tmp_path holding ``site`` (a copy of the release) and ``outside`` (a sentinel folder)."""
    shutil.copytree(release_site, tmp_path / "site")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "sentinel").write_bytes(b"untouched\n")
    return tmp_path


def plant_journal(site: Path, entries: list[dict], payload: bytes = b"planted\n") -> Path:
    txn = site / write.DIRNAME / f"{ENGINE}.txn"
    txn.mkdir(parents=True)
    (txn / "0.orig").write_bytes(payload)
    full = [dict({"old": sha256_record(payload), "new": sha256_record(b""), "backup": "0.orig", "mode": 0o644}, **e)
            for e in entries]
    (txn / "journal.json").write_text(json.dumps({"engine": ENGINE, "state_before": False, "files": full}))
    return txn


# --------------------------------------------------------------------------------------------
# 1. A forged journal: recovery writes only RECORD files inside site-packages, never through symlinks.

def _attack(box: Path, kind: str) -> tuple[list[dict], Path]:
    site, outside = box / "site", box / "outside"
    if kind == "dotdot":
        return [{"rel": os.path.relpath(outside / "x", site)}], outside / "x"
    if kind == "absolute":
        return [{"rel": str(outside / "x")}], outside / "x"
    if kind == "inner-dotdot":
        return [{"rel": "sglang/../../outside/x"}], outside / "x"
    if kind == "not-in-record":
        return [{"rel": "sglang/srt/models/new_module.py"}], site / "sglang/srt/models/new_module.py"
    if kind == "symlinked-dir":  # a RECORD file reached through a folder that now points outside
        models = site / "sglang/srt/models"
        shutil.move(str(models), outside / "models")
        models.symlink_to(outside / "models")
        (outside / "models" / "llama_eagle3.py").unlink()
        return [{"rel": TARGET}], outside / "models" / "llama_eagle3.py"
    if kind == "symlinked-file":
        (site / TARGET).unlink()
        (site / TARGET).symlink_to(outside / "y")
        return [{"rel": TARGET}], outside / "y"
    if kind == "backup-outside":  # a backup name that climbs out: an outside file moved into the engine
        (outside / "payload").write_bytes(b"planted\n")
        (site / TARGET).write_bytes(b"# edited\n")
        return [{"rel": TARGET, "backup": "../../../outside/payload"}], site / TARGET
    raise AssertionError(kind)


ATTACKS = ["dotdot", "absolute", "inner-dotdot", "not-in-record", "symlinked-dir", "symlinked-file", "backup-outside"]


@pytest.mark.parametrize("action", ["apply", "revert", "verify"])
@pytest.mark.parametrize("kind", ATTACKS)
def test_forged_journal_is_refused_and_changes_nothing(attacked_site, tmp_path, kind, action):
    box = tmp_path
    shutil.copytree(attacked_site, box / "site")
    (box / "outside").mkdir()
    (box / "outside" / "sentinel").write_bytes(b"untouched\n")
    entries, victim = _attack(box, kind)
    plant_journal(box / "site", entries)
    existed = victim.exists() or victim.is_symlink()
    before = snapshot(box)
    code, _, err = run(action, box / "site")
    FIGURES["hostile inputs"] += 1
    assert_clean_error(code, err)
    if not existed:
        assert not victim.exists(), f"{victim} was written"
    after = {k: v for k, v in snapshot(box).items() if not k.endswith(".lock")}
    assert after == {k: v for k, v in before.items() if not k.endswith(".lock")}, "something changed"


def test_symlinked_bookkeeping_folder_is_refused(box):
    site, outside = box / "site", box / "outside"
    (site / write.DIRNAME).symlink_to(outside, target_is_directory=True)
    (outside / f"{ENGINE}.json").write_text(json.dumps({"engine": ENGINE, "version": VERSION, "families": {}}))
    before = snapshot(box)
    for action in ("apply", "verify", "revert"):
        code, _, err = run(action, site)
        FIGURES["hostile inputs"] += 1
        assert_clean_error(code, err)
    assert snapshot(box) == before


def test_planted_symlink_at_a_temporary_name_is_not_followed(box):
    """A symlink where apply writes its temporary must be replaced, not written through."""
    site, outside = box / "site", box / "outside"
    tmp = write._tmp_for(site / TARGET)
    tmp.symlink_to(outside / "sentinel")
    code, _, err = run("apply", site)
    FIGURES["hostile inputs"] += 1
    assert code in (0, 1) and "Traceback" not in err, err
    assert (outside / "sentinel").read_bytes() == b"untouched\n"
    assert run("revert", site)[0] == 0


# --------------------------------------------------------------------------------------------
# 2. Malformed files of ours: one-line errors that say to delete them.


MALFORMED_CASES = [("state", b"[]"), ("state", b'{"families": []}'), ("journal", b"garbage"),
               ("journal", b'{"files": 3}'), ("journal", b"[1, 2]")]


@pytest.mark.parametrize("which,data", MALFORMED_CASES, ids=[f"{w}-{d.decode()}" for w, d in MALFORMED_CASES])
def test_malformed_state_and_journal_shapes_give_one_line_errors(starts, tmp_path, which, data):
    site = tmp_path / "site"
    shutil.copytree(starts["applied"], site)
    _plant(site, starts["applied"], which, ("bytes", data, []))
    FIGURES["hostile inputs"] += 1
    for action in ("verify", "apply", "revert") if which == "state" else ("apply", "revert"):
        code, _, err = run(action, site)
        assert_clean_error(code, err)
        assert "delete" in err and write.DIRNAME in err, err


@pytest.fixture(scope="module", autouse=True)
def _figures():
    yield
    print("\nbookkeeping campaign: " + ", ".join(f"{k}: {v}" for k, v in FIGURES.items()))


def test_a_journal_nothing_can_roll_back_is_said_alike_by_verify_apply_and_revert(box):
    """Issue 34 item 1: with a corrupt journal, verify said the next apply or revert rolls it back, and
    both exited 2. Now verify checks what they would, and all three say the same, with exit 2."""
    txn = box / "site" / write.DIRNAME / f"{ENGINE}.txn"
    txn.mkdir(parents=True)
    (txn / "journal.json").write_text("{not json")
    said = {action: run(action, box / "site") for action in ("verify", "apply", "revert")}
    for code, out, err in said.values():
        assert_clean_error(code, err)
        assert "rolls it back" not in out
    assert len({err.splitlines()[0] for _, _, err in said.values()}) == 1, said
