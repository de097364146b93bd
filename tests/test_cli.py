"""patcher/cli/main.py, the CLI through main(argv): exact lines and exit codes, on real published
releases (a site-packages holding their files) and on the toy engine.

Each test failed on the code before the fix it came with (the first ones with a review's list of
CLI defects, 2026-11; the later ones with a review of what the user reads, 2026-12).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from patcher import engine_specs
from patcher.cli.main import main
from patcher.core import catalogue, manifest, write
from patcher.environment import engines
from patcher.maintainer import wheels
from tests.support import toy
from tests.support.cli_on_release import cli, install
from tests.test_drafter import eagle3_config, make_drafter

ROOT = Path(__file__).resolve().parent.parent
NAMES = engine_specs.NAMES  # every engine, found in the registry (issue 59: never a list written here)
CHOICES = ", ".join(repr(n) for n in (*NAMES, "all"))
BOOKKEEPING = ("  note: .kimi-patcher/ in this site-packages is patcher's bookkeeping: 'patcher revert --site {}' "
               "removes it with our edits; run that before 'pip uninstall kimi-patcher'")


# --- usage and environment errors -------------------------------------------------------

def test_engine_not_installed_is_exit_2_with_wanted_found_hint(tmp_path):
    code, out, err = cli("verify", "--engine", "vllm", "--site", tmp_path)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: vllm is not installed",
        "  wanted: a vllm distribution",
        f"  found:  none (site: {tmp_path})",
        "  hint:   install it there, or point --site at the environment that has it",  # --site was passed
    ]


def test_missing_site_dir_is_exit_2(tmp_path):
    code, _, err = cli("verify", "--engine", "vllm", "--site", tmp_path / "nope")
    assert code == 2 and err.startswith(f"error: {tmp_path / 'nope'} is not a directory")


# --- --json on every exit 2 -----------------------------------------------------------

@pytest.mark.parametrize("argv, what, wanted, found", [
    (("verify", "--engine", "foo", "--json"),
     f"usage: argument --engine: invalid choice: 'foo' (choose from {CHOICES})",
     f"--engine one of {CHOICES}", "--engine foo"),
    (("verify", "--frobnicate", "--json"), "usage: unrecognized arguments: --frobnicate",
     "one of --debug, --engine, --help, --json, --no-probes, --only, --probe-timeout, --python, --quiet, --site, "
     "--skip, --strict, --verbose", "--frobnicate"),
])
def test_usage_errors_are_json_on_stdout(argv, what, wanted, found):
    """What was wanted and found, like every other error (issue 42: they were empty strings)."""
    code, out, err = cli(*argv)
    assert code == 2
    assert json.loads(out) == {"schema": "patcher.report/1", "error": {"what": what, "wanted": wanted, "found": found,
                                         "hint": "'patcher verify --help' lists the flags and their defaults"},
                               "exit": 2}
    assert err.splitlines()[0] == f"error: {what}"


# --- every flag has help, default and validation --------------------------------------

@pytest.mark.parametrize("value", ["-1", "0", "nan", "soon"])
def test_probe_timeout_is_validated(value):
    code, _, err = cli("verify", "--probe-timeout", value)
    assert code == 2 and err.splitlines()[0].startswith("error: usage: argument --probe-timeout: ")


@pytest.mark.parametrize("command", ["apply", "verify", "revert", "list"])
def test_every_flag_has_help_and_a_default(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    flags = {"apply": ["--engine", "--only", "--skip", "--json", "--debug", "--python", "--site", "--strict",
                       "--no-probes", "--probe-timeout", "--dry-run", "--allow-untested"],
             "verify": ["--engine", "--only", "--skip", "--json", "--debug", "--python", "--site", "--strict",
                        "--no-probes", "--probe-timeout"],
             "revert": ["--engine", "--only", "--skip", "--json", "--debug", "--python", "--site", "--strict",
                        "--no-probes", "--probe-timeout", "--dry-run"],
             "list": ["--engine", "--only", "--skip", "--json", "--debug"]}[command]
    options = text.split("options:")[1]
    for flag in flags:
        after = options.split(flag, 1)[1]
        assert "default: " in after.split(" --", 1)[0], f"{command} {flag} shows no default"
    assert "(default: all;" in options and "(default: 180)" in options or command == "list"


# --- --python -------------------------------------------------------------------------

def test_python_and_site_together_is_a_usage_error(tmp_path):
    code, _, err = cli("verify", "--python", "/bin/false", "--site", tmp_path)
    assert code == 2
    assert err.splitlines()[0] == "error: usage: argument --site: not allowed with argument --python"


def test_neither_engine_hint_names_the_flag_given(tmp_path):
    code, _, err = cli("verify", "--site", tmp_path)
    assert code == 2 and err.splitlines() == [
        f"error: neither {' nor '.join(NAMES)} is installed",
        f"  wanted: a distribution of {' or '.join(NAMES)} in the environment patcher reads",
        f"  found:  none (site: {tmp_path})",
        "  hint:   point --site at the environment that runs the engine"]


# --- list is the catalogue ------------------------------------------------------------

def test_list_says_it_is_the_catalogue_and_merges_sub_ranges():
    code, out, _ = cli("list", "--only", "vllm/eagle3-drafter-keys", "--only", "sglang/k25-aux-capture")
    assert code == 0 and out.splitlines() == [
        "the catalogue (what an install gets: 'patcher verify'), each family's entries by release, oldest first",
        "vllm/eagle3-drafter-keys: vLLM EAGLE-3 drafter loader accepts both midlayer.* and layers.0.* keys",
        "  upstream since 0.9.0: >=0.9.0",
        "sglang/k25-aux-capture: SGLang Kimi-K2.5 wrapper forwards the EAGLE-3 hooks to its DeepSeek-V3 "
        "language model",
        "  refused >=0.5.1,<0.5.4.post2 (use 0.5.10)",
        "  upstream since 0.5.4.post2: >=0.5.4.post2,<0.5.9 (Kimi-K2 targets only: this release has no "
        "kimi_k25.py; Kimi-K2.5 needs 0.5.9 with this patch, or 0.5.10+)",
        "  variant v1: ==0.5.9",
        "  upstream since 0.5.10: >=0.5.10",
    ]


@pytest.mark.parametrize("flag", [("--python", "python3"), ("--site", "/tmp"), ("--strict",), ("--no-probes",),
                                  ("--probe-timeout", "5")])
def test_list_refuses_flags_it_would_ignore(flag):
    code, _, err = cli("list", *flag)
    assert code == 2 and err.splitlines()[0] == f"error: usage: unrecognized arguments: {' '.join(flag)}"


def test_list_json_names_every_family():
    code, out, _ = cli("list", "--json")
    ids = {f["id"] for f in json.loads(out)["families"]}
    assert code == 0 and "sglang/eagle3-drafter-keys" in ids and "vllm/eagle3-target-whitelist" in ids


# --- a sub-range says what it covers --------------------------------------------------

@pytest.mark.wheels
def test_upstream_sub_range_says_what_it_covers(tmp_path):
    site = install(tmp_path, "sglang", "0.5.5")
    code, out, _ = cli("verify", "--engine", "sglang", "--site", site, "--only", "k25-aux-capture", "--no-probes")
    assert code == 0 and out.splitlines() == [
        f"sglang 0.5.5 at {site}",
        "  ok   sglang/k25-aux-capture: upstream: fixed upstream since 0.5.4.post2 (sgl-project/sglang#12319; "
        "Kimi-K2 targets only: this release has no kimi_k25.py; Kimi-K2.5 needs 0.5.9 with this patch, or 0.5.10+)",
        "exit 0: 1 family in the wanted state (1 upstream); probes: not run"]


# --- a file we patched, edited afterwards ---------------------------------------------

@pytest.mark.wheels
def test_edit_after_apply_is_a_warning_that_says_what_revert_does(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    sel = ("--engine", "sglang", "--site", site, "--no-probes", "--only", "eagle3-drafter-keys")
    assert cli("apply", *sel)[0] == 0
    with open(site / "sglang/srt/models/llama_eagle3.py", "a") as f:
        f.write("# a local tweak\n")
    warning = ("       warning: sglang/srt/models/llama_eagle3.py changed since apply (our hunks are intact, other "
               f"lines differ); 'patcher revert --site {site}' leaves it as it is and exits 1 (conflict); to get "
               "the published file back: python -m pip install --force-reinstall --no-deps sglang==0.5.9, run with "
               f"the python whose site-packages is {site}")
    code, out, _ = cli("verify", *sel)
    assert code == 0 and out.splitlines()[1:] == [
        "  ok   sglang/eagle3-drafter-keys: applied [v1]: variant v1 is in place", warning, BOOKKEEPING.format(site),
        "exit 0: 1 family in the wanted state (1 applied); probes: not run"]
    code, out, _ = cli("verify", *sel, "--strict")
    assert code == 1 and out.splitlines()[-1] == "exit 1: sglang/eagle3-drafter-keys has a warning (--strict)"
    assert cli("revert", *sel)[0] == 1  # what the warning said


@pytest.mark.wheels
def test_families_sharing_a_file_applied_one_by_one_are_not_edits(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    base = ("--engine", "sglang", "--site", site, "--no-probes")
    assert cli("apply", *base, "--only", "eagle3-drafter-keys")[0] == 0
    assert cli("apply", *base, "--only", "eagle3-loud-fc-skip")[0] == 0  # the same llama_eagle3.py
    code, out, _ = cli("verify", *base, "--only", "eagle3-drafter-keys", "--only", "eagle3-loud-fc-skip", "--strict")
    assert code == 0 and "warning" not in out
    assert cli("revert", *base, "--only", "eagle3-loud-fc-skip")[0] == 0
    code, out, _ = cli("verify", *base, "--only", "eagle3-drafter-keys", "--strict")
    assert code == 0 and "warning" not in out


# --- the line that differs ------------------------------------------------------------

def _edit(path: Path, old: str, new: str) -> int:
    lines = path.read_text().split("\n")
    at = lines.index(old)
    lines[at] = new
    path.write_text("\n".join(lines))
    return at + 1


@pytest.mark.wheels
@pytest.mark.parametrize("new, shown", [
    ('            "deepseek_v33",', "'\"deepseek_v3\",' (line 5 of the hunk's new text), found '\"deepseek_v33\",'"),
    ('            "deepseek_v3",  ', "'            \"deepseek_v3\",' (line 5 of the hunk's new text), "
                                    "found '            \"deepseek_v3\",  '"),
])
def test_conflict_names_the_line_that_differs(tmp_path, new, shown):
    site = install(tmp_path, "vllm", "0.16.0")
    sel = ("--engine", "vllm", "--site", site, "--no-probes", "--only", "eagle3-target-whitelist")
    assert cli("apply", *sel)[0] == 0
    line = _edit(site / "vllm/config/speculative.py", '            "deepseek_v3",', new)
    code, out, _ = cli("verify", *sel)
    assert code == 1 and out.splitlines()[1:] == [
        "  NO   vllm/eagle3-target-whitelist: conflict: files are neither published nor ours: "
        f"vllm/config/speculative.py: hunk 1/1 does not apply (line 694); wanted {shown} (file line {line})",
        "       hint: someone edited them; put the published files back (python -m pip install --force-reinstall "
        f"--no-deps vllm==0.16.0, run with the python whose site-packages is {site}) and apply again",
        BOOKKEEPING.format(site),
        "exit 1: vllm/eagle3-target-whitelist is in conflict"]


# --- a non-zero exit says why, last ---------------------------------------------------

@pytest.mark.wheels
def test_apply_that_writes_nothing_does_not_claim_the_wanted_state(tmp_path):
    site = install(tmp_path, "vllm", "0.10.2")
    code, out, _ = cli("apply", "--engine", "vllm", "--site", site, "--no-probes",
                       "--only", "eagle3-target-whitelist", "--only", "mla-aux-capture")
    lines = out.splitlines()
    assert code == 1 and lines[-2:] == [
        "  applied: nothing", "exit 1: vllm/eagle3-target-whitelist and vllm/mla-aux-capture are refused"]
    # the way out is a release, never --skip; said once, then referred to (issue 42: seven copies)
    assert [ln for ln in lines if "hint:" in ln] == [
        "       hint: install vllm 0.11.1 or newer (VERSIONS.md: what each release gets)",
        "       hint: as for vllm/eagle3-target-whitelist above"]


@pytest.mark.wheels
def test_strict_says_why_when_every_line_is_ok():
    site = wheels.tree("sglang", "0.5.5")  # the whole release: the probe imports the engine (read-only)
    code, out, _ = cli("verify", "--engine", "sglang", "--site", site, "--only", "k25-aux-capture", "--strict")
    lines = out.splitlines()
    assert code == 1 and lines[1].startswith("  ok   sglang/k25-aux-capture: upstream:")
    assert lines[2].startswith("       probe k2-capture-regression-guard: not importable: ")
    assert lines[3:] == [
        "  note: no probe could import here (missing tqdm), so they prove nothing yet; run 'patcher verify --site "
        f"{site}' where the engine runs (the GPU host, after start-up) for the full proof",
        "exit 1: sglang/k25-aux-capture: probe k2-capture-regression-guard not importable (--strict)"]


@pytest.mark.wheels
def test_a_failed_probe_is_not_ok():
    site = wheels.tree("sglang", "0.5.5")
    code, out, _ = cli("verify", "--engine", "sglang", "--site", site, "--only", "k25-aux-capture",
                       "--probe-timeout", "0.001")
    lines = out.splitlines()
    assert code == 1 and lines[1].startswith("  FAIL sglang/k25-aux-capture: upstream:")
    assert lines[2].startswith("       probe k2-capture-regression-guard: failed: ")
    assert lines[3:] == ["exit 1: sglang/k25-aux-capture: probe k2-capture-regression-guard failed"]


@pytest.mark.wheels
def test_json_keeps_stdout_pure_and_gives_the_reasons(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    code, out, err = cli("verify", "--engine", "sglang", "--site", site, "--json", "--no-probes",
                         "--only", "k25-aux-capture")
    (report,) = json.loads(out)
    assert code == 1 and report["exit"] == 1 and report["reasons"] == ["sglang/k25-aux-capture is pending"]
    assert err == ""  # stdout is the JSON, and it says why
    assert not (site / ".kimi-patcher").exists()  # verify is read-only


# --- older than the covered range -----------------------------------------------------

@pytest.mark.wheels
def test_old_release_is_refused_by_content_and_untested_is_said(tmp_path):
    site = install(tmp_path, "sglang", "0.4.10")
    k25 = next(f for f in manifest.load_all(manifest.PATCHES, ("sglang",)) if f.name == "k25-aux-capture")
    four = [a for n in ("eagle3-drafter-keys", "eagle3-loud-fc-skip", "k25-aux-capture", "sm120-allreduce-fusion")
            for a in ("--only", n)]
    code, out, _ = cli("apply", "--engine", "sglang", "--site", site, "--no-probes", "--allow-untested", *four)
    lines = out.splitlines()
    assert code == 1 and lines[:6] == [
        f"sglang 0.4.10 at {site}",
        "  ok   sglang/eagle3-drafter-keys: applied (untested release) [v1]: variant v1 is in place",
        "  ok   sglang/eagle3-loud-fc-skip: applied (untested release) [v1]: variant v1 is in place",
        f"  NO   sglang/k25-aux-capture: refused: {k25.refused[0].reason}; use 0.5.10 or newer "
        "(judged by its files: 0.4.10 is older than every release we cover)",
        "       hint: install sglang 0.5.10 or newer (VERSIONS.md: what each release gets)",  # never --skip
        "  ok   sglang/sm120-allreduce-fusion: applied (untested release) [v1]: variant v1 is in place"]
    assert lines[6].startswith("       turn on: ") and lines[7].startswith("       warning: ")
    assert lines[8:] == ["  applied: sglang/srt/layers/communicator.py, sglang/srt/models/llama_eagle3.py",
                         "exit 1: sglang/k25-aux-capture is refused"]


# --- one rule for dry runs ------------------------------------------------------------

@pytest.mark.wheels
def test_dry_runs_exit_as_the_real_run_would(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    sel = ("--engine", "sglang", "--site", site, "--no-probes", "--only", "k25-aux-capture")
    assert cli("apply", *sel, "--dry-run")[:2] == (0, f"sglang 0.5.9 at {site}\n  todo sglang/k25-aux-capture: "
                                                   "pending [v1]: variant v1 is not applied yet\n       hint: run "
                                                   f"'patcher apply --site {site}'\n  would apply: "
                                                   "sglang/srt/models/kimi_k25.py\nexit 0: 1 family would be in "
                                                   "the wanted state (1 to apply); probes: not run\n")
    assert cli("apply", *sel)[:2] == (0, f"sglang 0.5.9 at {site}\n  ok   sglang/k25-aux-capture: applied [v1]: "
                                      "variant v1 is in place\n  applied: sglang/srt/models/kimi_k25.py\n"
                                      "exit 0: 1 family in the wanted state (1 applied); probes: not run\n")
    assert cli("apply", *sel, "-q")[:2] == (0, "")  # nothing to change, nothing to say
    code, out, _ = cli("revert", *sel, "--dry-run")
    assert code == 0 and out.splitlines()[-2:] == [
        "  would revert: sglang/srt/models/kimi_k25.py",
        "exit 0: 1 family would be in the wanted state (1 to revert); probes: not run"]
    code, out, _ = cli("revert", *sel)
    assert code == 0 and out.splitlines()[-1] == (
        "exit 0: 1 family in the wanted state (1 as published); probes: not run")


# --- nothing of ours left after a full revert -----------------------------------------

def test_the_engine_folder_is_gitignored():
    assert ".engine/" in (ROOT / ".gitignore").read_text().split()


@pytest.mark.wheels
def test_full_revert_removes_our_folder_partial_keeps_it(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    base = ("--engine", "sglang", "--site", site, "--no-probes")
    assert cli("apply", *base)[0] == 0
    assert cli("revert", *base, "--only", "k25-aux-capture")[0] == 0
    assert (site / ".kimi-patcher" / "sglang.json").is_file()  # the other families are still ours
    assert cli("revert", *base)[0] == 0
    assert not (site / ".kimi-patcher").exists()
    assert cli("verify", *base)[0] == 1  # pending again, and nothing created by looking


@pytest.mark.wheels
def test_a_run_waiting_on_the_removed_lock_locks_the_new_one(tmp_path):
    site = install(tmp_path, "sglang", "0.5.9")
    inst = engines.find("sglang", site=site)
    got: list[str] = []

    def second_run():
        with write.locked(inst, timeout=30):
            # The lock file at the path must be the one this run holds: a third run opening
            # it has to wait. (Holding the removed file would leave the path free, or absent.)
            fd = os.open(write.home(inst) / "sglang.lock", os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got.append("free")
            except BlockingIOError:
                got.append("held")
            finally:
                os.close(fd)

    with write.locked(inst):
        waiter = threading.Thread(target=second_run)
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()  # it waits on the lock file we are about to remove
        write.tidy(inst)
        assert not write.home(inst).exists()
    waiter.join(30)
    assert got == ["held"]


# --- what the user reads --------------------------------------------------------------

@pytest.mark.parametrize("argv", [["list"], ["list", "--json"]])
def test_a_reader_that_goes_away_ends_quietly_with_the_sigpipe_status(argv):
    """'patcher list | head -0': the reader is gone before the first byte."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "patcher", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_closed_stdout_mid_report_is_the_sigpipe_status_in_process():
    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    err = io.StringIO()
    assert main(["list"], out=Gone(), err=err) == 141 and err.getvalue() == ""


