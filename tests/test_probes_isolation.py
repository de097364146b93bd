"""The probe runner's own paths, on a toy engine installed by real pip into a venv: isolation
(a failed import must not change another probe's outcome, whatever the order), a module
missing inside the engine, a copy of the engine that comes first on sys.path after
``engines.find`` looked, a probe that hangs (timed out, never passed) and an interpreter
that dies."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patcher.cli.report import as_dict
from patcher.core import manifest, plan, write
from patcher.environment import engines
from patcher.installer import actions
from patcher.probes import probes
from tests.support import toy

PROBES_PY = toy.PROBES + '''

def imports(mod):
    assert mod.__name__.startswith("toyengine")
'''


def family(root: Path, probe_rows: list[tuple[str, str]]) -> Path:
    """The toy family (variant v1 on core.py) with the given (probe id, module) probes."""
    fam = root / toy.ENGINE / "fix"
    fam.mkdir(parents=True, exist_ok=True)
    head = toy.MANIFEST.split("[[probe]]")[0]
    check = {True: "value_is_2", False: "imports"}
    rows = "".join(f'\n[[probe]]\nid = "{pid}"\nmodule = "{mod}"\ncheck = "{check[mod.endswith("core")]}"'
                   f'\nwhen = ["v1"]\n' for pid, mod in probe_rows)
    (fam / "patch.toml").write_text(head + rows)
    (fam / "v1.diff").write_text(toy.DIFF)
    (fam / "probes.py").write_text(PROBES_PY)
    return root


def venv(tmp: Path, extra: dict[str, bytes]) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    python = toy.make_venv(tmp / "venv")
    sources = {f"{toy.ENGINE}/core.py": toy.MODULE_V1.encode(), **extra}
    toy.pip_install(python, toy.build_wheel(tmp, "1.0", sources=sources))
    return python


def act(action: str, python: Path, patches: Path, **kw) -> tuple[int, dict]:
    """What the CLI would exit with and print as JSON (the CLI only knows the real engines' names)."""
    opts = actions.Options(python=str(python), patches=patches, **kw)
    report = getattr(actions, action)(toy.ENGINE, opts)
    code = report.exit_code(opts.strict)
    return code, as_dict(report, code)


def probe_results(report: dict) -> dict[str, tuple[str, str]]:
    return {p["id"]: (p["status"], p["detail"]) for f in report["families"] for p in f["probes"]}


# A package whose __init__ imports a submodule, then a dependency that is not installed:
# the failed import leaves toyengine.sub in sys.modules without its package (what SGLang
# >= 0.5.11 does without numpy). Alone, every toyengine module is "not importable".
POISON = {
    f"{toy.ENGINE}/__init__.py": b"from toyengine import sub  # noqa\nimport absent_dependency_xyz  # noqa\n",
    f"{toy.ENGINE}/sub.py": b"X = 1\n",
}


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory) -> Path:
    return venv(tmp_path_factory.mktemp("poison"), POISON)


@pytest.mark.parametrize("order", ["declared", "reversed"])
def test_a_failed_import_does_not_change_later_probes(poisoned, tmp_path, order):
    rows = [("core-first", "toyengine.core"), ("sub-second", "toyengine.sub")]
    patches = family(tmp_path / "p", rows if order == "declared" else rows[::-1])
    code, report = act("apply", poisoned, patches)
    got = probe_results(report)
    assert got == {"core-first": ("not importable", "missing module absent_dependency_xyz"),
                   "sub-second": ("not importable", "missing module absent_dependency_xyz")}, got
    assert code == 0, report  # not importable is not a failure without --strict
    act("revert", poisoned, patches)


RUNNER_CASES = {
    f"{toy.ENGINE}/slow.py": b"import time\ntime.sleep(60)\n",
    f"{toy.ENGINE}/dies.py": b"import os\nos._exit(3)\n",
    f"{toy.ENGINE}/imports_missing.py": b"import toyengine.nothere  # noqa\n",
}


