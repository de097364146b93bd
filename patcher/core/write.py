"""All-or-nothing writes across every file of every selected family.

Protocol (each step survives a SIGKILL):
1. lock ``<site>/.kimi-patcher/<engine>.lock`` (flock: a second run waits);
2. roll back whatever an interrupted run left (journal present) and sweep temporaries;
3. back up the originals and write the journal (fsync): from here a kill rolls back;
4. write the new contents to temporaries beside their targets, modes kept, fsync;
5. remove cached bytecode of the targets (before the renames, so no window runs stale code);
6. rename every temporary into place, then write the state file;
7. delete the journal: the commit point. Then recompile bytecode (optional speed-up).

Our only files outside the engine's own are in ``<site>/.kimi-patcher/``: lock,
journal, backups and the state file that lets ``verify`` tell "lost" from "pending".
What we read back from there is untrusted (bookkeeping.py validates it, paths included),
and nothing there is read or written through a symlink.

Over 300 lines: the journaled write and its recovery are one protocol, read top to bottom; split, a
step's undo would sit away from the step.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from patcher import program
from patcher.core import bookkeeping, bytecode
from patcher.environment.engines import Install, sha256_record
from patcher.errors import LockBusy, WriteError

DIRNAME = ".kimi-patcher"
# fsync the journal (file and folder) so a power cut cannot lose it; the benchmark turns
# this off to show what durability costs next to git apply, which never fsyncs.
DURABLE = True
TMP_SUFFIX = ".kimi-patcher-tmp"


def home(install: Install) -> Path:
    return install.site / DIRNAME


def _txn(install: Install) -> Path:
    return home(install) / f"{install.engine}.txn"


def _state_file(install: Install) -> Path:
    return home(install) / f"{install.engine}.json"


def _tmp_for(target: Path) -> Path:
    return target.with_name(f".{target.name}{TMP_SUFFIX}")


def read_state(install: Install) -> dict[str, dict]:
    path = _state_file(install)
    _own_dir(home(install), install)
    try:
        raw = _read_own(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise WriteError(f"cannot read {path}", found=exc.strerror or str(exc),
                         hint=f"delete it; '{program.command('verify')}' then reports from the files alone") from None
    return bookkeeping.parse_state(raw, path, install)


def _read_own(path: Path) -> bytes:
    """One of our files, never through a symlink (someone else's file is not our bookkeeping)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _own_dir(path: Path, install: Install) -> None:
    """Our folders are real folders: a symlinked one would send our writes elsewhere."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise WriteError(f"{path} is not a folder patcher made", wanted="a plain directory",
                         found="a symlink" if path.is_symlink() else "a file",
                         hint=f"remove it; only lock, journal, backups and state of {install.engine} live there")


def interrupted(install: Install) -> bool:
    return (_txn(install) / "journal.json").exists()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, mode: int | None = None, durable: bool = False) -> None:
    # Only the journal is fsynced: a killed process loses nothing the kernel already has,
    # and rename-over-existing is ordered after the data on ext4/xfs. fsyncing every file
    # made the file phase 5x slower than git apply for no gain against SIGKILL.
    # Every path we write is a name of ours (a temporary, a backup): a stale or planted one
    # is removed first and the new file created exclusively, so a symlink there is never followed.
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), "wb") as f:
        f.write(data)
        if durable and DURABLE:
            f.flush()
            os.fsync(f.fileno())
    if mode is not None:
        os.chmod(path, mode)


def _atomic_json(path: Path, obj: object, durable: bool = True) -> None:
    tmp = path.with_name(path.name + ".tmp")
    _write_file(tmp, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode(), durable=durable)
    os.replace(tmp, path)
    if durable and DURABLE:
        _fsync_dir(path.parent)


def _flock(fd: int, mode: int, install: Install, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            if _current(fd, install, mode):
                return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LockBusy(f"another patcher run holds {install.engine}'s lock",
                               found=str(home(install)), hint="wait for it to finish") from None
            time.sleep(0.05)


def _current(fd: int, install: Install, mode: int) -> bool:
    """Whether ``fd`` still is the lock file. tidy() removes it after a full revert; a run that
    was waiting on the removed file must not count it as the lock: it re-opens the lock
    file in place of ``fd`` (dup2, so the caller's fd stays valid) and tries again."""
    path = home(install) / f"{install.engine}.lock"
    try:
        st = os.stat(path, follow_symlinks=False)
        held = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino):
            return True
    except FileNotFoundError:
        if mode == fcntl.LOCK_SH:
            return True  # nothing of ours is left: a reader has nothing to wait for
    try:
        if mode == fcntl.LOCK_EX:
            home(install).mkdir(exist_ok=True)
        flags = os.O_RDWR | os.O_CREAT if mode == fcntl.LOCK_EX else os.O_RDONLY
        new = os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except FileNotFoundError:
        return False  # tidied away again between mkdir and open: next round
    os.dup2(new, fd)
    os.close(new)
    return False


def tidy(install: Install) -> None:
    """After a full revert, remove our folder when nothing of ours is left in it (no state,
    no journal; the other engine's files keep it). Call with the lock held, last: runs
    waiting on the lock notice its file was removed (_current) and lock a new one."""
    if read_state(install) or _txn(install).exists():
        return
    _state_file(install).unlink(missing_ok=True)
    (home(install) / f"{install.engine}.lock").unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        home(install).rmdir()


def _open_lock(install: Install) -> int:
    """Open (creating) the lock file. A racing revert's tidy() may remove our folder between
    mkdir and open: that is no permission problem, so make it again (a few rounds at most)."""
    for _ in range(20):
        try:
            _own_dir(home(install), install)
            home(install).mkdir(exist_ok=True)
            return os.open(home(install) / f"{install.engine}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise WriteError(f"cannot write in {install.site}", found=exc.strerror or str(exc),
                             hint=_not_writable(exc)) from None
    raise WriteError(f"cannot write in {install.site}", found="our folder vanished each time we made it",
                     hint="is another tool removing files in this environment?")


@contextlib.contextmanager
def locked(install: Install, timeout: float = 600.0) -> Iterator[None]:
    """The exclusive lock of a writing run; a second run waits for the first."""
    fd = _open_lock(install)
    try:
        _flock(fd, fcntl.LOCK_EX, install, timeout)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def reading(install: Install, timeout: float = 600.0) -> Iterator[None]:
    """A shared lock for read-only runs, so verify never sees half of a commit. Creates
    nothing: with no lock file, no run has ever written here."""
    try:
        fd = os.open(home(install) / f"{install.engine}.lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        yield
        return
    try:
        _flock(fd, fcntl.LOCK_SH, install, timeout)
        yield
    finally:
        os.close(fd)


def recover(install: Install) -> list[str]:
    """Roll back an interrupted run. Returns the files restored. Call with the lock held.

    Restoring renames each backup over its target, so it needs no free space (a full
    disk is a common reason for being here), and a kill during recovery is recovered
    by the next run: every step is a rename or is idempotent.
    """
    try:
        return _recover(install)
    except OSError as exc:
        raise WriteError(f"cannot roll back an interrupted run on {install.engine}",
                         found=f"{exc.strerror or exc}: {exc.filename or _txn(install)}",
                         hint=f"fix the cause (permissions, disk) and run '{program.command('revert')}' "
                              "again") from None


def check_rollback(install: Install) -> None:
    """That an interrupted run can be rolled back, checked without changing anything (verify, doctor):
    the same WriteError the next apply or revert would stop on, or None."""
    if interrupted(install) or (_txn(install) / "journal.json").is_symlink():
        try:
            _rollback_plan(install)
        except OSError as exc:
            raise WriteError(f"cannot read the journal of an interrupted run on {install.engine}",
                             found=f"{exc.strerror or exc}: {exc.filename or _txn(install)}",
                             hint=f"fix the cause (permissions, disk) and run '{program.command('revert')}'") from None


def _rollback_plan(install: Install) -> tuple[Any, list[tuple[Path, Path, str]]]:
    """The journal and the renames that undo it. Everything is checked before the first rename: a
    journal or backup we cannot trust changes nothing (bookkeeping.py says why each path is confined)."""
    txn = _txn(install)
    journal = txn / "journal.json"
    meta = bookkeeping.parse_journal(_read_own(journal), journal, install)
    if (txn / "state.orig").exists():
        bookkeeping.parse_state(_read_own(txn / "state.orig"), txn / "state.orig", install)
    renames = []
    for e in meta.entries:
        target = install.path(e.rel)
        current = target.read_bytes() if target.exists() else None
        if current is None or sha256_record(current) != e.old:
            backup = txn / e.backup
            if backup.is_symlink() or not backup.is_file() or sha256_record(backup.read_bytes()) != e.old:
                raise WriteError(f"cannot roll back {e.rel}: its backup is missing or damaged",
                                 found=str(txn), hint=f"put the published files back "
                                 f"({install.restore_command()}), then delete that folder")
            renames.append((backup, target, e.rel))
    return meta, renames


def _recover(install: Install) -> list[str]:
    txn = _txn(install)
    _own_dir(home(install), install)
    _own_dir(txn, install)
    journal = txn / "journal.json"
    restored = []
    if journal.exists() or journal.is_symlink():
        meta, renames = _rollback_plan(install)
        for backup, target, rel in renames:
            os.replace(backup, target)
            restored.append(rel)
        for e in meta.entries:
            _tmp_for(install.path(e.rel)).unlink(missing_ok=True)
        try:
            bytecode.remove(install, [e.rel for e in meta.entries])
        except OSError:
            pass  # a pyc we cannot delete belongs to a file whose content is what it was
        # The state file moves with the engine files. state.orig is only ever renamed
        # into place, so if it is gone a previous recovery already put it back.
        if (txn / "state.orig").exists():
            os.replace(txn / "state.orig", _state_file(install))
        elif not meta.state_before:
            _state_file(install).unlink(missing_ok=True)
        journal.unlink()
    if txn.exists():
        shutil.rmtree(txn)
    return restored


def commit(install: Install, changes: dict[str, bytes], state: dict[str, dict],
           step: Callable[[str], None] = lambda s: None) -> None:
    """Write ``changes`` (engine files) and ``state`` (our state file) all or nothing.

    ``step`` is called before each write step; tests use it to kill the process there.
    """
    txn = _txn(install)
    targets = {rel: install.path(rel) for rel in sorted(changes)}
    entries: list[dict[str, Any]] = []
    state_before = _state_file(install).exists()
    try:
        txn.mkdir()
        for i, (rel, target) in enumerate(targets.items()):
            original = target.read_bytes()
            mode = stat.S_IMODE(target.stat().st_mode)
            entries.append({"rel": rel, "old": sha256_record(original), "new": sha256_record(changes[rel]),
                            "backup": f"{i}.orig", "mode": mode})
            step(f"backup {rel}")
            # Not fsynced: recovery checks each backup's hash and refuses a torn one.
            _write_file(txn / f"{i}.orig", original, mode)
        if state_before:
            _write_file(txn / "state.orig", _state_file(install).read_bytes())
        step("journal")
        _atomic_json(txn / "journal.json", {"engine": install.engine, "files": entries,
                                            "state_before": state_before})
        for e in entries:
            step(f"temporary {e['rel']}")
            _write_file(_tmp_for(targets[e["rel"]]), changes[e["rel"]], e["mode"])
    except OSError as exc:
        raise _write_error(exc, install, _undo(install)) from None
    try:
        step("bytecode")
        bytecode.remove(install, list(targets))  # a stale .pyc never outlives the source it was compiled from
        for e in entries:
            step(f"rename {e['rel']}")
            os.replace(_tmp_for(targets[e["rel"]]), targets[e["rel"]])
        step("state")
        _atomic_json(_state_file(install), {"engine": install.engine, "version": str(install.version),
                                            "families": state}, durable=False)
        step("commit")
        (txn / "journal.json").unlink()
    except OSError as exc:
        raise _write_error(exc, install, _undo(install)) from None
    shutil.rmtree(txn, ignore_errors=True)


def _undo(install: Install) -> bool:
    """Roll back now; False when that failed too (the journal stays for the next run)."""
    try:
        recover(install)
    except WriteError:
        return False
    return True


def _not_writable(exc: OSError) -> str:
    """What to do, by why: a read-only file system is no permission problem (a read-only image
    layer, a mount, a container started with --read-only: apply in the image build)."""
    if exc.errno == errno.EROFS:
        return ("the file system is read-only: apply in the Docker build (a RUN step before the image is "
                "used read-only), or on a writable mount of the environment")
    return "run as the user that owns the environment (in Docker: before USER)"


def _write_error(exc: OSError, install: Install, rolled_back: bool) -> WriteError:
    why = "the disk is full" if exc.errno == errno.ENOSPC else exc.strerror or str(exc)
    hint = ("nothing was changed; fix the cause and run again" if rolled_back else
            f"the rollback failed too: files may be partly patched until the next '{program.command('apply')}' or "
            f"'{program.command('revert')}' rolls back (verify reports it)")
    return WriteError(f"writing {install.engine}'s files failed: {why}", found=str(exc.filename or install.site),
                      hint=hint)