@pytest.fixture
def toy_engine(tmp_path, monkeypatch):
    """The toy engine (tests/support/toy.py) as the only engine: (patches, selection flags, site).
    Its wheel is unpacked as a site-packages (what pip would write, without pip: fast)."""
    monkeypatch.setattr(manifest, "ENGINES", (toy.ENGINE,))
    patches = toy.write_family(tmp_path / "patches")
    site = tmp_path / "site"
    toy_release(tmp_path, site, "1.0")
    return patches, ("--engine", "all", "--site", site, "--patches", patches), site


def toy_release(tmp_path: Path, site: Path, version: str) -> None:
    """Install ``version`` of the toy engine into ``site``, replacing the one there (pip's upgrade)."""
    for old in [p for p in [site / toy.ENGINE, *site.glob(f"{toy.ENGINE}-*.dist-info")] if p.exists()]:
        shutil.rmtree(old)
    (tmp_path / "wheels").mkdir(exist_ok=True)
    with zipfile.ZipFile(toy.build_wheel(tmp_path / "wheels", version)) as zf:
        zf.extractall(site)


@pytest.mark.parametrize("state_file", ["kept", "deleted"])
def test_revert_leaves_a_file_edited_after_apply_and_says_how_to_restore_it(toy_engine, state_file):
    _, sel, site = toy_engine
    assert cli("apply", *sel)[0] == 0
    core = site / "toyengine/core.py"
    edited = core.read_text() + "# a local tweak\n"
    core.write_text(edited)
    restore = ("python -m pip install --force-reinstall --no-deps toyengine==1.0, run with the python whose "
               f"site-packages is {site}")
    if state_file == "kept":  # verify can tell the edit from our own lines, and says what revert does
        code, out, _ = cli("verify", *sel)
        assert code == 0 and out.splitlines()[2] == (
            "       warning: toyengine/core.py changed since apply (our hunks are intact, other lines differ); "
            f"'patcher revert --site {site}' leaves it as it is and exits 1 (conflict); to get the published file "
            f"back: {restore}")
    else:
        (site / ".kimi-patcher/toyengine.json").unlink()
    for only in ((), ("--only", "fix")):
        code, out, _ = cli("revert", *sel, *only)
        assert code == 1 and out.splitlines()[1:] == [
            "  NO   toyengine/fix: conflict: toyengine/core.py changed since apply (our hunks are intact, other "
            "lines differ); left as it is",
            f"       hint: to get the published file back: {restore}",
            "  reverted: nothing",
            "exit 1: toyengine/fix is in conflict"]
        assert core.read_text() == edited


