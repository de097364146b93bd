"""patcher/core/write.py: the all-or-nothing write, its rollback, our folder and the lock, on a real pip
install of the toy engine (tests/support/toy_venv.py).

Kills at every step in child processes: test_kill_points.py; hostile bookkeeping files on a real
release: test_bookkeeping.py.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from patcher.core import write
from patcher.core.plan import State
from patcher.environment import engines
from patcher.errors import LockBusy, WriteError
from patcher.installer import actions
from tests.support import toy, toy_venv
from tests.support.toy_venv import Killed, cli, family, install, only

venv = toy_venv.venv


def _opts(python: Path, patches: Path) -> actions.Options:
    return actions.Options(python=str(python), patches=patches, probes=False)


# --- what one write leaves: fsyncs, modes, the state file

def test_only_the_journal_is_fsynced_before_the_engine_files_change(venv, tmp_path, monkeypatch):
    """The journal, then its folder, is fsynced; backups, temporaries and the state file are not
    (write.py: a torn backup is refused by its hash, and an fsync per file made the file phase 5x
    slower than git apply for no gain against a kill).
    Survivors write._atomic_json durable default False / durable=None / durable dropped,
    write._write_file durable default True / `durable or DURABLE`."""
    python, site = venv
    install(python, tmp_path)
    synced: list[Path] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    actions.apply(toy.ENGINE, _opts(python, family(tmp_path / "p")))
    txn = (site / write.DIRNAME / f"{toy.ENGINE}.txn").resolve()
    assert len(synced) == 2, synced
    assert synced[0].parent == txn and synced[0].name.startswith("journal.json"), synced
    assert synced[1] == txn


def test_our_files_are_created_with_the_umask_not_executable(venv, tmp_path):
    """The state file (and every file write.py creates without a mode to keep) is 0o666 minus the
    umask, as any tool's data file. Survivors write._write_file create mode dropped (0o777) / 0o667."""
    python, site = venv
    install(python, tmp_path)
    umask = os.umask(0o022)
    os.umask(umask)
    actions.apply(toy.ENGINE, _opts(python, family(tmp_path / "p")))
    state = site / write.DIRNAME / f"{toy.ENGINE}.json"
    assert state.stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("mode", [0o600, 0o755])
def test_file_modes_are_kept_by_apply_and_revert(venv, tmp_path, mode):
    """Broken by: write.commit dropping the mode argument of the temporaries (umask mode 0o644)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    core = site / "toyengine" / "core.py"
    core.chmod(mode)
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    assert actions.apply(toy.ENGINE, opts).changed == ["toyengine/core.py"]
    assert stat.S_IMODE(core.stat().st_mode) == mode
    assert actions.revert(toy.ENGINE, opts).changed == ["toyengine/core.py"]
    assert stat.S_IMODE(core.stat().st_mode) == mode


def test_the_state_file_records_the_release_and_the_variant(venv, tmp_path):
    """What "lost" later reports ("was applied (variant v1 on 1.0)") comes from here.
    Survivor write.commit state "version": str(None)."""
    python, site = venv
    install(python, tmp_path)
    actions.apply(toy.ENGINE, _opts(python, family(tmp_path / "p")))
    state = json.loads((site / write.DIRNAME / f"{toy.ENGINE}.json").read_text())
    assert (state["engine"], state["version"]) == (toy.ENGINE, "1.0")
    assert state["families"][f"{toy.ENGINE}/fix"]["variant"] == "v1"


def test_revert_of_a_never_patched_install_exits_0_and_leaves_no_folder(venv, tmp_path):
    """Nothing applied, no state file: revert has nothing to do and tidies the lock it made.
    Survivors write.tidy unlink(missing_ok=None / False) on the state file."""
    python, site = venv
    install(python, tmp_path)
    code, out, err = cli("revert", "--engine", "all", "--python", str(python),
                         "--patches", str(family(tmp_path / "p")), "--json")
    assert code == 0, err
    assert not (site / write.DIRNAME).exists()


def test_full_revert_keeps_the_folder_another_engine_still_uses(venv, tmp_path):
    """Our folder is shared by the engines of one site: a full revert of one removes its own
    files and leaves the folder to the other (rmdir of a non-empty folder is not an error).
    Survivor write.tidy contextlib.suppress(OSError) -> suppress(None)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    actions.apply(toy.ENGINE, _opts(python, patches))
    other = site / write.DIRNAME / "otherengine.lock"
    other.write_bytes(b"")
    code, out, err = cli("revert", "--engine", "all", "--python", str(python), "--patches", str(patches), "--json")
    assert code == 0, err
    assert sorted(p.name for p in (site / write.DIRNAME).iterdir()) == ["otherengine.lock"]


