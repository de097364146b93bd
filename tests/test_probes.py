"""patcher/probes/probes.py: which probes run, in what order, in what interpreter, and how a dying or
hanging probe interpreter is reported, on a real pip install of the toy engine.

Many docstrings name the surviving mutants of a mutmut run (2026-12) the test was
written to kill; the runs and their verdicts: benchmarks/MUTATION.md. Probes on real engine
imports: test_probes_cpu.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from patcher.installer import actions
from tests.support import toy, toy_venv
from tests.support.toy_venv import family, install

venv = toy_venv.venv


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
