"""Reliability campaign: kills at every write step, races, hostile inputs, altered patches, exit codes.

A toy engine (``toyengine``, built as a real wheel and installed with real pip into a venv
once per module, copied per test) carries a two-file family so a partial apply is possible.
Every hostile-input test hashes every file under site-packages before and after (our own
``.kimi-patcher/`` bookkeeping excluded) and demands zero bytes changed.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from patcher import actions, write
from patcher.engines import sha256_record
from patcher.errors import PatcherError
from patcher.plan import State
from tests.support import toy

REPO = Path(__file__).resolve().parent.parent
ENGINE = toy.ENGINE
PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"

# ---------------------------------------------------------------------------------------------
# The toy engine: four modules, each pristine / patched pair known byte for byte.

OTHER_V1 = "X = 1\n\n\ndef other():\n    return X\n"
CRLF_V1 = "A = 1\r\nB = 1\r\nC = 1\r\n"
NONL_V1 = "A = 1\nB = 1\nC = 1"  # no final newline

PRISTINE = {
    "toyengine/core.py": toy.MODULE_V1.encode(),
    "toyengine/other.py": OTHER_V1.encode(),
    "toyengine/crlf.py": CRLF_V1.encode(),
    "toyengine/nonl.py": NONL_V1.encode(),
}
PATCHED = {
    "toyengine/core.py": toy.PATCHED.encode(),
    "toyengine/other.py": OTHER_V1.replace("X = 1", "X = 2").encode(),
    "toyengine/crlf.py": CRLF_V1.replace("B = 1", "B = 2").encode(),
    "toyengine/nonl.py": NONL_V1.replace("C = 1", "C = 2").encode(),
}

CORE_DIFF = toy.DIFF
OTHER_DIFF = """--- a/toyengine/other.py
+++ b/toyengine/other.py
@@ -1,4 +1,4 @@
-X = 1
+X = 2
 
 
 def other():
"""
CRLF_DIFF = """--- a/toyengine/crlf.py
+++ b/toyengine/crlf.py
@@ -1,3 +1,3 @@
 A = 1
-B = 1
+B = 2
 C = 1
"""
NONL_DIFF = """--- a/toyengine/nonl.py
+++ b/toyengine/nonl.py
@@ -1,3 +1,3 @@
 A = 1
 B = 1
