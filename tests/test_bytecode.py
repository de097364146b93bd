"""patcher/core/bytecode.py: which pycs a patched file has, which are rebuilt in which mode, and that the
engine then runs the patched code.

Three levels: the functions on a folder laid out by hand (no interpreter), the rebuild's failure
paths with a fake interpreter, and apply on a real pip install of the toy engine, where CPython
itself says which bytecode it runs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from pathlib import Path

import pytest

from patcher.core import bytecode
from patcher.core.plan import State
from patcher.environment import engines
from patcher.installer import actions
from tests import test_plan
from tests.support import toy, toy_venv
from tests.support.toy_venv import family, install, only, site_of, state

venv = toy_venv.venv
env = toy_venv.env


# --- cached_files, shipped, remove: on a folder laid out by hand

TAG = "cpython-311"


def _pyc(path: Path, flags: int) -> Path:
    """A pyc header: magic, the PEP 552 flags word, then 8 bytes that are not zero (a hash or
    mtime+size), so a read of the wrong bytes cannot pass for the flags."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00\x00\r\n" + flags.to_bytes(4, "little") + b"\xff" * 8)
    return path


def _folder_install(tmp_path: Path, cache_tag: str | None = TAG) -> engines.Install:
    inst = test_plan.install(tmp_path, {test_plan.CORE: "X = 1\n", "toyengine/coremore.py": "Y = 1\n"})
    return dataclasses.replace(inst, cache_tag=cache_tag)


def test_cached_files_are_the_modules_pycs_of_every_tag_and_its_legacy_pyc(tmp_path):
    """Every tag and level of this module, the legacy pyc beside it; never another module's,
    even one whose name starts with this one's. Fast twin of test_pyc_of_other_tags_and_legacy_pyc_are_removed."""
    inst = _folder_install(tmp_path)
    cache = inst.site / "toyengine" / "__pycache__"
    ours = {_pyc(cache / f"core.{TAG}.pyc", 0), _pyc(cache / "core.cpython-399.opt-2.pyc", 0),
            _pyc(inst.site / "toyengine" / "core.pyc", 0)}
    _pyc(cache / f"coremore.{TAG}.pyc", 0)
    _pyc(cache / f"core_x.{TAG}.pyc", 0)
    assert sorted(bytecode.cached_files(inst, test_plan.CORE)) == sorted(ours)
    assert bytecode.cached_files(inst, "toyengine/absent.py") == []


def test_shipped_reads_level_and_mode_of_this_interpreters_pycs_only(tmp_path):
    """Level from the name (none, opt-1, opt-2), mode from the flags word (0/1/3, anything else
    timestamp); other tags and the legacy pyc are removed, never rebuilt. A pyc that cannot be read
    is skipped and the scan goes on."""
    inst = _folder_install(tmp_path)
    cache = inst.site / "toyengine" / "__pycache__"
    _pyc(cache / f"core.{TAG}.pyc", 1)
    _pyc(cache / f"core.{TAG}.opt-1.pyc", 3)
    _pyc(cache / f"core.{TAG}.opt-2.pyc", 0)
    _pyc(cache / "core.cpython-399.pyc", 1)
    _pyc(inst.site / "toyengine" / "core.pyc", 1)
    _pyc(cache / f"coremore.{TAG}.pyc", 2)  # damaged flags word
    src, more = str(inst.site / test_plan.CORE), str(inst.site / "toyengine/coremore.py")
    got = bytecode.shipped(inst, [test_plan.CORE, "toyengine/coremore.py"])
    assert sorted(got, key=lambda c: (c.source, c.optimize)) == [
        bytecode.Compiled(src, 0, "UNCHECKED_HASH"), bytecode.Compiled(src, 1, "CHECKED_HASH"),
        bytecode.Compiled(src, 2, "TIMESTAMP"), bytecode.Compiled(more, 0, "TIMESTAMP")]
    assert bytecode.shipped(_folder_install(tmp_path / "no-python", cache_tag=None), [test_plan.CORE]) == []