# --- rollback: a write that fails or is killed

def test_a_rolled_back_write_gives_each_file_its_mode_back(venv, tmp_path):
    """A write that fails after the renames is rolled back from the backups, and a backup is
    renamed into place: it must carry the original's mode (a 0o600 file stays 0o600).
    Survivor write.commit backup written with mode None."""
    python, site = venv
    install(python, tmp_path)
    core = site / "toyengine" / "core.py"
    core.chmod(0o600)
    before = core.read_bytes()
    inst = engines.find(toy.ENGINE, site=site)

    def fail_at_state(step: str) -> None:
        if step == "state":
            raise OSError(28, "No space left on device")

    with write.locked(inst), pytest.raises(WriteError, match="the disk is full"):
        write.commit(inst, {"toyengine/core.py": toy.PATCHED.encode()}, {}, step=fail_at_state)
    assert core.read_bytes() == before
    assert core.stat().st_mode & 0o777 == 0o600


def test_a_rolled_back_write_gives_the_state_file_back(venv, tmp_path):
    """A write that fails after the new state file is in place rolls the state file back too:
    otherwise it would describe files the rollback just restored.
    Survivors write.commit state backup under another name (state.orig never found)."""
    python, site = venv
    install(python, tmp_path)
    actions.apply(toy.ENGINE, _opts(python, family(tmp_path / "p")))
    state = site / write.DIRNAME / f"{toy.ENGINE}.json"
    core = site / "toyengine" / "core.py"
    before = state.read_bytes(), core.read_bytes()
    inst = engines.find(toy.ENGINE, site=site)

    def fail_at_commit(step: str) -> None:
        if step == "commit":
            raise OSError(5, "Input/output error")

    with write.locked(inst), pytest.raises(WriteError):
        write.commit(inst, {"toyengine/core.py": toy.MODULE_V1.encode()}, {}, step=fail_at_commit)
    assert (state.read_bytes(), core.read_bytes()) == before


def _killed_at(prefix: str):
    def step(name: str) -> None:
        if name.startswith(prefix):
            raise Killed(name)  # what a SIGKILL leaves behind, in-process: no except clause of ours runs
    return step


def _killed_apply(site: Path, at: str = "state") -> None:
    """The toy fix written by a run killed before step ``at`` (journal and backups left behind)."""
    inst = engines.find(toy.ENGINE, site=site)
    with write.locked(inst), pytest.raises(Killed):
        write.commit(inst, {"toyengine/core.py": toy.PATCHED.encode()}, {}, step=_killed_at(at))


def test_verify_reports_a_run_killed_mid_write_and_apply_rolls_it_back(venv, tmp_path):
    """Survivors write.interrupted journal name misspelt (verify never says a run was killed)."""
    python, site = venv
    install(python, tmp_path)
    opts = _opts(python, family(tmp_path / "p"))
    _killed_apply(site)
    assert any(n.startswith("interrupted: a run was killed mid-write") for n in actions.verify(toy.ENGINE, opts).notes)
    r = actions.apply(toy.ENGINE, opts)
    assert any(n.startswith("rolled back an interrupted run") for n in r.notes), r.notes
    assert not any(n.startswith("interrupted") for n in actions.verify(toy.ENGINE, opts).notes)


def test_rollback_restores_a_file_deleted_after_the_kill(venv, tmp_path):
    """A target someone deleted after the kill comes back from its backup.
    Survivor write._recover `target.exists() or True` (reads the missing file: cannot roll back)."""
    python, site = venv
    install(python, tmp_path)
    opts = _opts(python, family(tmp_path / "p"))
    _killed_apply(site)
    core = site / "toyengine" / "core.py"
    core.unlink()
    r = actions.apply(toy.ENGINE, opts)
    assert "rolled back an interrupted run: toyengine/core.py" in r.notes
    assert core.read_text() == toy.PATCHED and r.changed == ["toyengine/core.py"]


