"""README promises that no other test checked, each on a real pip install of the toy engine.

Every test here was checked by breaking the code it guards (see the docstrings): a test that
still passes with its guarantee removed is a defect.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from patcher import actions, engines, manifest, write
from patcher.errors import LockBusy, PatcherError
from patcher.plan import State
from tests.support import toy, toy_venv
from tests.support.toy_venv import Killed, as_engine, cli, family, install, only, site_of

ROOT = Path(__file__).resolve().parent.parent
venv = toy_venv.venv


# ------------------------------------------------------------------ requires: blocked, warning, --strict

REQUIRES = """
[[requires]]
distribution = "toydep"
versions = ">=2.0"
severity = "{severity}"
why = "toy needs toydep 2"
"""


def test_blocked_precondition_applies_nothing_and_exits_1(venv, tmp_path):
    """Broken by: plan._preconditions ignoring severity="blocked" (the family is then applied)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches", REQUIRES.format(severity="blocked"))
    core = site / "toyengine" / "core.py"
    before = core.read_bytes()
    r = actions.apply(toy.ENGINE, actions.Options(python=str(python), patches=patches))
    st = only(r)
    assert st.state is State.BLOCKED and r.changed == [] and r.exit_code(False) == 1
    assert "wanted toydep>=2.0, found no toydep" in st.detail and st.hint == "pip install 'toydep>=2.0'"
    assert core.read_bytes() == before


def test_warning_is_exit_0_and_exit_1_with_strict(venv, tmp_path):
    """Broken by: Report.exit_code ignoring warnings under --strict."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches", REQUIRES.format(severity="warning"))
    base = ("--engine", "all", "--python", str(python), "--patches", str(patches), "--json")
    code, out, err = cli("apply", *base)
    assert code == 0, err
    (fam,) = out[0]["families"]
    assert fam["state"] == "applied" and any("toydep" in w for w in fam["warnings"])
    assert toy.run_value(python) == 2
    code, out, err = cli("verify", *base, "--strict")
    assert code == 1 and out[0]["exit"] == 1
    code, out, err = cli("verify", *base)
    assert code == 0


# ------------------------------------------------------------------ file modes, revert safety, refusals


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


def test_revert_refuses_when_it_would_not_give_the_published_file(venv, tmp_path):
    """Broken by: actions' RECORD check before revert writes (the hand edit is then 'reverted' into a
    file no wheel ever had). Without the state file only that check can tell the edit from our lines;
    the family is then left as it is, a conflict (exit 1) naming the file (README: one rule)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    actions.apply(toy.ENGINE, opts)
    (site / write.DIRNAME / f"{toy.ENGINE}.json").unlink()
    core = site / "toyengine" / "core.py"
    core.write_text(core.read_text().replace('return "toy"', 'return "hand edit"'))  # outside the hunk
    before = core.read_bytes()
    code, out, err = cli("revert", "--engine", "all", "--python", str(python),
                         "--patches", str(patches), "--json")
    (fam,) = out[0]["families"]
    assert code == 1 and out[0]["changed"] == [] and fam["state"] == "conflict"
    assert fam["detail"].startswith("toyengine/core.py changed since apply")
    assert fam["hint"].endswith("pip install --force-reinstall --no-deps toyengine==1.0")
    assert core.read_bytes() == before


def test_our_earlier_diff_is_told_apart_from_a_hand_edit(venv, tmp_path):
    """A file an earlier patcher release wrote with a diff we have since changed is not "someone
    edited them": the state file's hashes say it is ours. A real hand edit still says so.
    Broken by: plan._from_files without the _written_by_us branch (the hand-edit wording then)."""
    python, site = venv
    install(python, tmp_path)
    patches = family(tmp_path / "patches")
    opts = actions.Options(python=str(python), patches=patches, probes=False)
    actions.apply(toy.ENGINE, opts)
    diff = patches / toy.ENGINE / "fix" / "v1.diff"
    diff.write_text(diff.read_text().replace("+    return 2", "+    return 3"))  # "the next release of ours"
    st = only(actions.verify(toy.ENGINE, opts))
    assert st.state is State.CONFLICT
    assert "as an earlier patcher release wrote it on 1.0" in st.detail and "variant v1 differs" in st.detail
    assert "our diff changed since" in st.hint and "someone" not in st.hint
    core = site / "toyengine" / "core.py"
    core.write_text(core.read_text().replace('return "toy"', 'return "hand edit"'))
    st = only(actions.verify(toy.ENGINE, opts))
    assert st.state is State.CONFLICT and st.detail.startswith("files are neither published nor ours")
    assert st.hint.startswith("someone edited them")


def test_refusal_whose_evidence_does_not_hold_says_so(venv, tmp_path):
    """A release in a refused range whose files contradict the refusal's evidence: still refused
    (never patched by version alone), with the contradiction as a warning.
    Broken by: plan.assess dropping the refusal-evidence warning."""
    python, site = venv
    install(python, tmp_path, "0.5")  # refused "<1.0" because "core lacks def value"; this one has it
    patches = family(tmp_path / "patches")
    r = actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=patches))
    st = only(r)
    assert st.state is State.REFUSED and r.exit_code(False) == 1
    assert st.warnings == ["the refusal's evidence does not hold here: toyengine/core.py contains 'def value'"]


# ------------------------------------------------------------------ torn backup


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
    assert out["error"]["hint"] == f"reinstall {toy.ENGINE} with pip --force-reinstall --no-deps, then delete that " \
                                   "folder"
    assert core.read_text() == toy.PATCHED  # not replaced by the torn backup
    assert backup.read_bytes() == toy.MODULE_V1.encode()[:20]  # evidence kept for the user


# ------------------------------------------------------------------ locks


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