def test_shipped_skips_an_unreadable_pyc_and_reads_the_next(tmp_path, monkeypatch):
    inst = _folder_install(tmp_path)
    cache = inst.site / "toyengine" / "__pycache__"
    unreadable = cache / f"core.{TAG}.opt-1.pyc"
    unreadable.mkdir(parents=True)  # read_bytes() raises IsADirectoryError
    good = _pyc(cache / f"core.{TAG}.pyc", 1)
    monkeypatch.setattr(bytecode, "cached_files", lambda install, rel: [unreadable, good])
    assert bytecode.shipped(inst, [test_plan.CORE]) == [
        bytecode.Compiled(str(inst.site / test_plan.CORE), 0, "UNCHECKED_HASH")]


def test_remove_deletes_every_cached_pyc_and_a_vanished_one_is_no_error(tmp_path, monkeypatch):
    """Another process importing the engine may delete or rewrite a pyc between our listing and
    our unlink: that is not an error, and the rest still go."""
    inst = _folder_install(tmp_path)
    cache = inst.site / "toyengine" / "__pycache__"
    pycs = [_pyc(cache / f"core.{TAG}.pyc", 0), _pyc(cache / "core.cpython-399.pyc", 0),
            _pyc(cache / f"coremore.{TAG}.pyc", 0)]
    bytecode.remove(inst, [test_plan.CORE, "toyengine/coremore.py"])
    assert not any(p.exists() for p in pycs)
    gone, left = cache / f"core.{TAG}.opt-1.pyc", _pyc(cache / f"core.{TAG}.pyc", 0)
    monkeypatch.setattr(bytecode, "cached_files", lambda install, rel: [gone, left])
    bytecode.remove(inst, [test_plan.CORE])
    assert not left.exists()


def test_bytecode_cached_files_honours_the_prefix(tmp_path):
    """The unit the pycache_prefix scenario rests on. Broken by: ignoring install.pycache_prefix."""
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "m.py").write_text("x = 1\n")
    prefix = tmp_path / "prefix"
    mirrored = prefix / str((site / "pkg").resolve()).lstrip("/")
    mirrored.mkdir(parents=True)
    (mirrored / "m.cpython-311.pyc").write_bytes(b"x")
    (mirrored / "mm.cpython-311.pyc").write_bytes(b"x")  # another module sharing the prefix of the name
    inst = engines.Install("pkg", None, site, site, {}, None, None, None, str(prefix))  # type: ignore[arg-type]
    assert bytecode.cached_files(inst, "pkg/m.py") == [mirrored / "m.cpython-311.pyc"]


