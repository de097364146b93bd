"""Hostile and broken inputs: a clear error, the documented exit code, zero bytes changed.

Broken or unsafe diffs, symlinked targets, read-only and full disks, hand edits, unknown releases
on toy_copies' engine (editable installs and shadow copies: test_engines.py); every test hashes every file under
site-packages before and after (our own .kimi-patcher/ excluded). Then a released diff altered
after release, on a real SGLang release. Hostile files of our own bookkeeping: test_bookkeeping.py.
"""

from __future__ import annotations

import builtins
import errno
import os
import shutil
from pathlib import Path

import pytest

from patcher.core import write
from patcher.core.plan import State
from patcher.environment.engines import sha256_record
from patcher.errors import PatcherError
from tests.support import sglang_site as sglang_site_module
from tests.support import toy_copies
from tests.support.sglang_site import released_family
from tests.support.toy_copies import (
    ALL_FILES,
    CORE_DIFF,
    ENGINE,
    NONL_DIFF,
    OTHER_V1,
    PATCHED,
    PRISTINE,
    Env,
    kinds,
    leftovers,
    manifest,
    new_env,
    record,
    refused,
    run,
    snapshot,
    write_families,
)

base_venv = toy_copies.base_venv
sglang_site = sglang_site_module.sglang_site
sg = sglang_site_module.sg


TRIED: dict[str, list[str]] = {}


@pytest.fixture
def env(base_venv, tmp_path) -> Env:
    return new_env(base_venv, tmp_path / "e")


def add_family(env: Env, name: str, files: dict[str, str]) -> None:
    write_families(env.patches, {name: files})


BAD_DIFFS = {
    "truncated-hunk": ("\n".join(CORE_DIFF.splitlines()[:-2]) + "\n", "malformed"),
    "counts-too-small": (CORE_DIFF.replace("-2,7 +2,7", "-2,5 +2,5"), ""),
    "counts-too-large": (CORE_DIFF.replace("-2,7 +2,7", "-2,9 +2,9"), "malformed"),
    "binary": (("diff --git a/toyengine/core.py b/toyengine/core.py\nindex 1111111..2222222 100644\n"
                "Binary files a/toyengine/core.py and b/toyengine/core.py differ\n"), "binary"),
    "git-binary-patch": (("diff --git a/toyengine/core.py b/toyengine/core.py\nindex 1111111..2222222 100644\n"
                          "GIT binary patch\nliteral 5\nMcmZ?wbaZ6`00G(n2><{9\n\nliteral 5\nMcmZ?wbaZ6`00G(n2><{9\n\n"),
                         "binary"),
    "empty": ("", "no file"),
    "not-a-diff": ("hello\nworld\n", "no file"),
    "bad-line-in-hunk": (CORE_DIFF.replace("-    return 1", "?    return 1"), "malformed"),
    "crlf-converted": (CORE_DIFF.replace("\n", "\r\n"), "carriage returns"),
    "climbs-out-dotdot": (CORE_DIFF.replace("a/toyengine/core.py", "a/../evil.py").replace("b/toyengine/core.py",
                                                                                            "b/../evil.py"), "unsafe"),
    "climbs-out-inner-dotdot": (CORE_DIFF.replace("toyengine/core.py", "toyengine/../../evil.py"), "unsafe"),
    "absolute-in-a-b": (CORE_DIFF.replace("a/toyengine/core.py", "a//tmp/evil.py")
                        .replace("b/toyengine/core.py", "b//tmp/evil.py"), "unsafe"),
    "absolute-bare": (CORE_DIFF.replace("a/toyengine/core.py", "/tmp/evil.py").replace("b/toyengine/core.py",
                                                                                         "/tmp/evil.py"), ""),
    "other-package": (CORE_DIFF.replace("toyengine/core.py", "otherpkg/core.py"), "outside the engine"),
    "added-file": ("--- /dev/null\n+++ b/toyengine/new.py\n@@ -0,0 +1 @@\n+X = 1\n", "added"),
}


