"""Guarantees that a mutmut run (issue 13) showed no fast test held: each docstring names the
surviving mutants the test now kills. The run and its verdicts: benchmarks/MUTATION.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from patcher import actions, engines, write
from patcher.errors import WriteError
from tests.support import toy, toy_venv
from tests.support.toy_venv import Killed, cli, family, install

venv = toy_venv.venv


def _opts(python: Path, patches: Path) -> actions.Options:
    return actions.Options(python=str(python), patches=patches, probes=False)


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


def test_the_state_file_records_the_release_and_the_variant(venv, tmp_path):
    """What "lost" later reports ("was applied (variant v1 on 1.0)") comes from here.
    Survivor write.commit state "version": str(None)."""
    python, site = venv
    install(python, tmp_path)
    actions.apply(toy.ENGINE, _opts(python, family(tmp_path / "p")))
    state = json.loads((site / write.DIRNAME / f"{toy.ENGINE}.json").read_text())
    assert (state["engine"], state["version"]) == (toy.ENGINE, "1.0")
    assert state["families"][f"{toy.ENGINE}/fix"]["variant"] == "v1"


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
        write.commit(inst, {"toyengine/core.py": toy.PATCHED.encode()}, {}, lambda rels: None, step=fail_at_state)
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
        write.commit(inst, {"toyengine/core.py": toy.MODULE_V1.encode()}, {}, lambda rels: None, step=fail_at_commit)
    assert (state.read_bytes(), core.read_bytes()) == before


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


def _killed_at(prefix: str):
    def step(name: str) -> None:
        if name.startswith(prefix):
            raise Killed(name)  # what a SIGKILL leaves behind, in-process: no except clause of ours runs
    return step


def _killed_apply(site: Path, at: str = "state") -> None:
    """The toy fix written by a run killed before step ``at`` (journal and backups left behind)."""
    inst = engines.find(toy.ENGINE, site=site)
    with write.locked(inst), pytest.raises(Killed):
        write.commit(inst, {"toyengine/core.py": toy.PATCHED.encode()}, {}, lambda rels: None, step=_killed_at(at))


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


def _killed_run(venv, tmp_path) -> tuple[Path, Path, Path]:
    """A toy install whose apply was killed after its renames: (patches, site, txn folder)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    actions.apply(toy.ENGINE, _opts(python, patches))  # a state file exists: the next run backs it up
    inst = engines.find(toy.ENGINE, site=site)
    with write.locked(inst), pytest.raises(Killed):
        write.commit(inst, {"toyengine/core.py": toy.MODULE_V1.encode()}, {}, lambda rels: None,
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


# ------------------------------------------------------------------ probes.py

PROBE_ROWS = """
[[probe]]
id = "{id}"
module = "{module}"
check = "{check}"
when = ["v1"]
"""

CHECKS = '''
import os, sys


def second(mod):
    assert getattr(mod, "_seen", None) == ["first"], f"ran before 'a-first': {getattr(mod, '_seen', None)}"


def first(mod):
    mod._seen = ["first"]


def environment(mod):
    assert os.environ.get("HF_HUB_OFFLINE") == "1" and os.environ.get("TRANSFORMERS_OFFLINE") == "1", os.environ
    assert sys.dont_write_bytecode, "PYTHONDONTWRITEBYTECODE is not set: verify would write bytecode"
    assert os.environ.get("KIMI_PATCHER_TEST_MARK") == "inherited", "the user's environment is not passed on"


def package(mod):
    assert mod.__name__ == "toyengine"


def silent_death(mod):
    os._exit(3)


def loud_death(mod):
    sys.stderr.write("x" * 400 + "\\n")
    sys.stderr.flush()
    os._exit(3)


def hang(mod):
    import time
    time.sleep(60)


def reads_stdin(mod):
    assert sys.stdin.read() == ""
'''


def _probe_family(root: Path, rows: list[tuple[str, str, str]]) -> Path:
    """The toy family with extra probes (id, module, check) whose checks are CHECKS."""
    patches = family(root, "".join(PROBE_ROWS.format(id=i, module=m, check=c) for i, m, c in rows))
    probes_py = patches / toy.ENGINE / "fix" / "probes.py"
    probes_py.write_text(probes_py.read_text() + CHECKS)
    return patches


def _probes_of(report) -> dict[str, tuple[str, str]]:
    return {p["id"]: (p["status"], p["detail"]) for st in report.statuses for p in st.probes}


def test_probes_of_one_module_run_in_id_order_whatever_the_declaration_order(venv, tmp_path):
    """groups() promises that declaration order never changes what runs in what order: probes
    sharing an interpreter run sorted by (family, id). Declared here as b-second, a-first.
    Survivors probes.groups sort key None / dropped (declaration order)."""
    python, site = venv
    install(python, tmp_path)
    patches = _probe_family(tmp_path / "p", [("b-second", "toyengine.core", "second"),
                                             ("a-first", "toyengine.core", "first")])
    got = _probes_of(actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches)))
    assert got["b-second"] == ("passed", ""), got