# ------------------------------------------------------------------ the Docker path and detect.py


def _engine_family(root: Path, engine: str) -> Path:
    fam = root / engine / "fix"
    fam.mkdir(parents=True)
    (fam / "patch.toml").write_text(toy.MANIFEST.replace("toyengine/", f"{engine}/"))
    (fam / "v1.diff").write_text(toy.DIFF.replace("toyengine/", f"{engine}/"))
    (fam / "probes.py").write_text(toy.PROBES)
    return root


def test_default_docker_path_patches_the_running_interpreters_engine(tmp_path, monkeypatch):
    """`python -m patcher apply` with no --python/--site/--engine, run by the venv's own python,
    finds the engine installed in that venv (the README's Dockerfile). Broken by: engines.find
    defaulting to another interpreter than sys.executable."""
    as_engine(monkeypatch, "sglang")
    venv = tmp_path / "venv"
    python = toy.make_venv_seeing_ours(venv)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    toy.pip_install(python, toy.build_wheel(wheels, "1.0"))
    patches = _engine_family(tmp_path / "patches", "sglang")
    (patches / "sglang" / "fix" / "probes.py").write_text(toy.PROBES.replace("toyengine", "sglang"))
    manifest = patches / "sglang" / "fix" / "patch.toml"
    manifest.write_text(manifest.read_text().replace('module = "toyengine.core"', 'module = "sglang.core"'))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([str(python), "-m", "patcher", "apply", "--patches", str(patches), "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (report,) = json.loads(run.stdout)  # --engine all: sglang only, vllm is not installed
    assert report["engine"] == "sglang" and report["python"] == str(python)
    assert report["site"] == str(site_of(python))
    assert report["families"][0]["probes"][0]["status"] == "passed"
    value = subprocess.run([str(python), "-c", "import sglang.core as c; print(c.value())"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert value == "2"


def test_detect_reports_the_installed_engine_and_its_key_family_state(tmp_path, monkeypatch):
    """patcher.detect.drafter_detect in the engine's own interpreter: the release, and a family's
    state from the shipped manifests (a release in an upstream range whose file holds the evidence:
    upstream; without it: conflict). Broken by: drafter_detect returning no state or looking the
    engine up in another interpreter."""
    as_engine(monkeypatch, "sglang")
    venv = tmp_path / "venv"
    python = toy.make_venv_seeing_ours(venv)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == "k25-aux-capture"]
    (entry,) = [u for u in fam.upstream if len(u.evidence) == 1 and u.since == "0.5.10"]
    (ev,) = entry.evidence  # that entry's proof, as a one-file release
    fixed = "".join(f"# {s}\n" for s in ev.contains).encode()
    release = entry.since
    sources = {"sglang/__init__.py": b"", ev.file: fixed}
    code = ("from patcher.detect import drafter_detect; r = drafter_detect({!r}); "
            "print(None if r is None else (r.name, str(r.version), r.state('k25-aux-capture')))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def detect(engine):
        return subprocess.run([str(python), "-c", code.format(engine)], capture_output=True, text=True,
                              check=True, env=env, cwd=tmp_path).stdout.strip()

    assert detect(None) == "None"  # no engine installed in this interpreter
    toy.pip_install(python, toy.build_wheel(wheels, release, sources=sources))
    assert detect("sglang") == f"('sglang', '{release}', 'upstream')"
    assert detect(None) == detect("sglang")
    assert detect("vllm") == "None"
    toy.pip_install(python, toy.build_wheel(wheels, release, sources={**sources, ev.file: b"no fix\n"}),
                    "--force-reinstall")
    assert detect("sglang") == f"('sglang', '{release}', 'conflict')"  # claims the fix, lacks it


def test_patcher_error_has_what_wanted_found_hint():
    err = PatcherError("x failed", wanted="w", found="f", hint="h")
    assert (err.what, err.wanted, err.found, err.hint, err.exit_code) == ("x failed", "w", "f", "h", 2)


# ------------------------------------------------------------------ found by mutmut (issue 13, section 4)


def test_untested_release_matching_a_pre_image_names_the_flag(venv, tmp_path):
    """Survivor plan._unknown hint mutants: the hint is what tells the user how to proceed."""
    python, site = venv
    install(python, tmp_path, "3.0")
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"))))
    assert st.state is State.UNKNOWN and st.hint == f"'patcher apply --allow-untested --python {python}' applies it"


def test_untested_release_with_our_post_image_and_no_record_is_applied(venv, tmp_path):
    """An untested release whose files already hold our variant (state file lost, or applied by an
    older patcher) is reported applied, not 'no variant fits'. The upstream evidence is made to
    differ from our post-image so only the variant can explain the files.
    Survivors plan._unknown in_place = "" / None / `and`."""
    python, site = venv
    install(python, tmp_path, "3.0", toy.PATCHED)
    patches = family(tmp_path / "p")
    manifest_file = patches / toy.ENGINE / "fix" / "patch.toml"
    manifest_file.write_text(manifest_file.read_text().replace('contains = ["return 2"]', 'contains = ["return 3"]'))
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=patches)))
    assert st.state is State.APPLIED and st.variant == "v1" and st.untested
    assert st.probes and st.probes[0]["status"] == "passed"


def test_untested_release_that_no_variant_fits_names_the_nearest(venv, tmp_path):
    """Survivor plan._unknown `in_place = ""` (returned a string for a status here)."""
    python, site = venv
    install(python, tmp_path, "3.0", toy.MODULE_V1.replace("return 1", "return 7"))
    st = only(actions.verify(toy.ENGINE, actions.Options(python=str(python), patches=family(tmp_path / "p"))))
    assert st.state is State.UNKNOWN and st.variant == "v1"
    assert st.detail.startswith("no variant declared for 3.0; nearest is v1")
