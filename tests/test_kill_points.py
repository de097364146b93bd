"""A run SIGKILLed before every write step and every file operation of apply and revert, and of the
recovery that follows one: verify right after the kill says old, new or interrupted (never a
silent mix), and the next apply or revert ends byte-exact, the running engine seeing what the
state file says. Child processes run tests/support/killpoints.py on toy_copies' engine.
The figures are printed at the end of the module.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.core import write
from patcher.core.plan import State
from patcher.environment.engines import sha256_record
from patcher.installer import actions
from tests.support import toy_copies
from tests.support.toy_copies import (
    ALL_FILES,
    FAMILY_FILES,
    KILL_FAMILIES,
    PAIR,
    PATCHED,
    REPO,
    Env,
    cfg_for,
    child_result,
    kinds,
    leftovers,
    new_env,
    record,
    run,
)

base_venv = toy_copies.base_venv


def runtime(env: Env) -> tuple[int, int]:
    code = "import toyengine.core as c, toyengine.other as o; print(c.value(), o.other())"
    out = subprocess.run([str(env.python), "-c", code], check=True, capture_output=True, text=True)
    a, b = out.stdout.split()
    return int(a), int(b)


def child(cfg: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.support.killpoints", json.dumps(cfg)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


_SETUPS: dict[tuple, Path] = {}


def kill_setup(base_venv: Path, where: Path, action: str, pre_kill: dict | None = None) -> tuple[Env, tuple[str, ...]]:
    """A fresh install with a state file already present (crlf applied; for revert, everything applied),
    optionally with ``action`` already killed at ``pre_kill``. Prepared once, copied per call.
    Returns the env and the files the run writes."""
    touched = ALL_FILES if action == "revert" else PAIR
    key = (str(base_venv), action, json.dumps(pre_kill))
    if key not in _SETUPS:
        prep = base_venv.parent / f"setup-{len(_SETUPS)}"
        if pre_kill:
            env, _ = kill_setup(base_venv, prep, action)
            proc = child(cfg_for(env, action, kill=pre_kill))
            assert proc.returncode == -9, proc.stderr[-1000:]
        else:
            env = new_env(base_venv, prep, KILL_FAMILIES)
            code, rep = run("apply", env.opts(only=("toyengine/crlf",)))
            assert code == 0 and rep.changed == ["toyengine/crlf.py"]
            if action == "revert":
                code, rep = run("apply", env.opts())
                assert code == 0 and rep.changed == list(PAIR)
        _SETUPS[key] = prep
    prep = _SETUPS[key]
    where.mkdir(parents=True)
    shutil.copytree(prep / "patches", where / "patches")
    shutil.copytree(prep / "venv", where / "venv", symlinks=True)
    return Env(where / "venv", where / "patches"), touched


def check_after_kill(env: Env, touched: tuple[str, ...], label: str) -> str:
    """verify right after a kill: the old state, the new one, or the 'interrupted' note; never a silent mix."""
    k = kinds(env, ALL_FILES)
    assert "OTHER" not in k.values(), f"{label}: a file is neither pristine nor patched: {k}"
    mixed = len({k[r] for r in touched}) > 1
    code, rep = run("verify", env.opts())
    assert isinstance(rep, actions.Report), f"{label}: verify failed: {rep}"
    noted = any(n.startswith("interrupted") for n in rep.notes)
    journal = write.interrupted(rep.install)
    if mixed or journal:
        assert noted and code == 1, f"{label}: files {k}, journal={journal}, but verify says exit {code}, {rep.notes}"
    for st in rep.statuses:
        fk = {k[r] for r in FAMILY_FILES[st.family.id]}
        if fk == {"new"}:
            assert st.state is State.APPLIED, f"{label}: {st.family.id} files patched, verify says {st.state}"
        elif fk == {"old"}:
            allowed = (State.PENDING, State.LOST) if noted else (State.PENDING,)
            assert st.state in allowed, f"{label}: {st.family.id} files pristine, verify says {st.state}"
        else:
            assert st.state is State.CONFLICT and noted, f"{label}: {st.family.id} mixed, verify says {st.state}"
    return "mixed" if mixed else next(iter({k[r] for r in touched}))


def check_recovered_by_apply(env: Env, label: str, probe_runtime: bool = True) -> None:
    code, rep = run("apply", env.opts())
    why = f"{getattr(rep, 'what', '')} {getattr(rep, 'notes', '')}"
    assert code == 0, f"{label}: apply after the kill: exit {code}: {why}"
    assert kinds(env, ALL_FILES) == {r: "new" for r in ALL_FILES}, f"{label}: {kinds(env, ALL_FILES)}"
    assert all(s.state is State.APPLIED for s in rep.statuses), label
    assert not leftovers(env), f"{label}: left behind {leftovers(env)}"
    assert not write.interrupted(rep.install)
    state = write.read_state(rep.install)
    assert sorted(state) == sorted(FAMILY_FILES), f"{label}: state file records {sorted(state)}"
    for fid, rels in FAMILY_FILES.items():
        assert state[fid]["files"] == {r: sha256_record(PATCHED[r]) for r in rels}, f"{label}: {fid} record"
    if probe_runtime:
        assert runtime(env) == (2, 2), f"{label}: the running engine does not see the patch"


def check_recovered_by_revert(env: Env, label: str, probe_runtime: bool = True) -> None:
    code, rep = run("revert", env.opts())
    assert code == 0, f"{label}: revert after the kill: exit {code}: {getattr(rep, 'what', '')}"
    rec = record(env)
    for rel in ALL_FILES:
        assert sha256_record(env.read(rel)) == rec[rel], f"{label}: {rel} is not byte-identical to RECORD"
    assert not leftovers(env), f"{label}: left behind {leftovers(env)}"
    assert not write.interrupted(rep.install)
    assert write.read_state(rep.install) == {}, f"{label}: state still records {write.read_state(rep.install)}"
    code, rep = run("verify", env.opts())
    assert [s.state for s in rep.statuses] == [State.PENDING] * len(FAMILY_FILES), label
    if probe_runtime:
        assert runtime(env) == (1, 1), f"{label}: the running engine still sees the patch"


def discover(base_venv: Path, where: Path, action: str, kind: str, pre_kill: dict | None = None,
             then: str | None = None) -> list[str]:
    """Names of the kill points (steps or ops) of ``then`` (default: ``action``) on a fresh setup."""
    env, _ = kill_setup(base_venv, where, action, pre_kill)
    log = where / "log"
    res = child_result(child(cfg_for(env, then or action, log=str(log))))
    assert res["exit"] == 0, res
    return [ln.split(" ", 1)[1] for ln in log.read_text().splitlines() if ln.startswith(kind + " ")]


TRIED: dict[str, list[str]] = {}


def each(points: list[str], fn) -> list[str]:
    """fn(n, name) for every kill point, a few at a time (the work is waiting on child processes)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda a: fn(*a), enumerate(points)))