def test_cached_files_under_the_prefix_mirror_the_imported_path_and_the_real_one(tmp_path):
    """CPython writes under sys.pycache_prefix the path it imported from, not resolved
    (importlib's cache_from_source); a process that imports through the real path writes there.
    Both go. Before: only the resolved mirror (the symlinked-venv case of
    test_pycache_prefix_bytecode_is_removed left the stale unchecked-hash pyc in place and the
    engine ran the old code). A mutmut run's survivor
    cached_files lstrip("XX/XX") is equivalent: after the root slash no path here starts with X."""
    real = _folder_install(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    prefix = tmp_path / "prefix"
    inst = dataclasses.replace(real, site=tmp_path / "link" / "site", pycache_prefix=str(prefix))
    pkg = inst.site / "toyengine"
    mirrors = [prefix / str(pkg).lstrip("/"), prefix / str(pkg.resolve()).lstrip("/")]
    assert mirrors[0] != mirrors[1]
    pycs = [_pyc(m / f"core.{TAG}.pyc", 1) for m in mirrors]
    assert sorted(bytecode.cached_files(inst, test_plan.CORE)) == sorted(pycs)
    assert sorted(bytecode.cached_files(real, test_plan.CORE)) == []  # no prefix: none of those
    # one rebuild for the two: py_compile writes a single place, the mirror Python imports from
    assert bytecode.shipped(inst, [test_plan.CORE]) == [
        bytecode.Compiled(str(inst.site / test_plan.CORE), 0, "UNCHECKED_HASH")]


# --- recompile: an interpreter that fails or hangs

def _fake_python(tmp_path: Path, body: str) -> engines.Install:
    """An install whose interpreter is a shell script doing ``body``: recompile's failure paths."""
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    inst = test_plan.install(tmp_path, {test_plan.CORE: "X = 1\n"})
    return dataclasses.replace(inst, python=str(script))


def _one_module(inst: engines.Install) -> list[bytecode.Compiled]:
    return [bytecode.Compiled(str(inst.site / test_plan.CORE), 0, "TIMESTAMP")]


def test_a_failed_rebuild_reports_the_interpreters_last_line_whatever_its_bytes(tmp_path):
    """stderr is not always UTF-8 (a locale, a compiler message): the last line comes back with
    the bad byte replaced, never a UnicodeDecodeError after the commit point.
    Survivors bytecode.recompile errors="XXreplaceXX" / "REPLACE" (unknown handlers raise on the byte)."""
    inst = _fake_python(tmp_path, r"printf 'first\nSyntaxError in caf\351.py\n' >&2; exit 3")
    assert bytecode.recompile(inst, _one_module(inst)) == "SyntaxError in caf\ufffd.py"
    quiet = _fake_python(tmp_path / "quiet", "exit 3")
    assert bytecode.recompile(quiet, _one_module(quiet)) == "exit 3"
    loud = _fake_python(tmp_path / "loud", "printf '%0400d\\n' 0 >&2; exit 3")  # one 400-character line
    assert bytecode.recompile(loud, _one_module(loud)) == "0" * 300  # cut at 300 (survivor: [:301])


def test_a_hanging_rebuild_is_stopped_and_reported(tmp_path, monkeypatch):
    """An interpreter that never returns does not hang apply: the rebuild gives up after
    COMPILE_TIMEOUT and says so (it used to print the first 300 characters of the command line,
    which never reached the words "timed out"). Survivors bytecode.recompile timeout=None / dropped."""
    monkeypatch.setattr(bytecode, "COMPILE_TIMEOUT", 0.5)
    inst = _fake_python(tmp_path, "exec sleep 30")
    started = time.monotonic()
    failed = bytecode.recompile(inst, _one_module(inst))
    assert failed == f"{inst.python} did not finish compiling in 0.5 s"
    assert time.monotonic() - started < 10


# --- apply on a pip-installed toy engine: which pycs go, which are rebuilt, in which mode

def _tag(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import sys; print(sys.implementation.cache_tag)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_pyc_of_other_tags_and_legacy_pyc_are_removed(venv, tmp_path):
    """Broken by: bytecode.cached_files keeping only this interpreter's tag, or skipping core.pyc.
    Bytecode of other interpreters is removed, never rebuilt for this one (mutmut survivor
    bytecode.shipped `or` -> `and`)."""
    python, site = venv
    install(python, tmp_path, "1.0", toy.MODULE_V1, "--no-compile")  # no bytecode of our own tag
    patches = family(tmp_path / "patches")
    pkg = site / "toyengine"
    (pkg / "__pycache__").mkdir(exist_ok=True)
    other = pkg / "__pycache__" / "core.cpython-399.pyc"
    other.write_bytes(b"stale bytecode of another interpreter")
    legacy = pkg / "core.pyc"
    legacy.write_bytes(b"stale legacy bytecode")
    keep = pkg / "__pycache__" / "other.cpython-399.pyc"  # another module: not ours to touch
    keep.write_bytes(b"x")
    actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches, probes=False))
    assert not other.exists() and not legacy.exists()
    assert keep.exists()
    assert not list((pkg / "__pycache__").glob(f"core.{_tag(python)}*.pyc")), "rebuilt bytecode nobody shipped"