-C = 1
\\ No newline at end of file
+C = 2
\\ No newline at end of file
"""

PAIR = ("toyengine/core.py", "toyengine/other.py")


def manifest(diffs: list[str], versions: str = ">=1.0,<2.0", extra: str = "") -> str:
    return (f'title = "toy"\nwhy = "tests"\n\n[[variant]]\nid = "v1"\nversions = "{versions}"\n'
            f"diffs = {json.dumps(diffs)}\n" + extra)


FAMILIES = {
    # name -> {file name: text}
    "pair": {"patch.toml": manifest(["core.diff", "other.diff"]), "core.diff": CORE_DIFF, "other.diff": OTHER_DIFF},
    "crlf": {"patch.toml": manifest(["crlf.diff"]), "crlf.diff": CRLF_DIFF},
    "nonl": {"patch.toml": manifest(["nonl.diff"]), "nonl.diff": NONL_DIFF},
}


def write_families(root: Path, families: dict[str, dict[str, str]]) -> Path:
    for name, files in families.items():
        d = root / ENGINE / name
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            (d / fname).write_bytes(text.encode())
    return root


def build_wheel(dest: Path, version: str, sources: dict[str, bytes]) -> Path:
    return toy.build_wheel(dest, version, sources=sources)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base")
    python = toy.make_venv(root / "venv")
    toy.pip_install(python, build_wheel(root, "1.0", PRISTINE))
    return root / "venv"


@dataclass
class Env:
    venv: Path
    patches: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        return self.venv / "lib" / PY / "site-packages"

    def opts(self, **kw) -> actions.Options:
        kw.setdefault("probes", False)
        return actions.Options(python=str(self.python), patches=self.patches, **kw)

    def read(self, rel: str) -> bytes:
        return (self.site / rel).read_bytes()

    def copy(self, dest: Path) -> Env:
        shutil.copytree(self.venv, dest, symlinks=True)
        return Env(dest, self.patches)


def new_env(base_venv: Path, where: Path, families=("pair", "crlf", "nonl")) -> Env:
    where.mkdir(parents=True, exist_ok=True)
    patches = where / "patches"
    if not patches.exists():
        write_families(patches, {k: FAMILIES[k] for k in families})
    shutil.copytree(base_venv, where / "venv", symlinks=True)
    return Env(where / "venv", patches)


@pytest.fixture
def env(base_venv, tmp_path) -> Env:
    return new_env(base_venv, tmp_path / "e")


def snapshot(root: Path) -> dict[str, str]:
    """Hash of every file under root except our own bookkeeping (symlinks hashed as their target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if ".kimi-patcher" in p.parts:
            continue
        if p.is_symlink():
            out[str(p.relative_to(root))] = "->" + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run(action: str, opts: actions.Options, engine: str = ENGINE):
    """(exit code as the CLI would return it, report or error)."""
    try:
        report = getattr(actions, action)(engine, opts)
    except PatcherError as exc:
        return exc.exit_code, exc
    return report.exit_code(opts.strict), report


def record(env: Env) -> dict[str, str]:
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    return {ln.split(",")[0]: ln.split(",")[1] for ln in (info / "RECORD").read_text().splitlines()}


def leftovers(env: Env) -> list[str]:
    tmp = [str(p) for p in env.site.rglob(f"*{write.TMP_SUFFIX}")]
    home = env.site / write.DIRNAME
    if (home / f"{ENGINE}.txn").exists():
        tmp.append(str(home / f"{ENGINE}.txn"))
    return tmp


def kinds(env: Env, rels) -> dict[str, str]:
    out = {}
    for rel in rels:
        data = env.read(rel)
        out[rel] = "old" if data == PRISTINE[rel] else "new" if data == PATCHED[rel] else "OTHER"
    return out


def runtime(env: Env) -> tuple[int, int]:
    code = "import toyengine.core as c, toyengine.other as o; print(c.value(), o.other())"
    out = subprocess.run([str(env.python), "-c", code], check=True, capture_output=True, text=True)
    a, b = out.stdout.split()
    return int(a), int(b)


def child(cfg: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.support.killpoints", json.dumps(cfg)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def child_result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# 1. Kill points.

KILL_FAMILIES = ("pair", "crlf")
FAMILY_FILES = {"toyengine/pair": PAIR, "toyengine/crlf": ("toyengine/crlf.py",)}
ALL_FILES = tuple(sorted((*PAIR, "toyengine/crlf.py")))


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


def cfg_for(env: Env, action: str, **kw) -> dict:
    return {"action": action, "engine": ENGINE, "python": str(env.python), "patches": str(env.patches), **kw}


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
    assert code == 0, f"{label}: apply after the kill: exit {code}: {getattr(rep, 'what', '')} {getattr(rep, 'notes', '')}"
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


# ---------------------------------------------------------------------------------------------
# 2. Races: the lock serialises runs; exactly one does the work.


def race(tmp_path: Path, cfgs: list[dict]) -> list[dict]:
    gate = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.killpoints", json.dumps(dict(c, gate=str(gate)))],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for c in cfgs]
    deadline = time.monotonic() + 90
    while len(list(tmp_path.glob("go.*.ready"))) < len(cfgs) and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append(child_result(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)))
    return out


@pytest.mark.parametrize("n", [2, 8])
def test_concurrent_applies_do_the_work_once(base_venv, tmp_path, n):
    env = new_env(base_venv, tmp_path / "e", KILL_FAMILIES)
    results = race(tmp_path, [cfg_for(env, "apply")] * n)
    workers = [r for r in results if r.get("changed")]
    assert len(workers) == 1, f"{len(workers)} of {n} applies wrote: {results}"
    assert workers[0]["changed"] == list(ALL_FILES)
    assert all(r["exit"] == 0 and r["states"] == {f: "applied" for f in FAMILY_FILES} for r in results), results
    assert kinds(env, ALL_FILES) == {r: "new" for r in ALL_FILES}
    assert not leftovers(env)
    TRIED[f"race {n} applies"] = [f"{len(workers)} wrote, {n - len(workers)} no-op"]
    print(f"\n{n} concurrent applies: exactly one wrote {workers[0]['changed']}, the others were no-ops")


@pytest.mark.parametrize("start", ["pristine", "applied"])
def test_apply_racing_revert_ends_consistent(base_venv, tmp_path, start):
    seen = []
    for i in range(3):
        env = new_env(base_venv, tmp_path / f"e{i}", KILL_FAMILIES)
        if start == "applied":
            assert run("apply", env.opts())[0] == 0
        a, r = race(tmp_path / f"e{i}", [cfg_for(env, "apply"), cfg_for(env, "revert")])
        final = set(kinds(env, ALL_FILES).values())
        assert final in ({"new"}, {"old"}), f"round {i}: files mixed after apply || revert: {kinds(env, ALL_FILES)}"
        assert a["exit"] == 0 and r["exit"] == 0, (a, r)
        if final == {"new"}:  # revert ran first (nothing or everything to undo), then apply
            assert a["changed"] == list(ALL_FILES) and r["changed"] in ([], list(ALL_FILES)), (a, r)
        else:  # apply first, then revert undid everything
            assert r["changed"] == list(ALL_FILES), (a, r)
        assert not leftovers(env)
        seen.append(final.pop())
    print(f"\napply || revert from {start}: final states {seen}")


# ---------------------------------------------------------------------------------------------
# 3. Hostile and broken inputs: a clear error, the documented exit code, zero bytes changed.


def refused(env: Env, expect_exit: int, action: str = "apply", ignore_pyc: bool = False, **kw):
    before = snapshot(env.site)
    try:
        code, rep = run(action, env.opts(**kw))
    except OSError as exc:  # not a PatcherError: the CLI would print a traceback
        pytest.fail(f"{action} raised {type(exc).__name__}: {exc} instead of a clear error")
    after = snapshot(env.site)
    if ignore_pyc:
        before = {k: v for k, v in before.items() if "__pycache__" not in k}
        after = {k: v for k, v in after.items() if "__pycache__" not in k}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert code == expect_exit, f"exit {code}, wanted {expect_exit}: {rep}"
    assert changed == [], f"bytes changed: {changed}"
    return rep


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
    "absolute-in-a-b": (CORE_DIFF.replace("a/toyengine/core.py", "a//tmp/evil.py").replace("b/toyengine/core.py",
                                                                                             "b//tmp/evil.py"), "unsafe"),
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


def test_editable_install(env):
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///x", "dir_info": {"editable": True}}))
    rep = refused(env, 2)
    assert "editable" in rep.what, rep
    refused(env, 2, action="verify")
    refused(env, 2, action="revert")


def test_shadow_copy_without_dist_info_on_pythonpath(env, tmp_path, monkeypatch):
    shadow = tmp_path / "shadow"
    shutil.copytree(env.site / "toyengine", shadow / "toyengine")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    before = snapshot(shadow)
    rep = refused(env, 2)
    assert "not from an installed wheel" in rep.what, rep
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


def test_unreadable_site_packages(env, tmp_path):
    code, rep = run("verify", actions.Options(site=tmp_path / "nowhere", patches=env.patches, probes=False))
    assert code == 2 and isinstance(rep, PatcherError)


# ---------------------------------------------------------------------------------------------
# 4 & 5. Our released patches against a real SGLang release tree; the CLI as Docker runs it.

SGLANG_FILES = ("sglang/srt/models/llama_eagle3.py",)


@pytest.fixture(scope="module")
def sglang_site(tmp_path_factory) -> Path:
    from patcher.maintainer import wheels

    src = wheels.tree("sglang", "0.5.9")
    dest = tmp_path_factory.mktemp("sglang") / "site"
    for info in src.glob("sglang-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    for rel in SGLANG_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dest / rel)
    return dest


@pytest.fixture
def sg(sglang_site, tmp_path) -> Path:
    site = tmp_path / "site"
    shutil.copytree(sglang_site, site)
    return site


def cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m patcher`` as a container entrypoint runs it: no TTY, stdin closed."""
    return subprocess.run([sys.executable, "-m", "patcher", *argv], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300, env=dict(os.environ, TERM="dumb"), check=False)


def released_family(tmp_path: Path) -> Path:
    root = tmp_path / "patches"
    shutil.copytree(REPO / "patches" / "sglang" / "eagle3-drafter-keys", root / "sglang" / "eagle3-drafter-keys")
    return root


@pytest.mark.wheels
@pytest.mark.parametrize("alteration", ["crlf", "lone-cr", "truncated"])
def test_released_diff_altered_after_release_is_detected_before_writing(sg, tmp_path, alteration):
    import io

    from patcher.__main__ import main

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


@pytest.mark.wheels
def test_cli_json_and_exit_codes_without_a_tty(sg, tmp_path):
    base = ["--engine", "sglang", "--site", str(sg), "--json", "--patches", str(released_family(tmp_path))]
    rec = {ln.split(",")[0]: ln.split(",")[1] for ln in (sg / "sglang-0.5.9.dist-info/RECORD").read_text().splitlines()}

    def family(proc) -> dict:
        (report,) = json.loads(proc.stdout)  # stdout is JSON and nothing else
        (fam,) = report["families"]
        assert report["exit"] == proc.returncode
        return fam

    p = cli("verify", *base, "--no-probes")
    assert p.returncode == 1 and family(p)["state"] == "pending" and p.stderr == "", p
    p = cli("apply", *base, "--dry-run", "--no-probes")
    assert p.returncode == 0 and family(p)["state"] == "pending", p
    assert sha256_record((sg / SGLANG_FILES[0]).read_bytes()) == rec[SGLANG_FILES[0]]
    p = cli("apply", *base, "--no-probes")
    assert p.returncode == 0 and family(p)["state"] == "applied", p
    assert json.loads(p.stdout)[0]["changed"] == list(SGLANG_FILES)
    # With probes: this partial tree (one module, no torch) cannot import the engine; whatever the
    # probe interpreter prints, stdout stays one JSON document and a failed probe is a non-zero exit.
    p = cli("verify", *base)
    fam = family(p)
    assert fam["state"] == "applied" and fam["probes"], p
    assert all(pr["status"] != "passed" for pr in fam["probes"])
    assert p.returncode == (1 if any(pr["status"] == "failed" for pr in fam["probes"]) else 0), p
    p = cli("verify", *base, "--strict")
    assert p.returncode == 1 and family(p)["state"] == "applied", p  # probes could not run: not fully proven
    # A hand edit inside the patched region: a conflict, exit 1, JSON still clean.
    f = sg / SGLANG_FILES[0]
    f.write_bytes(f.read_bytes().replace(b"unmatched = []", b"unmatched = list()", 1))
    p = cli("verify", *base, "--no-probes")
    assert p.returncode == 1 and family(p)["state"] == "conflict", p
    # An environment error: exit 2, the message on stderr, nothing on stdout that is not JSON.
    p = cli("verify", "--engine", "sglang", "--site", str(sg / "nowhere"), "--json")
    assert p.returncode == 2 and p.stderr.startswith("error:"), p
    assert p.stdout.strip() == "" or json.loads(p.stdout) is not None
    p = cli("verify", "--engine", "nonsense")
    assert p.returncode == 2 and p.stdout == "" and "invalid choice" in p.stderr, p


@pytest.fixture(scope="module", autouse=True)
def _campaign_summary():
    yield
    if TRIED:
        print("\nreliability campaign:")
        for k, v in TRIED.items():
            print(f"  {k}: {len(v)} tried: {v}")