@pytest.mark.parametrize("action", ["apply", "revert"])
def test_kill_at_every_write_step(base_venv, tmp_path, action):
    steps = discover(base_venv, tmp_path / "discover", action, "step")
    _, touched = kill_setup(base_venv, tmp_path / "shape", action)
    # Every write step the protocol names, in order (backups may be one step or one per file).
    wanted = (["journal"] + [f"temporary {r}" for r in touched] + ["bytecode"]
              + [f"rename {r}" for r in touched] + ["state", "commit"])
    assert steps[0].startswith("backup") and [s for s in steps if not s.startswith("backup")] == wanted, steps

    def point(n: int, name: str) -> str:
        label = f"{action} killed before step {n} ({name})"
        env, touched = kill_setup(base_venv, tmp_path / f"k{n}", action)
        proc = child(cfg_for(env, action, kill={"kind": "step", "n": n}))
        assert proc.returncode == -9, f"{label}: not killed: {proc.returncode} {proc.stderr[-500:]}"
        seen = check_after_kill(env, touched, label)
        other = env.copy(tmp_path / f"k{n}-b")
        check_recovered_by_apply(env, label)
        check_recovered_by_revert(other, label)
        return f"{name}: {seen}"

    outcomes = each(steps, point)
    TRIED[f"{action} steps"] = outcomes
    print(f"\n{action}: {len(steps)} kill points at write steps: " + "; ".join(outcomes))


def test_kill_at_every_file_operation_of_apply(base_venv, tmp_path):
    """Finer than the steps: before every write, rename, unlink, bytecode removal and recompile."""
    ops = discover(base_venv, tmp_path / "discover", "apply", "op")
    assert len(ops) >= 10, ops

    def point(n: int, name: str) -> str:
        return kill_op_then_recover(base_venv, tmp_path / f"k{n}", "apply", n,
                                    f"apply killed before op {n} ({name})")

    outcomes = each(ops, point)
    TRIED["apply ops"] = outcomes
    print(f"\napply: {len(ops)} kill points at file operations: {outcomes}")


def kill_op_then_recover(base_venv: Path, where: Path, action: str, n: int, label: str,
                         pre_kill: dict | None = None) -> str:
    """Prepare (optionally after ``action`` was killed at ``pre_kill``), run ``apply`` killed
    before file operation ``n``, check what verify says, then that the next apply recovers."""
    env, touched = kill_setup(base_venv, where, action, pre_kill)
    proc = child(cfg_for(env, "apply", kill={"kind": "op", "n": n}))
    assert proc.returncode == -9, f"{label}: not killed: {proc.returncode} {proc.stderr[-500:]}"
    seen = check_after_kill(env, touched, label)
    check_recovered_by_apply(env, label, probe_runtime=False)
    return seen


@pytest.mark.parametrize("action", ["apply", "revert"])
def test_kill_during_recovery(base_venv, tmp_path, action):
    """A run killed after its renames (the journal holds the rollback); then the run that rolls it
    back is itself killed before each of its file operations. Whatever happens, the next run ends
    consistent and the state file still holds the record of the family applied before."""
    steps = discover(base_venv, tmp_path / "steps", action, "step")
    first_kill = {"kind": "step", "n": steps.index("state")}  # after every rename, before the state file
    ops = discover(base_venv, tmp_path / "discover", action, "op", pre_kill=first_kill, then="apply")
    # Only the roll-back's own operations (up to removing the transaction folder).
    end = next(i for i, o in enumerate(ops) if o.startswith("rmtree") and o.endswith(".txn"))
    ops = ops[:end + 1]
    assert any("replace" in o and "state.orig" in o for o in ops), ops
    print(f"\n{action} killed at 'state', then {len(ops)} kill points in the roll-back")

    def point(n: int, name: str) -> str:
        return kill_op_then_recover(base_venv, tmp_path / f"k{n}", action, n,
                                    f"{action} killed at 'state', then its recovery killed before op {n} ({name})",
                                    pre_kill=first_kill)

    outcomes = each(ops, point)
    TRIED[f"{action} recovery ops"] = outcomes
    print(f"\n{action} recovery: {len(ops)} kill points: {outcomes}")


@pytest.fixture(scope="module", autouse=True)
def _campaign_summary():
    yield
    toy_copies.print_campaign(TRIED)