def test_torn_backup_is_refused_by_its_hash(venv, tmp_path, monkeypatch):
    """A run killed after its renames leaves a journal; if the backup it would restore is torn,
    recovery refuses (exit 2) rather than writing it. Broken by: write._recover skipping the
    backup's hash check (the torn bytes then become the engine's file)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    real_commit = write.commit

    def killed_at_state(*a, **kw):
        def step(name):
            if name == "state":
                raise Killed(name)
        return real_commit(*a, **{**kw, "step": step})

    monkeypatch.setattr(write, "commit", killed_at_state)
    with pytest.raises(Killed):
        actions.apply(toy.ENGINE, opts)
    monkeypatch.setattr(write, "commit", real_commit)
    core = site / "toyengine" / "core.py"
    assert core.read_text() == toy.PATCHED  # renamed into place before the kill
    txn = site / write.DIRNAME / f"{toy.ENGINE}.txn"
    backup = txn / "0.orig"
    backup.write_bytes(backup.read_bytes()[:20])  # torn
    code, out, err = cli("apply", "--engine", "all", "--python", str(python), "--patches", str(patches),
                         "--no-probes", "--json")
    assert code == 2
    assert out["error"]["what"] == "cannot roll back toyengine/core.py: its backup is missing or damaged"
    assert out["error"]["found"] == str(txn)  # mutmut: found / hint dropped
    assert out["error"]["hint"] == f"put the published files back ({python} -m pip install --force-reinstall " \
                                   f"--no-deps {toy.ENGINE}==1.0), then delete that folder"
    assert core.read_text() == toy.PATCHED  # not replaced by the torn backup
    assert backup.read_bytes() == toy.MODULE_V1.encode()[:20]  # evidence kept for the user


def _killed_run(venv, tmp_path) -> tuple[Path, Path, Path]:
    """A toy install whose apply was killed after its renames: (patches, site, txn folder)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    actions.apply(toy.ENGINE, _opts(python, patches))  # a state file exists: the next run backs it up
    inst = engines.find(toy.ENGINE, site=site)
    with write.locked(inst), pytest.raises(Killed):
        write.commit(inst, {"toyengine/core.py": toy.MODULE_V1.encode()}, {},
                     step=_killed_at("commit"))
    return patches, site, site / write.DIRNAME / f"{toy.ENGINE}.txn"


def test_a_forged_state_backup_stops_recovery_before_any_rename(venv, tmp_path):
    """Every piece of the journal is checked before the first rename, the state file's backup too.
    Survivors write._recover "state.orig" misspelt in the check (the forged file was then renamed
    into place and refused only on the next read, after the engine files were rolled back)."""
    patches, site, txn = _killed_run(venv, tmp_path)
    core = site / "toyengine" / "core.py"
    before = core.read_bytes()
    (txn / "state.orig").write_text('{"engine": "toyengine", "families": {"x": {"files": {"../../etc": "x"}}}}')
    code, out, err = cli("apply", "--engine", "all", "--python", str(venv[0]), "--patches", str(patches),
                         "--no-probes", "--json")
    assert code == 2 and str(txn / "state.orig") in out["error"]["what"], out
    assert core.read_bytes() == before and (txn / "journal.json").exists()


def test_a_backup_planted_as_a_symlink_is_refused_even_with_the_right_bytes(venv, tmp_path):
    """Recovery renames a backup over the engine file: a symlink there would make the engine file
    a symlink to whatever it points at. Survivor write._recover `is_symlink() and not is_file()`."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    _killed_apply(site)
    backup = site / write.DIRNAME / f"{toy.ENGINE}.txn" / "0.orig"
    planted = tmp_path / "planted.py"
    planted.write_bytes(backup.read_bytes())  # the right hash
    backup.unlink()
    backup.symlink_to(planted)
    code, out, err = cli("apply", "--engine", "all", "--python", str(python), "--patches", str(patches),
                         "--no-probes", "--json")
    assert code == 2 and "its backup is missing or damaged" in out["error"]["what"], out
    assert not (site / "toyengine" / "core.py").is_symlink()


# --- our folder is never read or written through a symlink

def test_a_state_file_planted_as_a_symlink_is_not_read_through(venv, tmp_path):
    """Nothing of ours is read through a symlink, even one to a well-formed state file.
    Survivor write._read_own O_RDONLY & O_NOFOLLOW (the flag dropped)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    actions.apply(toy.ENGINE, _opts(python, patches))
    state = site / write.DIRNAME / f"{toy.ENGINE}.json"
    elsewhere = tmp_path / "elsewhere.json"
    state.rename(elsewhere)
    state.symlink_to(elsewhere)
    code, out, err = cli("verify", "--engine", "all", "--python", str(python), "--patches", str(patches),
                         "--no-probes", "--json")
    assert code == 2 and out["error"]["what"] == f"cannot read {state}", out