def test_probe_interpreters_get_the_users_environment_offline_and_read_only(venv, tmp_path, monkeypatch):
    """The probe interpreter inherits the user's environment (PATH, CUDA_VISIBLE_DEVICES, ...),
    never reaches the Hub, and writes no bytecode (verify is read-only).
    Survivors probes._interpreter env=None / os.environ dropped / each variable dropped."""
    python, site = venv
    install(python, tmp_path)
    monkeypatch.setenv("KIMI_PATCHER_TEST_MARK", "inherited")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    patches = _probe_family(tmp_path / "p", [("env", "toyengine.core", "environment")])
    got = _probes_of(actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches)))
    assert got["env"] == ("passed", ""), got


def test_a_probe_of_a_package_passes_when_the_package_is_the_patched_copy(venv, tmp_path):
    """A probed module can be a package (its file is __init__.py): the "imported from another copy"
    check must accept it. Survivors probes._module_file __init__.py misspelt."""
    python, site = venv
    install(python, tmp_path)
    patches = _probe_family(tmp_path / "p", [("pkg", "toyengine", "package")])
    got = _probes_of(actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches)))
    assert got["pkg"] == ("passed", ""), got


def _one_probe(venv, tmp_path, check: str, timeout: float = 60) -> tuple[str, str]:
    python, site = venv
    install(python, tmp_path)
    patches = _probe_family(tmp_path / "p", [("x", "toyengine.core", check)])
    report = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches, probe_timeout=timeout))
    return _probes_of(report)["x"]


def test_an_interpreter_that_dies_silently_is_reported_so(venv, tmp_path):
    """Survivors probes._interpreter "no output" / "probe interpreter " misspelt."""
    assert _one_probe(venv, tmp_path, "silent_death") == ("failed", "probe interpreter died: exit 3: no output")


def test_a_dying_interpreters_last_line_is_cut_at_300_characters(venv, tmp_path):
    """Survivor probes._interpreter [:301]."""
    assert _one_probe(venv, tmp_path, "loud_death") == ("failed", "probe interpreter died: exit 3: " + "x" * 300)


def test_a_hanging_probe_is_reported_as_timed_out(venv, tmp_path):
    """Survivor probes._interpreter `crash.startswith("timed out") and False` (says "died")."""
    status, detail = _one_probe(venv, tmp_path, "hang", timeout=3)
    assert status == "failed" and detail.startswith("probe interpreter timed out: timed out after 3 s"), detail


def test_probe_interpreters_never_read_the_callers_stdin(venv, tmp_path):
    """An engine import that reads stdin must not hang on the caller's terminal or pipe.
    Survivors probes._interpreter stdin inherited (None / dropped): the probe then waits on the pipe."""
    r, w = os.pipe()
    try:
        saved: int | None = os.dup(0)
    except OSError:  # stdin closed (some CI runners)
        saved = None
    os.dup2(r, 0)  # our stdin: a pipe nobody writes to or closes
    try:
        got = _one_probe(venv, tmp_path, "reads_stdin", timeout=20)
    finally:
        if saved is None:
            os.close(0)
        else:
            os.dup2(saved, 0)
            os.close(saved)
        os.close(r)
        os.close(w)
    assert got == ("passed", ""), got


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


def test_a_family_not_applied_runs_no_probes(venv, tmp_path):
    """Probes run for applied (by variant) and upstream families only: a pending family's
    "upstream" probe would fail on the pristine file. Survivor probes.selected `UPSTREAM or True`."""
    python, site = venv
    install(python, tmp_path)
    report = actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p")))
    (st,) = report.statuses
    assert st.state.value == "pending" and st.probes == []


REFUSED_FAMILY = """title = "refused first"
why = "sorted before the toy fix"
refs = ["toy/toy#3"]

[[refused]]
versions = "<2.0"
reason = "not on toy 1.x"
use = "2.0"
evidence = [{ file = "toyengine/core.py", contains = ["def value"] }]
"""


def test_a_family_without_probes_to_run_does_not_stop_the_next_ones(venv, tmp_path):
    """Survivor probes.selected `continue` -> `break` (a refused family listed first then hid
    every later family's probes)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "p")
    first = patches / toy.ENGINE / "a-refused"
    first.mkdir()
    (first / "patch.toml").write_text(REFUSED_FAMILY)
    report = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches))
    states = {st.family.id: (st.state.value, [p["status"] for p in st.probes]) for st in report.statuses}
    assert [st.family.id for st in report.statuses][0] == f"{toy.ENGINE}/a-refused", states
    assert states[f"{toy.ENGINE}/fix"] == ("applied", ["passed"]), states