@pytest.fixture(scope="module")
def runner_env(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runner")
    python = venv(root, {f"{toy.ENGINE}/__init__.py": b"", **RUNNER_CASES})
    patches = family(root / "p", [("value-is-2", "toyengine.core"), ("slow", "toyengine.slow"),
                                  ("dies", "toyengine.dies"), ("missing-inside", "toyengine.imports_missing")])
    return python, patches


def test_runner_outcomes_each_in_its_own_interpreter(runner_env):
    python, patches = runner_env
    code, report = act("apply", python, patches, probe_timeout=8)
    got = probe_results(report)
    try:
        assert got["value-is-2"] == ("passed", ""), got  # its neighbours hanging or dying change nothing
        status, detail = got["slow"]
        assert status == "failed" and "timed out" in detail, got  # never "passed"
        status, detail = got["dies"]
        assert status == "failed" and "died" in detail and "exit 3" in detail, got
        status, detail = got["missing-inside"]
        assert status == "failed" and "toyengine.nothere is missing from the engine" in detail, got
        assert code == 1, report
    finally:
        act("revert", python, patches)


def test_copy_earlier_on_sys_path_after_find_fails_the_probe(runner_env, tmp_path):
    """engines.find looked before a .pth put a second copy first; the runner's own check catches it."""
    python, patches = runner_env
    fams = manifest.load_all(patches, (toy.ENGINE,))
    install = engines.find(toy.ENGINE, python=str(python))
    assert act("apply", python, patches, probes=False)[0] == 0
    shadow = tmp_path / "shadow" / toy.ENGINE
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    (shadow / "core.py").write_text(toy.PATCHED)  # even a patched copy is the wrong file
    pth = install.site / "zz-shadow.pth"
    pth.write_text(f"import sys; sys.path.insert(0, {str(shadow.parent)!r})\n")
    try:
        statuses = plan.assess(install, fams, write.read_state(install))
        probes.run(install, statuses, timeout=60)
        (result,) = [p for st in statuses for p in st.probes if p["id"] == "value-is-2"]
        assert result["status"] == "failed", result
        assert f"was imported from {shadow / 'core.py'}" in result["detail"], result
    finally:
        pth.unlink()
        act("revert", python, patches)


def test_runner_line_that_is_not_ours_is_a_dead_interpreter():
    assert probes._parse("KIMI-PATCHER-PROBES [{\"status\": \"passed\"}]", 2) is None
    assert probes._parse("KIMI-PATCHER-PROBES not json", 1) is None
    assert probes._parse("KIMI-PATCHER-PROBES [{\"status\": \"fine\"}]", 1) is None
    assert probes._parse("chatter\nKIMI-PATCHER-PROBES [{\"status\": \"passed\"}]\n", 1) == [{"status": "passed"}]


def test_interpreters_run_concurrently(runner_env, tmp_path):
    """Two probes that each sleep 3 s finish in well under 6 s on two CPUs (skip on one)."""
    import time

    if probes.cpus() < 2:
        pytest.skip("one CPU")
    python, _ = runner_env
    code = "import time\ntime.sleep(3)\n"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name in ("nap1", "nap2"):
        (site / toy.ENGINE / f"{name}.py").write_text(code)
    record = next(site.glob(f"{toy.ENGINE}-*.dist-info")) / "RECORD"  # probes run on modules the release ships
    record.write_text(record.read_text() + "".join(f"{toy.ENGINE}/{n}.py,,\n" for n in ("nap1", "nap2")))
    try:
        fams = manifest.load_all(family(tmp_path / "p", [("a", "toyengine.nap1"), ("b", "toyengine.nap2")]),
                                 (toy.ENGINE,))
        install = engines.find(toy.ENGINE, python=str(python))
        statuses = plan.assess(install, fams, {})
        for st in statuses:  # the probes of an applied family run; pretend, without writing
            st.state, st.variant = plan.State.APPLIED, "v1"
        t0 = time.monotonic()
        probes.run(install, statuses, timeout=60)
        took = time.monotonic() - t0
        assert [p["status"] for st in statuses for p in st.probes] == ["passed", "passed"]
        assert took < 5.5, took
    finally:
        for name in ("nap1", "nap2"):
            (site / toy.ENGINE / f"{name}.py").unlink()


# --------------------------------------------------------------------------------------------
# The engine installed without its dependencies (the README's Docker build-stage path), on every
# covered release line: every probe reports the missing dependency, none is poisoned into "failed".

NO_DEPS = [("sglang", "0.5.9"), ("sglang", "0.5.11"), ("sglang", "0.5.23"), ("vllm", "0.15.1"), ("vllm", "0.33.0")]


@pytest.mark.wheels
@pytest.mark.parametrize("engine,version", NO_DEPS, ids=[f"{e}-{v}" for e, v in NO_DEPS])
def test_engine_without_dependencies_every_probe_not_importable(engine, version, tmp_path):
    import io
    import json
    import shutil
    import sys

    from patcher.cli.main import main
    from patcher.maintainer import wheels
    from tests.support.probe_ids import expected

    python = toy.make_venv(tmp_path / "venv")
    if engine == "sglang":  # exactly the README's build-stage install
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                        "--no-compile", f"{engine}=={version}"], check=True, capture_output=True)
    else:  # vLLM's wheel is ~340 MB of kernels that never load here: its sources and dist-info suffice
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        tree = wheels.tree(engine, version)
        for d in (tree / engine, *tree.glob(f"{engine}-*.dist-info")):
            shutil.copytree(d, site / d.name)
    out, err = io.StringIO(), io.StringIO()
    code = main(["apply", "--engine", engine, "--python", str(python), "--json"], out=out, err=err)
    (report,) = json.loads(out.getvalue())
    ran = {(f["id"], p["id"]): (p["status"], p["detail"]) for f in report["families"] for p in f["probes"]}
    assert set(ran) == expected(engine, version), ran
    assert all(status == "not importable" for status, _ in ran.values()), ran
    assert len({detail for _, detail in ran.values()}) == 1, ran  # the same missing dependency, alone or not
    assert code == 0, err