@pytest.mark.parametrize("case", sorted(BAD_DIFFS))
def test_broken_or_unsafe_diff_is_refused_before_any_write(env, case):
    diff, words = BAD_DIFFS[case]
    add_family(env, "bad", {"patch.toml": manifest(["bad.diff"]), "bad.diff": diff})
    rep = refused(env, 2)
    assert isinstance(rep, PatcherError) and words in rep.what, rep
    refused(env, 2, action="verify")
    TRIED.setdefault("inputs", []).append(f"diff:{case}")


# --- symlinks


def test_target_through_a_symlinked_directory_pointing_outside(env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(env.site / "toyengine"), outside / "toyengine")
    (env.site / "toyengine").symlink_to(outside / "toyengine")
    before_outside = snapshot(outside)
    rep = refused(env, 2)
    assert "leads outside site-packages" in rep.what, rep
    assert snapshot(outside) == before_outside


def test_target_that_is_a_symlink(env, tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_bytes(PRISTINE["toyengine/core.py"])
    (env.site / "toyengine/core.py").unlink()
    (env.site / "toyengine/core.py").symlink_to(outside)
    rep = refused(env, 2)
    assert "leads outside" in rep.what or "symlink" in rep.what, rep
    assert outside.read_bytes() == PRISTINE["toyengine/core.py"]
    # A symlink to a file inside site-packages is refused too: we never write through symlinks.
    (env.site / "toyengine/core.py").unlink()
    shutil.copy(outside, env.site / "toyengine/core_real.py")
    (env.site / "toyengine/core.py").symlink_to("core_real.py")
    rep = refused(env, 2)
    assert "symlink" in rep.what, rep
    assert "--link-mode=copy" in rep.hint, rep.hint  # uv's symlink mode: the reinstall that works


def test_hardlinked_files_are_replaced_not_written_through(env, tmp_path):
    """uv installs by hard links into its cache (vLLM's own image: uv pip install --system): apply
    writes a new file and renames it into place, so the cache, and every venv sharing it, keeps
    the published bytes; revert puts them back in the site."""
    cache = tmp_path / "uv-cache"
    cache.mkdir()
    for rel in ("toyengine/core.py", "toyengine/other.py"):
        os.link(env.site / rel, cache / rel.replace("/", "_"))
    assert run("apply", env.opts())[0] == 0
    assert (env.site / "toyengine/core.py").read_bytes() != PRISTINE["toyengine/core.py"]
    for rel in ("toyengine/core.py", "toyengine/other.py"):
        assert (cache / rel.replace("/", "_")).read_bytes() == PRISTINE[rel]
        assert (env.site / rel).stat().st_ino != (cache / rel.replace("/", "_")).stat().st_ino
    assert run("revert", env.opts())[0] == 0
    assert (env.site / "toyengine/core.py").read_bytes() == PRISTINE["toyengine/core.py"]


# --- read-only and full disks


def _deny_writes(monkeypatch, root: Path) -> None:
    """Simulate a read-only mount under ``root`` (tests run as root, which ignores mode bits)."""
    root = Path(os.path.realpath(root))

    def inside(p) -> bool:
        try:
            Path(os.path.realpath(os.fspath(p))).relative_to(root)
        except (ValueError, TypeError):
            return False
        return True

    def ro(p):
        return PermissionError(errno.EROFS, "Read-only file system", os.fspath(p))

    real_open, real_os_open = builtins.open, os.open

    def fake_open(file, mode="r", *a, **kw):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+") and inside(file):
            raise ro(file)
        return real_open(file, mode, *a, **kw)

    def fake_os_open(path, flags, *a, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and inside(path):
            raise ro(path)
        return real_os_open(path, flags, *a, **kw)

    def guard(real, nargs=1, must_exist=True):
        def fake(*a, **kw):
            for p in a[:nargs]:
                if inside(p) and (not must_exist or os.path.lexists(p)):
                    raise ro(p)
            return real(*a, **kw)
        return fake

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "mkdir", guard(os.mkdir, must_exist=False))
    monkeypatch.setattr(os, "replace", guard(os.replace, 2, must_exist=False))
    monkeypatch.setattr(os, "rename", guard(os.rename, 2, must_exist=False))
    monkeypatch.setattr(os, "unlink", guard(os.unlink))
    monkeypatch.setattr(os, "rmdir", guard(os.rmdir))
    monkeypatch.setattr(os, "chmod", guard(os.chmod))


def test_read_only_site_packages(env, monkeypatch):
    _deny_writes(monkeypatch, env.site)
    rep = refused(env, 2)
    assert "cannot write" in rep.what or "failed" in rep.what, rep
    # a read-only file system is no question of which user runs it (issue 42)
    assert "read-only" in rep.hint and "user that owns" not in rep.hint, rep.hint
    rep = refused(env, 2, action="revert")


def test_read_only_engine_folder_with_writable_bookkeeping(env, monkeypatch):
    """Our folder exists and is writable (created earlier, or a bind mount), the engine's is not."""
    (env.site / write.DIRNAME).mkdir()
    _deny_writes(monkeypatch, env.site / "toyengine")
    rep = refused(env, 2)
    assert isinstance(rep, PatcherError), rep
    # Nothing was written, so nothing may be left that makes the next runs claim an interrupted run
    # or crash on a roll-back they cannot do.
    refused(env, 2)
    _, rep = run("verify", env.opts())
    assert not [n for n in rep.notes if n.startswith("interrupted")], rep.notes


def _count_writes(env: Env, monkeypatch) -> int:
    probe = env.copy(env.venv.parent / "count")
    calls = []
    real = write._write_file
    monkeypatch.setattr(write, "_write_file", lambda *a, **kw: (calls.append(a[0]), real(*a, **kw))[1])
    assert run("apply", probe.opts())[0] == 0
    monkeypatch.setattr(write, "_write_file", real)
    return len(calls)


@pytest.mark.parametrize("mode", ["once", "from-then-on"])
def test_full_disk_at_every_write(env, tmp_path, monkeypatch, mode):
    """ENOSPC on the N-th file write (``once``), or on it and every later one (a disk that stays full)."""
    assert run("apply", env.opts(only=("toyengine/crlf",)))[0] == 0  # a state file exists too
    total = _count_writes(env, monkeypatch)
    assert total >= 4
    real = write._write_file
    for n in range(total):
        e = env.copy(tmp_path / f"n{n}")
        calls = []

        def full(path, *a, _n=n, _calls=calls, **kw):
            _calls.append(path)
            if len(_calls) - 1 == _n or (mode == "from-then-on" and len(_calls) - 1 > _n):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            return real(path, *a, **kw)

        monkeypatch.setattr(write, "_write_file", full)
        try:
            rep = refused(e, 2, ignore_pyc=True)
        except AssertionError as exc:
            raise AssertionError(f"ENOSPC ({mode}) at write {n} ({calls[n]}): {exc}") from None
        finally:
            monkeypatch.setattr(write, "_write_file", real)
        assert "disk is full" in rep.what, rep
        assert not leftovers(e), f"ENOSPC ({mode}) at write {n}: left {leftovers(e)}"
        assert kinds(e, ALL_FILES) == {"toyengine/core.py": "old", "toyengine/other.py": "old",
                                       "toyengine/crlf.py": "new"}
        code, rep = run("apply", e.opts())  # space again: the next run completes
        assert code == 0 and kinds(e, ALL_FILES) == {r: "new" for r in ALL_FILES}
    TRIED.setdefault("inputs", []).append(f"ENOSPC {mode} x{total}")


# --- line endings, manifests, installs that are not plain wheels, edits, unknown releases


def test_crlf_target_keeps_crlf(env):
    code, rep = run("apply", env.opts(only=("toyengine/crlf",)))
    assert code == 0 and rep.changed == ["toyengine/crlf.py"]
    assert env.read("toyengine/crlf.py") == PATCHED["toyengine/crlf.py"]  # every line still ends in CRLF
    code, rep = run("revert", env.opts())
    assert code == 0 and sha256_record(env.read("toyengine/crlf.py")) == record(env)["toyengine/crlf.py"]


def test_file_without_final_newline(env):
    code, rep = run("apply", env.opts(only=("toyengine/nonl",)))
    assert code == 0 and env.read("toyengine/nonl.py") == PATCHED["toyengine/nonl.py"]
    code, rep = run("revert", env.opts())
    assert code == 0 and env.read("toyengine/nonl.py") == PRISTINE["toyengine/nonl.py"]
    # A diff that says the last line HAS a newline does not fit (no fuzz): a conflict, nothing written.
    (env.patches / ENGINE / "nonl" / "nonl.diff").write_text(NONL_DIFF.replace("\\ No newline at end of file\n", ""))
    rep = refused(env, 1, only=("toyengine/nonl",))
    assert rep.statuses[0].state is State.CONFLICT


@pytest.mark.parametrize("ranges", [(">=1.0,<2.0", ">=1.5,<3.0"), (">1.0,<2.0", ">1.0,<1.5")],
                         ids=["shared-boundary", "exclusive-bounds"])
def test_manifest_with_overlapping_ranges(env, ranges):
    toml = manifest(["core.diff"], ranges[0]) + (f'\n[[variant]]\nid = "v2"\nversions = "{ranges[1]}"\n'
                                                 'diffs = ["core.diff"]\n')
    add_family(env, "overlap", {"patch.toml": toml, "core.diff": CORE_DIFF})
    rep = refused(env, 2)
    assert "overlap" in rep.what, rep


def test_file_edited_by_hand_is_a_conflict(env):
    # The second file of the two-file family, inside its hunk: core.py would apply, other.py does not.
    (env.site / "toyengine/other.py").write_text(OTHER_V1.replace("X = 1", "X = 3"))
    rep = refused(env, 1)
    pair = next(s for s in rep.statuses if s.family.id == "toyengine/pair")
    assert pair.state is State.CONFLICT and rep.changed == [] and "nothing was written" in rep.notes[0]
    refused(env, 1, action="verify")


def _set_version(env: Env, version: str) -> None:
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    meta = (info / "METADATA").read_text()
    (info / "METADATA").write_text(meta.replace("Version: 1.0", f"Version: {version}"))
    info.rename(info.with_name(f"{ENGINE}-{version}.dist-info"))


def test_release_with_no_variant(env):
    _set_version(env, "5.0")
    rep = refused(env, 1)
    assert {s.state for s in rep.statuses} == {State.UNKNOWN}, rep.statuses
    assert rep.changed == []


# --- a released diff altered after release, on a real SGLang release


@pytest.mark.wheels
@pytest.mark.parametrize("alteration", ["crlf", "lone-cr", "truncated"])
def test_released_diff_altered_after_release_is_detected_before_writing(sg, tmp_path, alteration):
    import io

    from patcher.cli.main import main

    patches = released_family(tmp_path)
    diff = patches / "sglang" / "eagle3-drafter-keys" / "v1.diff"
    text = diff.read_bytes()
    diff.write_bytes({"crlf": text.replace(b"\n", b"\r\n"), "lone-cr": text.replace(b"\n", b"\r\n", 1),
                      "truncated": b"\n".join(text.split(b"\n")[:-4]) + b"\n"}[alteration])
    before = snapshot(sg)
    for command in ("apply", "verify", "revert"):
        out, err = io.StringIO(), io.StringIO()
        code = main([command, "--engine", "sglang", "--site", str(sg), "--patches", str(patches), "--no-probes"],
                    out, err)
        assert code == 2, (command, code, out.getvalue(), err.getvalue())
        assert "v1.diff" in err.getvalue() and err.getvalue().startswith("error:"), err.getvalue()
    assert snapshot(sg) == before
    # Our folder may hold the lock; no journal, backup or state was written.
    assert [p.name for p in (sg / write.DIRNAME).rglob("*") if not p.name.endswith(".lock")] == [] \
        if (sg / write.DIRNAME).exists() else True


@pytest.fixture(scope="module", autouse=True)
def _campaign_summary():
    yield
    toy_copies.print_campaign(TRIED)