@pytest.mark.parametrize("mode,flags", [("checked-hash", 3), ("timestamp", 0)])
def test_shipped_bytecode_is_rebuilt_in_its_mode_at_every_optimisation_level(venv, tmp_path, mode, flags):
    """Broken by: bytecode.recompile dropping `optimize` (opt-1/opt-2 then vanish) or `mode`."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    pkg = site / "toyengine"
    for opt in ("", "-O", "-OO"):
        subprocess.run([str(python), *([opt] if opt else []), "-m", "compileall", "-q", "-f",
                        "--invalidation-mode", mode, str(pkg)], check=True)
    tag = _tag(python)
    pycs = {name: pkg / "__pycache__" / f"core.{tag}{name}.pyc" for name in ("", ".opt-1", ".opt-2")}
    old = {name: p.read_bytes() for name, p in pycs.items()}
    actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches, probes=False))
    for name, pyc in pycs.items():
        assert pyc.exists(), f"core{name}.pyc was not rebuilt"
        data = pyc.read_bytes()
        assert int.from_bytes(data[4:8], "little") == flags, f"core{name}.pyc changed invalidation mode"
        assert data != old[name], f"core{name}.pyc still holds the old code"
    for opt in ("-O", "-OO"):
        out = subprocess.run([str(python), opt, "-c", "import toyengine.core as c; print(c.value())"],
                             capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
        assert out == "2", f"python {opt} runs stale bytecode"


def test_own_bytecode_is_rebuilt_beside_other_interpreters_bytecode(venv, tmp_path):
    """Another interpreter's pyc in the same __pycache__ is skipped, not a reason to stop looking:
    this interpreter's shipped pyc is still rebuilt (mutmut survivor bytecode.shipped
    `continue` -> `break`; several other tags make the scan meet one first)."""
    python, site = venv
    install(python, tmp_path)
    pkg = site / "toyengine"
    subprocess.run([str(python), "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash",
                    str(pkg)], check=True)
    for n in range(390, 399):
        (pkg / "__pycache__" / f"core.cpython-{n}.pyc").write_bytes(b"another interpreter")
    own = pkg / "__pycache__" / f"core.{_tag(python)}.pyc"
    old = own.read_bytes()
    actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"), probes=False))
    assert own.exists() and own.read_bytes() != old, "this interpreter's shipped bytecode was not rebuilt"
    assert int.from_bytes(own.read_bytes()[4:8], "little") == 1
    assert not list((pkg / "__pycache__").glob("core.cpython-39*.pyc"))


def test_pyc_with_an_unknown_flags_word_is_rebuilt_as_timestamp(venv, tmp_path):
    """A shipped pyc whose PEP 552 flags word is none of 0/1/3 (damaged) is rebuilt in the default
    timestamp mode, not skipped (mutmut survivors bytecode.shipped default mode None / misspelt)."""
    python, site = venv
    install(python, tmp_path)
    own = site / "toyengine" / "__pycache__" / f"core.{_tag(python)}.pyc"
    data = bytearray(own.read_bytes())
    data[4:8] = (2).to_bytes(4, "little")
    own.write_bytes(bytes(data))
    r = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"), probes=False))
    assert not r.notes, r.notes
    assert own.exists() and int.from_bytes(own.read_bytes()[4:8], "little") == 0


def test_site_without_python_removes_shipped_bytecode_it_cannot_rebuild(venv, tmp_path):
    """--site alone: no interpreter to rebuild bytecode with, so it is removed and the run still
    succeeds. (The mutmut survivor bytecode.recompile `or` -> `and` is equivalent: without an
    interpreter there is no cache tag, so shipped() finds nothing to rebuild.)"""
    python, site = venv
    install(python, tmp_path)
    tag = _tag(python)
    pyc = site / "toyengine" / "__pycache__" / f"core.{tag}.pyc"
    subprocess.run([str(python), "-m", "compileall", "-q", "-f", str(site / "toyengine")], check=True)
    assert pyc.exists()
    r = actions.apply(toy.ENGINE, actions.Options(site=site, patches=family(tmp_path / "p"), probes=False))
    assert r.changed == ["toyengine/core.py"] and only(r).state is State.APPLIED
    assert not pyc.exists()
    assert toy.run_value(python) == 2


def test_failed_bytecode_rebuild_is_a_note_not_a_crash(venv, tmp_path, monkeypatch):
    """The rebuild runs after the commit point: if the target interpreter cannot rebuild (full
    disk, read-only cache), the files are patched and their stale bytecode is gone, so the run
    succeeds and says why start-up will compile. Before: CalledProcessError escaped as a traceback.
    Survivors bytecode.recompile check=False / capture_output=False."""
    python, site = venv
    install(python, tmp_path)
    subprocess.run([str(python), "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash",
                    str(site / "toyengine")], check=True)
    monkeypatch.setattr(bytecode, "_COMPILE", "import sys; sys.exit('OSError: [Errno 28] No space left on device')")
    r = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p")))
    assert r.changed == ["toyengine/core.py"] and r.exit_code(True) == 0
    assert any("not rebuilt (OSError: [Errno 28] No space left on device)" in n for n in r.notes), r.notes
    assert not list((site / "toyengine" / "__pycache__").glob("core.*.pyc"))
    assert toy.run_value(python) == 2


# --- stale bytecode: after apply the engine runs the patched code

def _same_size_same_second(core: Path, stamp: int) -> None:
    os.utime(core, ns=(stamp, stamp))


def test_stale_timestamp_pyc_same_size_same_second(env):
    """pip compiled timestamp pycs; the patched file has the same size and (forced) mtime."""
    python, wheel, opts, site = env
    core = site / "toyengine" / "core.py"
    stamp = core.stat().st_mtime_ns
    assert toy.run_value(python) == 1  # pyc present and valid
    # Control: an edit that keeps size and mtime runs the stale pyc. The test can fail.
    core.write_text(toy.PATCHED)
    _same_size_same_second(core, stamp)
    assert toy.run_value(python) == 1
    core.write_text(toy.MODULE_V1)
    _same_size_same_second(core, stamp)
    actions.apply(toy.ENGINE, opts)
    _same_size_same_second(core, stamp)
    assert toy.run_value(python) == 2


def test_unchecked_hash_pycs_are_rebuilt_in_the_same_mode(env):
    python, wheel, opts, site = env
    core = site / "toyengine" / "core.py"
    subprocess.run([str(python), "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash",
                    "-f", str(site / "toyengine")], check=True)
    tag = subprocess.run([str(python), "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    pyc = core.parent / "__pycache__" / f"core.{tag}.pyc"
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 1  # unchecked-hash
    # Control: CPython never revalidates an unchecked-hash pyc against its source.
    core.write_text(toy.PATCHED)
    assert toy.run_value(python) == 1
    core.write_text(toy.MODULE_V1)
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.APPLIED
    assert toy.run_value(python) == 2
    assert pyc.exists() and int.from_bytes(pyc.read_bytes()[4:8], "little") == 1


@pytest.mark.parametrize("through_symlink", [False, True])
def test_pycache_prefix_bytecode_is_removed(tmp_path, monkeypatch, through_symlink):
    """Bytecode under sys.pycache_prefix goes too. Installed with --no-compile, so no pyc beside
    the source exists whose rebuild (which follows the prefix) could refresh the stale one:
    only removing it under the prefix makes the test pass. Through a symlinked venv, CPython
    mirrors the path it imports from, symlink and all (importlib's cache_from_source does not
    resolve): bytecode.cached_files used to look only under the resolved path and missed it."""
    python = toy.make_venv(tmp_path / "venv")
    if through_symlink:
        (tmp_path / "link").symlink_to(tmp_path / "venv")
        python = tmp_path / "link" / "bin" / "python"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    toy.pip_install(python, toy.build_wheel(wheels, "1.0"), "--no-compile")
    site = site_of(python)
    assert not list(site.rglob("core.*.pyc"))
    prefix = tmp_path / "pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    subprocess.run([str(python), "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash",
                    "-f", str(site / "toyengine")], check=True)
    (stale,) = prefix.rglob("core.*.pyc")
    old = stale.read_bytes()
    assert not list(site.rglob("core.*.pyc"))
    env_vars = dict(os.environ)
    # Control: the unchecked-hash pyc under the prefix wins over an edited source.
    core = site / "toyengine" / "core.py"
    core.write_text(toy.PATCHED)
    assert toy.run_value(python, env_vars) == 1
    core.write_text(toy.MODULE_V1)
    opts = actions.Options(python=str(python), patches=toy.write_family(tmp_path / "patches"))
    r = actions.apply(toy.ENGINE, opts)
    assert state(r).state is State.APPLIED
    assert not stale.exists() or stale.read_bytes() != old  # removed, or rebuilt in its mode
    assert toy.run_value(python, env_vars) == 2