def test_a_symlinked_transaction_folder_is_one_line_error(venv, tmp_path):
    """Survivor write._recover _own_dir(txn, None) (the error's hint then raised AttributeError)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    (site / write.DIRNAME).mkdir()
    (tmp_path / "elsewhere").mkdir()
    (site / write.DIRNAME / f"{toy.ENGINE}.txn").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    code, out, err = cli("apply", "--engine", "all", "--python", str(python), "--patches", str(patches),
                         "--no-probes", "--json")
    assert code == 2 and out["error"]["what"].endswith("is not a folder patcher made"), out
    assert "only lock, journal, backups and state of toyengine live there" in out["error"]["hint"]


# --- the lock

def _install_of(python: Path) -> engines.Install:
    return engines.find(toy.ENGINE, python=str(python))


def test_second_writer_times_out_with_the_documented_error_while_the_lock_is_held(venv, tmp_path):
    """Broken by: write.locked not taking the flock (the second apply then writes under the first)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    inst = _install_of(python)
    opts = actions.Options(python=str(python), patches=patches, probes=False, lock_timeout=0.5)
    with write.locked(inst):
        t0 = time.monotonic()
        with pytest.raises(LockBusy) as exc:
            actions.apply(toy.ENGINE, opts)
        assert time.monotonic() - t0 >= 0.5  # it waited for the timeout before giving up
    assert exc.value.what == f"another patcher run holds {toy.ENGINE}'s lock"
    assert exc.value.hint == "wait for it to finish" and exc.value.exit_code == 2
    assert exc.value.found == str(site / write.DIRNAME)  # where the lock is (mutmut: found dropped)
    assert (site / "toyengine" / "core.py").read_text() == toy.MODULE_V1  # nothing written
    assert actions.apply(toy.ENGINE, opts).changed == ["toyengine/core.py"]  # free again


def test_second_writer_waits_for_the_first_then_proceeds(venv, tmp_path):
    """Broken by: write.locked not taking the flock (apply then finishes before the holder lets go)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    inst = _install_of(python)
    held, released = threading.Event(), []

    def holder():
        with write.locked(inst):
            held.set()
            time.sleep(1.0)
            released.append(time.monotonic())

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    r = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches, probes=False,
                                                  lock_timeout=30))
    done = time.monotonic()
    t.join()
    assert r.changed == ["toyengine/core.py"]
    assert released and done >= released[0], "apply finished while another run held the lock"


def test_verify_takes_the_shared_lock(venv, tmp_path):
    """verify waits while a writer holds the lock, and a writer waits while verify reads; two
    readers never wait for each other. Broken by: write.reading not taking the flock."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False, lock_timeout=0.3)
    actions.apply(toy.ENGINE, opts)  # creates the lock file (reading() creates nothing)
    inst = _install_of(python)
    with write.locked(inst):
        with pytest.raises(LockBusy):
            actions.verify(toy.ENGINE, opts)
    with write.reading(inst):
        with pytest.raises(LockBusy):
            actions.revert(toy.ENGINE, opts)
        assert only(actions.verify(toy.ENGINE, opts)).state is State.APPLIED  # readers share
    assert only(actions.verify(toy.ENGINE, opts)).state is State.APPLIED


def test_a_revert_tidying_our_folder_between_mkdir_and_open_is_no_write_error(venv, tmp_path, monkeypatch):
    """A full revert's tidy() removes our folder; a racing apply that made it a moment before
    makes it again instead of reporting 'cannot write' (seen once in CI on apply || revert).
    Broken by: locked() treating that FileNotFoundError as a permission problem."""
    python, site = venv
    install(python, tmp_path)
    inst = _install_of(python)
    real_open, tidied = os.open, []

    def open_after_tidy(path, *args, **kw):
        if str(path).endswith(".lock") and not tidied:
            tidied.append(path)
            os.rmdir(site / write.DIRNAME)  # what tidy() does in the other process, in the window
        return real_open(path, *args, **kw)

    monkeypatch.setattr(write.os, "open", open_after_tidy)
    with write.locked(inst):
        assert (site / write.DIRNAME / f"{toy.ENGINE}.lock").is_file()
    assert tidied, "the window was never hit: the test proves nothing"