@pytest.mark.parametrize("flag", ["--site", "--python"])
def test_hints_carry_the_python_or_site_flag_so_they_can_be_pasted(toy_engine, tmp_path, flag):
    patches, _, site = toy_engine
    where = site
    if flag == "--python":  # a bare venv that imports the toy engine from the unpacked site
        where = toy.make_venv(tmp_path / "venv")
        (next((tmp_path / "venv").glob("lib/python*/site-packages")) / "toy.pth").write_text(f"{site}\n")
    code, out, _ = cli("verify", "--engine", "all", flag, where, "--patches", patches, "--no-probes")
    assert code == 1 and out.splitlines()[2] == f"       hint: run 'patcher apply {flag} {where}'"


def test_list_help_says_every_engine_is_listed_installed_or_not(capsys):
    assert main(["list", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "not installed are left out" not in text
    assert f"{', '.join(NAMES)} or all (default: all; installed or not: the catalogue lists what we ship)" in text
    code, out, _ = cli("list", "--json")  # nothing installed here: every engine is listed
    assert code == 0 and {f["id"].split("/")[0] for f in json.loads(out)["families"]} == set(NAMES)


@pytest.mark.parametrize("argv, flag", [(("apply", "--dry"), "--dry"), (("verify", "--no-pro"), "--no-pro"),
                                        (("verify", "--json", "--eng", "vllm"), "--eng vllm")])
def test_abbreviated_flags_are_usage_errors(argv, flag):
    code, _, err = cli(*argv)
    assert code == 2 and err.splitlines()[0] == f"error: usage: unrecognized arguments: {flag}"


def test_port_without_the_port_extra_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "merge3", None)  # what 'import merge3' finds without the extra
    import patcher.maintainer

    for mod in ("patcher.cli.port_cli", "patcher.maintainer.port", "patcher.maintainer.merge"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
        # `from . import merge` takes the package's attribute first: another test may have imported it
        monkeypatch.delattr(patcher.maintainer, mod.rsplit(".", 1)[1], raising=False)
    code, out, err = cli("port", "--engine", "sglang", "--to", "0.5.99")
    assert code == 2 and out == "" and err.splitlines() == [
        "error: patcher port needs the 'port' extra", "  wanted: the merge3 library",
        f"  found:  no module named 'merge3' in {sys.executable}", "  hint:   pip install 'kimi-patcher[port]'"]


def test_drafter_check_without_an_engine_warns_and_strict_exits_1(tmp_path):
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    warning = ("warning: no engine found or named: the engine-specific checks are hints, not a pass; name the "
               "release (--engine E --engine-version V, or --python / --site), or add --strict to exit 1 here")
    code, out, err = cli("drafter", "check", drafter)  # nothing installed in this interpreter
    assert code == 0 and "engine:  none installed or named" in out and err.splitlines() == [warning]
    code, out, err = cli("drafter", "check", drafter, "--strict")
    assert code == 1 and err.splitlines() == [warning]
    code, out, err = cli("drafter", "check", drafter, "--strict", "--json")  # stdout says it: "engine": null
    assert code == 1 and json.loads(out)["exit"] == 1 and json.loads(out)["engine"] is None and err == ""
    named = ("drafter", "check", drafter, "--engine", "sglang", "--engine-version", "0.5.11")
    (code, _, err), strict = cli(*named), cli(*named, "--strict")
    assert err == "" and strict[::2] == (code, "")  # a named release: no warning, --strict changes nothing


def test_revert_after_an_upgrade_leaves_no_state_that_calls_a_later_downgrade_lost(toy_engine, tmp_path):
    _, sel, site = toy_engine
    sel = (*sel, "--no-probes")
    assert cli("apply", *sel)[0] == 0
    toy_release(tmp_path, site, "1.5")  # pip upgrade: pristine files, still covered by the variant
    code, out, _ = cli("verify", *sel)
    assert code == 1 and out.splitlines()[1].startswith("  LOST toyengine/fix: lost [v1]: ")
    assert cli("revert", *sel)[0] == 0
    assert not (site / ".kimi-patcher").exists()  # nothing of ours is left, so no state either
    toy_release(tmp_path, site, "1.0")  # the downgrade
    code, out, _ = cli("verify", *sel)
    assert code == 1 and out.splitlines()[1] == "  todo toyengine/fix: pending [v1]: variant v1 is not applied yet"


def test_report_json_is_named_by_its_schema_on_success_and_on_error(toy_engine):
    _, sel, _ = toy_engine
    for command in ("verify", "apply", "revert"):
        code, out, _ = cli(command, *sel, "--no-probes", "--json")
        (report,) = json.loads(out)
        assert code == 0 or command == "verify"
        assert list(report)[:2] == ["schema", "action"] and report["schema"] == "patcher.report/1"
    for argv in (("verify", "--json", "--frobnicate"), ("apply", *sel, "--json", "--only", "nope")):
        assert json.loads(cli(*argv)[1])["schema"] == "patcher.report/1"
    assert json.loads(cli("list", "--json")[1])["schema"] == "patcher.catalogue/1"
    assert json.loads(cli("list", "--json", "--only", "nope")[1])["schema"] == "patcher.catalogue/1"
    assert json.loads(cli("drafter", "check", "--json", "--frobnicate", "x")[1])["schema"] == "patcher.drafter.check/1"


def test_version_names_the_patch_set_that_runs(capsys, tmp_path):
    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    fams = manifest.load_all(manifest.PATCHES)
    n, variants = len(fams), sum(len(f.variants) for f in fams)
    assert re.fullmatch(rf"patcher \S+ \(patch set: {n} families, {variants} variants, sha256 [0-9a-f]{{12}}\)", line)
    assert line.endswith(f"sha256 {catalogue.identity()['sha256']})")
    copy = shutil.copytree(manifest.PATCHES, tmp_path / "patches", ignore=shutil.ignore_patterns("__pycache__"))
    assert catalogue.identity(copy) == catalogue.identity()  # the same files: the same identity
    diff = next(copy.glob("sglang/*/v1.diff"))
    diff.write_bytes(diff.read_bytes() + b"\n")
    assert catalogue.identity(copy)["sha256"] != catalogue.identity()["sha256"]  # any byte of any diff counts


def test_report_json_carries_the_patch_set(toy_engine):
    patches, sel, _ = toy_engine
    (report,) = json.loads(cli("verify", *sel, "--no-probes", "--json")[1])
    assert report["patch_set"] == catalogue.identity(patches) and report["patch_set"]["families"] == 1


@pytest.mark.parametrize("command, one", [
    ("apply", "1 a family is not: pending, lost, refused, blocked, conflict, unknown release, a failed probe; with "
              "--strict also warnings, untested releases and probes that could not import; or nothing was written "
              "because of a conflict"),
    ("verify", "1 a family is not: pending, lost, refused, blocked, conflict, unknown release, a failed probe; with "
               "--strict also warnings, untested releases and probes that could not import 2 "),
    ("revert", "1 a family is still ours: a conflict (a file edited after apply is left as it is; the report names "
               "it and the pip reinstall that restores it)"),
])
def test_apply_verify_revert_help_lists_the_exit_codes(command, one, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    codes = text.split("exit codes: ")[1]
    assert codes.startswith("0 ") and one in codes
    assert "2 usage or environment error" in codes and "141 stdout closed by its reader" in codes


def test_verify_says_whose_bookkeeping_folder_it_is_and_how_it_goes(toy_engine):
    _, sel, site = toy_engine
    sel = (*sel, "--no-probes")
    assert "note:" not in cli("verify", *sel)[1]  # nothing of ours yet: nothing to explain
    assert cli("apply", *sel)[0] == 0
    code, out, _ = cli("verify", *sel)
    assert code == 0 and (
        BOOKKEEPING.format(site)) in out.splitlines()



def test_an_error_inside_a_run_names_the_command_with_the_runs_site(toy_engine):
    """The location is made where each line is made (program.located), not pasted into the report's
    hints afterwards: an error raised mid-run carries --site as its hints do."""
    _, sel, site = toy_engine
    sel = (*sel, "--no-probes")
    assert cli("apply", *sel)[0] == 0
    state = next(site.glob(".kimi-patcher/*.json"))
    state.write_text('{"schema": 1, "families": []}')
    code, out, err = cli("verify", *sel)
    assert code == 2, (out, err)
    assert f"hint:   delete {state}; 'patcher verify --site {site}' then reports from the files alone" in err, err

REQUIRES = '''
[[requires]]
distribution = "toyflash"
versions = ">=1"
severity = "warning"
why = "the toy kernels need toyflash 1"
'''
GPU_PROBE = '''
[[probe]]
id = "gpu-kernels"
module = "toyengine.gpu"
check = "has_kernels"
when = ["v1"]
'''


def toy_second_family(patches: Path) -> None:
    """A second toy family (toyengine/other.py), with the same requirement and 'turn on' text as
    the first one is given here: two families that would say the same thing."""
    fam = patches / toy.ENGINE / "fix2"
    fam.mkdir()
    (fam / "patch.toml").write_text('title = "toy fix 2"\nwhy = "X must be 2"\nrefs = ["toy/toy#3"]\n\n'
                                    '[[variant]]\nid = "v1"\nversions = ">=1.0,<2.0"\nenable = "--toy-fast"\n'
                                    + REQUIRES + '\n[[probe]]\nid = "x-is-2"\nmodule = "toyengine.other"\n'
                                    'check = "x_is_2"\nwhen = ["v1"]\n')
    (fam / "v1.diff").write_text("--- a/toyengine/other.py\n+++ b/toyengine/other.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n")
    (fam / "probes.py").write_text("def x_is_2(mod):\n    assert mod.X == 2, mod.X\n")
    first = patches / toy.ENGINE / "fix" / "patch.toml"
    first.write_text(first.read_text().replace('versions = ">=1.0,<2.0"\n', 'versions = ">=1.0,<2.0"\nenable = '
                                               '"--toy-fast"\n', 1) + REQUIRES)


def test_a_warning_and_a_turn_on_text_shared_by_two_families_are_said_once(toy_engine):
    patches, sel, _ = toy_engine
    toy_second_family(patches)
    sel = (*sel, "--no-probes")
    warning = "the toy kernels need toyflash 1: wanted toyflash>=1, found no toyflash"
    code, out, _ = cli("verify", *sel)  # pending: the requirement is said when it applies
    assert code == 1 and "warning:" not in out
    assert [f["warnings"] for f in json.loads(cli("verify", *sel, "--json")[1])[0]["families"]] == [[warning]] * 2
    code, out, _ = cli("apply", *sel)
    assert code == 0 and out.splitlines()[1:7] == [
        "  ok   toyengine/fix: applied [v1]: variant v1 is in place",
        "       turn on: --toy-fast",
        f"       warning: {warning}",
        "  ok   toyengine/fix2: applied [v1]: variant v1 is in place",
        "       turn on: as for toyengine/fix above",
        "       warning: as for toyengine/fix above"]


def test_a_clean_verify_ends_with_a_summary_line(toy_engine):
    _, sel, _ = toy_engine
    assert cli("apply", *sel, "--no-probes")[0] == 0
    code, out, _ = cli("verify", *sel)
    assert code == 0 and out.splitlines()[-1] == "exit 0: 1 family in the wanted state (1 applied); probes: 1 passed"
    code, out, _ = cli("verify", *sel, "--no-probes")
    assert code == 0 and out.splitlines()[-1] == "exit 0: 1 family in the wanted state (1 applied); probes: not run"


def test_probes_that_could_not_import_say_the_proof_is_still_to_come(toy_engine, tmp_path):
    patches, sel, site = toy_engine
    (site / "toyengine/gpu.py").write_text("import toycuda  # a dependency outside the engine, absent here\n")
    record = next(site.glob("*.dist-info")) / "RECORD"  # a module the release ships: probes run only on those
    record.write_text(record.read_text() + "toyengine/gpu.py,,\n")
    manifest_file = patches / toy.ENGINE / "fix" / "patch.toml"
    manifest_file.write_text(manifest_file.read_text() + GPU_PROBE)
    (patches / toy.ENGINE / "fix" / "probes.py").write_text(toy.PROBES + "\n\ndef has_kernels(mod):\n    pass\n")
    code, out, _ = cli("apply", *sel)
    assert code == 0 and out.splitlines()[-1] == ("exit 0: 1 family in the wanted state (1 applied); "
                                                  "probes: 1 passed, 1 not importable")
    assert out.splitlines()[-2] == (
        f"  note: 1 of 2 probes could not import here (missing toycuda), so they prove nothing yet; run "
        f"'patcher verify --site {site}' where the engine runs (the GPU host, after start-up) for the full proof")
    assert "       probe gpu-kernels: not importable: missing module toycuda" in out.splitlines()


def test_hints_name_the_command_as_the_user_runs_it(tmp_path, monkeypatch, toy_engine):
    """Run as '.venv/bin/python -m patcher' with no 'patcher' on PATH (the README's set-up), a hint's
    'patcher apply' would run nothing or another install (issue 42): text names the command as run;
    JSON keeps the plain name; a console script beside the interpreter is 'patcher' again."""
    from patcher.cli.main import as_invoked

    _, sel, _ = toy_engine
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    prog = as_invoked(str(venv / "python"))
    assert prog == "venv/bin/python -m patcher"
    out = io.StringIO()
    sel = [str(w) for w in sel]
    assert main(["verify", *sel, "--no-probes"], out=out, err=io.StringIO(), prog=prog) == 1
    assert "hint: run 'venv/bin/python -m patcher apply" in out.getvalue() and "'patcher " not in out.getvalue()
    out = io.StringIO()
    main(["verify", *sel, "--no-probes", "--json"], out=out, err=io.StringIO(), prog=prog)
    assert "'patcher apply" in out.getvalue()
    (venv / "patcher").write_text("#!/bin/sh\n")
    (venv / "patcher").chmod(0o755)
    monkeypatch.setenv("PATH", str(venv))
    assert as_invoked(str(venv / "python")) == "patcher"


def test_list_shows_each_family_by_release_with_ranges_lower_bound_first():
    code, out, _ = cli("list", "--only", "sglang/sm120-allreduce-fusion", "--only", "vllm/mla-aux-capture")
    lines = out.splitlines()
    assert code == 0 and lines[1:4] == ["vllm/mla-aux-capture: vLLM DeepSeek-V2/V3, Kimi-K2 and Kimi-K2.5 targets "
                                        "capture EAGLE-3 aux hidden states",
                                        "  refused <0.11.1 (use 0.11.1)", "  variant B7: >=0.11.1,<0.12.0"]
    assert "  variant v12: >=0.5.4.post2,<0.5.5.post1" in lines  # not '<0.5.5.post1,>=0.5.4.post2'
    starts = [Version(ln.split(": >=")[1].split(",")[0]) for ln in lines if ": >=" in ln and "sglang" not in ln
              and lines.index(ln) > lines.index(next(x for x in lines if x.startswith("sglang/")))]
    assert starts == sorted(starts) and len(starts) > 10  # v1, v2, v3, v12, v13, v4 ...: by release, not by id


@pytest.mark.wheels
@pytest.mark.parametrize("engine, version, readme", [
    ("sglang", "0.5.9", "each probe reports `not importable: missing module numpy`"),
    ("vllm", "0.16.0", "a bare vLLM reports `torch`"),
])
def test_readme_names_the_module_a_bare_engine_probe_misses(tmp_path, engine, version, readme):
    """The README's bare-engine command (the engine installed with --no-deps), run: a venv that has
    nothing but the engine's own files (a copy of the published wheel's tree) apply writes into."""
    site = shutil.copytree(wheels.tree(engine, version), tmp_path / "site")
    python = toy.make_venv(tmp_path / "engine")
    (next((tmp_path / "engine").glob("lib/python*/site-packages")) / "engine.pth").write_text(f"{site}\n")
    code, out, _ = cli("apply", "--engine", engine, "--python", python, "--json")
    (report,) = json.loads(out)
    statuses = {(p["status"], p["detail"]) for f in report["families"] for p in f["probes"]}
    module = "numpy" if engine == "sglang" else "torch"
    assert code == 0 and statuses == {("not importable", f"missing module {module}")}
    assert " ".join(readme.split()) in " ".join((ROOT / "README.md").read_text().split())


def test_vllm_turn_on_line_names_one_option_spelling_and_real_sizes():
    """Each vLLM SM120 variant's 'turn on' text is the one pass_config spelling its releases read
    (enable_fi_allreduce_fusion on 0.11.x, fuse_allreduce_rms after) with the sizes the diff sets,
    never both spellings nor a bare 'MB' placeholder."""
    from patcher.core import manifest

    (fam,) = [f for f in manifest.load_all(manifest.PATCHES, ("vllm",)) if f.name == "sm120-allreduce-fusion"]
    for v in fam.variants:
        spellings = [s for s in ('"enable_fi_allreduce_fusion"', '"fuse_allreduce_rms"') if s in v.enable]
        assert len(spellings) == 1, (v.id, v.enable)
        assert ": MB" not in v.enable and "0.5 MB at TP8" in v.enable, (v.id, v.enable)
        old = manifest.contains(v.versions, manifest.Version("0.11.2"))
        assert spellings[0] == ('"enable_fi_allreduce_fusion"' if old else '"fuse_allreduce_rms"'), v.id


def test_the_references_version_example_is_what_version_prints(capsys):
    """Issue 34 item 9: a count in the docs is generated or tested; this one said 9 and 40 when 15 and
    72 shipped. The example names its shape, never a count or hash (issue 42: a hash copied into the
    docs is stale at the next patch; issue 59: a new engine's families change the counts): the output
    has that shape, and its counts are what ships."""
    from patcher.core import manifest

    text = " ".join((ROOT / "docs" / "reference.md").read_text().split())
    (example,) = re.findall(r"`(patcher \S+ \(patch set: <families> families, <variants> variants, "
                            r"sha256 <12 hex digits>\))`", text)
    shape = re.escape(example).replace(re.escape("<families>"), r"(\d+)").replace(re.escape("<variants>"), r"(\d+)")
    shape = shape.replace(re.escape("<12 hex digits>"), "[0-9a-f]{12}").replace(re.escape("0.1.0"), r"\S+")
    assert main(["--version"]) == 0
    m = re.fullmatch(shape, capsys.readouterr().out.strip())
    fams = manifest.load_all()
    assert m and (int(m[1]), int(m[2])) == (len(fams), sum(len(f.variants) for f in fams))


@pytest.mark.wheels
def test_a_turn_on_line_says_the_fix_it_names_as_the_install_stands(tmp_path):
    """Issue 34 item 5: SGLang's SM120 turn-on line warned 'unless eagle3-fused-allreduce-capture is
    applied' on an install where it was."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.9"), site)
    code, out, _ = cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")
    turn_on = [ln for ln in out.splitlines() if ln.strip().startswith("turn on:") and "allreduce" in ln]
    assert code == 0 and turn_on, out
    assert "unless" not in turn_on[0]
    assert "sglang/eagle3-fused-allreduce-capture, applied here, fixes that" in turn_on[0]


@pytest.mark.wheels
def test_revert_does_not_list_its_own_goal_as_a_to_do(tmp_path):
    """Issue 34 item 7: after revert every family printed 'todo ... pending: variant v5 is not applied yet'."""
    site = tmp_path / "site"
    shutil.copytree(wheels.tree("sglang", "0.5.9"), site)
    assert cli("apply", "--engine", "sglang", "--site", str(site), "--no-probes")[0] == 0
    code, out, _ = cli("revert", "--engine", "sglang", "--site", str(site), "--no-probes")
    families = [ln for ln in out.splitlines() if ln.startswith("  ") and "sglang/" in ln and ":" in ln]
    assert code == 0 and families and not [ln for ln in families if ln.lstrip().startswith("todo")]
    assert "  ok   sglang/eagle3-drafter-keys: as published: nothing of ours in its files" in families


def test_quiet_prints_only_what_is_not_ok_and_the_closing_line(toy_engine):
    """-q (issue 34 item 5): a clean verify is its summary line alone; a pending family is said with its
    hint; an apply that writes names what it wrote, one that has nothing to do prints nothing but exits 0."""
    _, sel, _ = toy_engine
    code, out, _ = cli("verify", *sel, "--no-probes", "-q")
    lines = out.splitlines()
    assert code == 1 and lines[1].startswith("  todo toyengine/fix: pending") and lines[2].startswith("       hint: ")
    assert lines[-1].startswith("exit 1: toyengine/fix is pending") and len(lines) == 4
    code, out, _ = cli("apply", *sel, "--no-probes", "--quiet")
    assert code == 0 and out.splitlines()[1:] == [  # no turn-on, no ok lines
        "  applied: toyengine/core.py", "exit 0: 1 family in the wanted state (1 applied); probes: not run"]
    code, out, _ = cli("apply", *sel, "--no-probes", "-q")
    assert (code, out) == (0, "")
    code, out, _ = cli("verify", *sel, "--no-probes", "-q")
    assert code == 0 and out.splitlines() == ["exit 0: 1 family in the wanted state (1 applied); probes: not run"]


def test_verbose_says_what_was_checked_and_how_long_each_phase_took(toy_engine):
    """-v (issue 34 item 5, as pip and pytest users expect): each file's state, each probe's import
    time, and the seconds per phase; the JSON carries the same timings; -q with -v is a usage error."""
    _, sel, _ = toy_engine
    code, out, _ = cli("apply", *sel, "-v")
    lines = out.splitlines()
    assert code == 0 and "       file toyengine/core.py: applied" in lines
    probe = [ln for ln in lines if ln.lstrip().startswith("probe ")]
    assert probe and all(re.search(r": passed \(toyengine(\.\w+)* imported in \d+\.\d\d s\)$", ln) for ln in probe)
    took = re.fullmatch(r"  took: locate (\S+) s, read (\S+) s, write (\S+) s, probes (\S+) s", lines[-2])
    assert took and all(float(x) >= 0 for x in took.groups())
    code, out, _ = cli("verify", *sel, "--no-probes")  # without -v: neither files nor timings
    assert code == 0 and "file toyengine" not in out and "took:" not in out
    code, out, _ = cli("verify", *sel, "--json")
    (report,) = json.loads(out)
    assert set(report["timings"]) == {"locate", "read", "probes"}
    assert all(isinstance(p["seconds"], float) for f in report["families"] for p in f["probes"])
    code, _, err = cli("verify", *sel, "-q", "-v")
    assert code == 2 and "not allowed with argument -q/--quiet" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_probes_say_on_a_terminal_that_they_run_and_nothing_when_piped(toy_engine):
    """Issue 34 item 6: probes on a real engine take 10-30 s; a person at a terminal hears that they run
    and how long they took (stderr). Piped, --json or -q: not a byte more."""
    _, sel, _ = toy_engine
    assert cli("apply", *sel, "--no-probes")[0] == 0
    out, err = io.StringIO(), _Terminal()
    assert main(["verify", *map(str, sel)], out=out, err=err) == 0
    said = err.getvalue().splitlines()
    assert len(said) == 2 and said[0].endswith("probe(s) (up to 180 s)...") and " probes done in " in said[1]
    assert "probes done" not in out.getvalue()
    for extra in ([], ["--json"], ["-q"]):
        quiet_err = _Terminal() if extra else io.StringIO()
        assert main(["verify", *map(str, sel), *extra], out=io.StringIO(), err=quiet_err) == 0
        assert quiet_err.getvalue() == "", extra


def test_bare_patcher_prints_its_commands_and_exits_0():
    """As git or pip alone do (issue 42: it was an error)."""
    code, out, err = cli()
    assert code == 0 and "usage: patcher" in out and "doctor" in out and not err


def test_a_close_flag_is_named_and_doctor_without_dashes_says_where_the_command_goes():
    code, _, err = cli("apply", "--dry")
    assert code == 2 and "did you mean --dry-run?" in err and "found:  --dry" in err
    code, _, err = cli("doctor", "vllm", "serve", "m")
    assert code == 2 and "hint:   put the server command after '--': patcher doctor [--python P] -- vllm serve m" in err


@pytest.mark.wheels
def test_quiet_verify_still_says_a_file_was_edited_after_apply(tmp_path):
    """-q prints what is not ok; a warning is not ok (issue 42: a CI job running verify -q never
    learnt that someone edited a patched file)."""
    site = install(tmp_path, "sglang", "0.5.9")
    code, out, _ = cli("apply", "--engine", "sglang", "--site", site, "--no-probes", "--only", "k25-aux-capture")
    assert code == 0, out
    patched = Path(site) / "sglang/srt/models/kimi_k25.py"
    patched.write_text("# a local edit\n" + patched.read_text())  # away from our hunks: still applied
    code, out, _ = cli("verify", "--engine", "sglang", "--site", site, "--no-probes", "-q", "--only", "k25-aux-capture")
    assert code == 0 and "changed since apply" in out and "sglang/k25-aux-capture" in out, out


def test_ctrl_c_ends_with_one_line_and_the_state_to_check(monkeypatch) -> None:
    """Issue 58 item 4: Ctrl-C printed a 25-32 line KeyboardInterrupt traceback."""
    import io

    from patcher.cli import main as cli_main

    def interrupted(argv, out, err):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "_main", interrupted)
    out, err = io.StringIO(), io.StringIO()
    assert cli_main.main(["apply", "--engine", "sglang"], out=out, err=err) == 130
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted: patcher apply stopped by Ctrl-C")
    assert "Run 'patcher verify'" in lines[0] and out.getvalue() == ""


def test_a_flag_value_out_of_range_says_what_the_flag_takes() -> None:
    """Issue 58 item 6: '--probe-timeout 0' said 'wanted: patcher verify ...'."""
    import io

    from patcher.cli.main import main

    err = io.StringIO()
    assert main(["verify", "--probe-timeout", "0"], out=io.StringIO(), err=err) == 2
    assert err.getvalue().splitlines()[1:3] == ["  wanted: --probe-timeout SECONDS, a number above 0",
                                                "  found:  --probe-timeout 0"]


def test_port_and_list_help_say_what_they_do(capsys):
    """Issue 58: 'port --help' had no description and no exit codes; 'list --help' described --debug
    by the probes, which list never runs."""
    assert main(["port", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "three-way merge" in text and "flagged for a person" in text
    codes = text.split("exit codes: ")[1]
    assert codes.startswith("0 ") and "1 a family needs a person" in codes and "2 usage error" in codes
    assert main(["list", "--help"]) == 0
    debug = " ".join(capsys.readouterr().out.split()).split("--debug ")[-1]
    assert debug.startswith("tracebacks on errors (default: off)") and "probes" not in debug.split("(default")[0]
