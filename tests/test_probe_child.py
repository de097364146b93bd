"""patcher/probes/probe_child.py, the probe runner's zygote (probes.run_groups, probe_child.fork_main), on a
toy package put on sys.path of this interpreter: no venv, no pip, a second or two each.

What it must keep from one fresh interpreter per group: a child's failed import and whatever
it left in sys.modules never reach the next child; and where forking is not a clean copy of a
fresh interpreter (no fork, a thread running after the preloads, a preload that failed), it
spawns one interpreter per group instead and says why (what ``--debug`` prints)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patcher.cli import main as cli_main
from patcher.core import manifest
from patcher.probes import probe_child, probes
from tests.support import progress
from tests.support.tiers import SAMPLE, release_param

ENGINE = "toyengine"

MODULES = {
    "__init__.py": "",
    "sub.py": "X = 1\n",
    # imports sub, damages it, then fails: what a half-failed engine import leaves behind
    "broken.py": "import toyengine.sub\ntoyengine.sub.X = 99\nraise RuntimeError('half imported')\n",
    "uses_dep.py": "import einops  # noqa: F401\n",
    "uses_engine_dep.py": "import toydep  # noqa: F401\n",
}

CHECKS = '''
import os, sys


def sub_is_fresh(mod):
    assert mod.X == 1, f"sub.X is {mod.X}: a previous child's import leaked into this one"


def engine_not_inherited(mod):
    others = sorted(m for m in sys.modules if m.startswith("toyengine.") and m != "toyengine.sub")
    assert not others, others


def shares_bytecode(mod):
    prefix = sys.pycache_prefix
    assert prefix and os.path.basename(prefix).startswith("kimi-patcher-pyc-"), prefix
    assert not sys.dont_write_bytecode
    with open(os.environ["KIMI_TEST_IMPORTS"] + ".prefixes", "a") as f:
        f.write(prefix + "\\n")


def own_bytecode(mod):
    assert sys.pycache_prefix is None, sys.pycache_prefix


def preloads_frozen_own_garbage_collected(mod):
    import gc, weakref

    assert gc.get_freeze_count() > 0, "the zygote's objects are not frozen"

    class Node:
        pass

    made = Node()
    made.me = made  # a cycle: only the collector frees it
    dead = weakref.ref(made)
    del made
    gc.collect()
    assert dead() is None, "a cycle the child made was not collected"
'''

# A stand-in for a heavy dependency on the preload list: counts the interpreters that imported it.
EINOPS = "import os\nwith open(os.environ['KIMI_TEST_IMPORTS'], 'a') as f:\n    f.write('x')\n"
# One the toy engine alone imports, for its own preloads (probe_preload): writes "y".
TOYDEP = EINOPS.replace("'x'", "'y'")


@pytest.fixture
def toy(tmp_path: Path, monkeypatch) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path / "site"
    (root / ENGINE).mkdir(parents=True)
    for name, text in MODULES.items():
        (root / ENGINE / name).write_text(text)
    deps = tmp_path / "deps"  # on PYTHONPATH: present at start-up, as an installed dependency is
    deps.mkdir()
    (deps / "einops.py").write_text(EINOPS)
    (deps / "toydep.py").write_text(TOYDEP)
    checks = tmp_path / "probes.py"
    checks.write_text(CHECKS)
    env = dict(os.environ, PYTHONPATH=str(deps), KIMI_TEST_IMPORTS=str(tmp_path / "imports"))
    env.pop(probes.FORCE_SPAWN, None)
    monkeypatch.setattr(probes, "cpus", lambda: 1)  # one child at a time: each runs after the last
    return root, checks, env


def probe(module: str, check: str | None, checks: Path) -> list[dict]:
    return [{"id": module, "module": module, "preload": [], "file": str(checks), "check": check}]


def run(toy, batches, timeout: float = 60, order=None, preload=()) -> tuple[list[list[dict]], list[str]]:
    root, _, env = toy
    said: list[str] = []
    got = probes.run_groups(sys.executable, ENGINE, [str(root)], batches, timeout, env, say=said.append, order=order,
                            preload=preload)
    return got, said


def statuses(got: list[list[dict]]) -> list[tuple[str, str]]:
    return [(r["status"], r.get("detail", "")) for group in got for r in group]


def test_a_childs_failed_import_does_not_reach_the_next_child(toy):
    _, checks, _ = toy
    got, said = run(toy, [probe("toyengine.broken", None, checks), probe("toyengine.sub", "sub_is_fresh", checks),
                          probe("toyengine.sub", "engine_not_inherited", checks)])
    assert statuses(got) == [("failed", "importing toyengine.broken raised RuntimeError: half imported"),
                             ("passed", ""), ("passed", "")], got
    assert len(said) == 1 and said[0].startswith("probes: one child per module forked"), said


def test_the_zygote_imports_a_preloaded_dependency_once_for_every_child(toy, tmp_path):
    _, checks, _ = toy
    got, said = run(toy, [probe("toyengine.uses_dep", None, checks), probe("toyengine.sub", "sub_is_fresh", checks)])
    assert statuses(got) == [("passed", ""), ("passed", "")], got
    assert "einops" in said[0], said
    assert (tmp_path / "imports").read_text() == "x"  # once, in the zygote; not again in the child


def test_an_engines_own_preloads_are_imported_once_for_its_children_only(toy, tmp_path):
    """EngineSpec.probe_preload: what one engine's probed modules import beyond PRELOAD, sent with
    the request and preloaded for that engine's zygote alone (another engine's list is not)."""
    _, checks, _ = toy
    from patcher import engine_specs
    assert all(spec.probe_preload for spec in engine_specs.ALL if spec.cpu_env_lines)  # those probed in CI
    assert "nothing_here" not in probes._RUNNER
    batches = [probe("toyengine.uses_engine_dep", None, checks), probe("toyengine.uses_engine_dep", None, checks)]
    batches[1][0]["preload"] = ["toyengine.sub"]  # another group: a second child
    got, said = run(toy, batches, preload=("toydep",))
    assert statuses(got) == [("passed", ""), ("passed", "")], got
    assert said[0].startswith("probes: one child per module forked") and "toydep" in said[0], said
    assert "nothing_here" not in said[0], said
    assert (tmp_path / "imports").read_text() == "xy"  # einops and toydep, once each, in the zygote


def test_children_get_the_zygotes_objects_frozen_and_collect_their_own(toy):
    """gc.freeze before forking: a child's collections skip what it inherited (they walked half a
    million objects per child on SGLang) and still free what the child itself leaves behind."""
    _, checks, _ = toy
    got, said = run(toy, [probe("toyengine.sub", "preloads_frozen_own_garbage_collected", checks),
                          probe("toyengine.uses_dep", "preloads_frozen_own_garbage_collected", checks)])
    assert statuses(got) == [("passed", ""), ("passed", "")], got
    assert said[0].startswith("probes: one child per module forked"), said


def test_an_engine_without_bytecode_is_compiled_once_for_all_children_outside_the_install(toy, tmp_path):
    """No pyc in the engine (uv's default, sources laid in): the children compile into one private
    folder and read what a sibling compiled (vLLM 0.34.0: 1.68x to 1.46x the CPU of one bare import,
    benchmarks/probe_overhead.py); the install gets no bytecode and the folder goes with the zygote.
    An engine with its own bytecode keeps reading it."""
    root, checks, _ = toy
    got, _ = run(toy, [probe("toyengine.sub", "shares_bytecode", checks),
                       probe("toyengine.uses_dep", "shares_bytecode", checks)])
    assert statuses(got) == [("passed", ""), ("passed", "")], got
    prefixes = set((tmp_path / "imports.prefixes").read_text().split())
    assert len(prefixes) == 1 and not Path(prefixes.pop()).exists()  # one folder for both, gone after
    assert not list(root.rglob("*.pyc"))  # nothing written into the install
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / ENGINE)], check=True)
    got, _ = run(toy, [probe("toyengine.sub", "own_bytecode", checks)])
    assert statuses(got) == [("passed", "")], got


def test_the_zygote_does_not_make_the_caller_wait_for_its_teardown(toy, tmp_path):
    """A preloaded module's exit handler (torch & co tear down for seconds) never delays results:
    the caller reads the zygote's messages until it exits."""
    _, checks, env = toy
    slow_exit = "import atexit, time\natexit.register(time.sleep, 60)\n"
    (Path(env["PYTHONPATH"]) / "einops.py").write_text(EINOPS + slow_exit)
    started = time.monotonic()
    got, said = run(toy, [probe("toyengine.sub", "sub_is_fresh", checks)], timeout=120)
    assert statuses(got) == [("passed", "")], got
    assert said[0].startswith("probes: one child per module forked"), said
    assert time.monotonic() - started < 40, "the caller waited for the zygote's exit handlers"


def test_forced_spawn_imports_the_dependency_in_each_interpreter(toy, tmp_path):
    _, checks, env = toy
    env[probes.FORCE_SPAWN] = "1"
    got, said = run(toy, [probe("toyengine.uses_dep", None, checks), probe("toyengine.broken", None, checks),
                          probe("toyengine.sub", "sub_is_fresh", checks)])
    assert statuses(got)[1:] == [("failed", "importing toyengine.broken raised RuntimeError: half imported"),
                                 ("passed", "")], got
    assert said == [f"probes: one fresh interpreter per module ({probes.FORCE_SPAWN} is set)"], said
    assert (tmp_path / "imports").read_text() == "x"  # only the one interpreter that needed it


@pytest.mark.parametrize("case", ["thread", "failed-preload", "missing-dependency", "engine-preloaded",
                                  "cuda-initialised"])
def test_the_zygote_refuses_to_fork_a_copy_that_is_not_clean_and_says_why(toy, tmp_path, case):
    """Each case makes forking unsafe in the target interpreter; the probes still run, spawned."""
    _, checks, env = toy
    deps = Path(env["PYTHONPATH"])
    if case == "thread":  # started at start-up, still running after the preloads
        (deps / "sitecustomize.py").write_text(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
        why = "threads"
    elif case == "failed-preload":  # a half-imported dependency must not be copied into children
        (deps / "einops.py").write_text("raise ImportError('broken einops')\n")
        why = "preloading einops raised ImportError: broken einops"
    elif case == "missing-dependency":  # einops is there, what it imports is not: half imported
        (deps / "einops.py").write_text("import os\nimport absent_dependency_xyz  # noqa\n")
        why = "preloading einops raised ModuleNotFoundError: No module named 'absent_dependency_xyz'"
    elif case == "engine-preloaded":  # a dependency that imports the engine: children would inherit its modules
        (deps / "einops.py").write_text("import toyengine.sub  # noqa\n")
        env["PYTHONPATH"] += os.pathsep + str(toy[0])
        why = "imported toyengine itself (toyengine)"
    else:  # a preload that initialised CUDA: a forked child could not use it, a fresh interpreter could
        _toy_torch(deps, cuda_initialised=True)
        why = "initialised CUDA"
    got, said = run(toy, [probe("toyengine.broken", None, checks), probe("toyengine.sub", "sub_is_fresh", checks)])
    assert statuses(got) == [("failed", "importing toyengine.broken raised RuntimeError: half imported"),
                             ("passed", "")], got
    assert len(said) == 1 and said[0].startswith("probes: one fresh interpreter per module (") and why in said[0], said


def _toy_torch(deps: Path, cuda_initialised: bool) -> None:
    """A stand-in torch (first on PRELOAD) whose torch.cuda says whether CUDA was initialised."""
    (deps / "torch").mkdir()
    (deps / "torch" / "__init__.py").write_text("from . import cuda  # noqa: F401\n")
    (deps / "torch" / "cuda.py").write_text(f"def is_initialized():\n    return {cuda_initialised}\n")


def test_a_torch_whose_cuda_is_not_initialised_is_forked_from(toy, tmp_path):
    _, checks, env = toy
    _toy_torch(Path(env["PYTHONPATH"]), cuda_initialised=False)
    got, said = run(toy, [probe("toyengine.sub", "sub_is_fresh", checks)])
    assert statuses(got) == [("passed", "")], got
    assert said[0].startswith("probes: one child per module forked") and "torch" in said[0], said


def test_no_preload_names_an_engine_or_its_kernels():
    """Preloading must never import the engine (each child imports it fresh) nor the kernel packages
    that load CUDA libraries; the zygote also checks at run time (the refusal cases above)."""
    from patcher import engine_specs
    never = {*manifest.ENGINES, *(s.package for s in engine_specs.ALL), "sgl_kernel", "flashinfer",
             "vllm_flash_attn", "flash_attn", "deep_gemm", "deep_ep", "aiter", "cuda", "pynvml", "nvidia"}
    names = [*probe_child.PRELOAD, *(n for spec in engine_specs.ALL for n in spec.probe_preload)]
    assert not [n for n in names if n.split(".")[0] in never], names


def test_a_submodule_this_release_lacks_is_skipped_and_the_zygote_still_forks(toy, tmp_path, monkeypatch):
    """PRELOAD names submodules (torch._inductor.compile_fx, ...) a package's release may not have."""
    _, checks, _ = toy
    assert probes._RUNNER.count("PRELOAD = (") == 1
    monkeypatch.setattr(probes, "_RUNNER", probes._RUNNER.replace("PRELOAD = (", 'PRELOAD = ("einops.nothere", ', 1))
    got, said = run(toy, [probe("toyengine.uses_dep", None, checks)])
    assert statuses(got) == [("passed", "")], got
    assert said[0].startswith("probes: one child per module forked") and "einops.nothere" not in said[0], said
    assert (tmp_path / "imports").read_text() == "x"


def test_without_fork_the_fallback_is_taken_and_debug_says_so(monkeypatch, capsys):
    """No os.fork here (Windows, say): spawn per module, and ``--debug`` prints why; without it, nothing."""
    from tests.support import toy as toy_engine
    monkeypatch.delattr(os, "fork")
    seen: list[tuple] = []
    monkeypatch.setattr(probes, "_interpreter", lambda *a: seen.append(a) or [{"status": "passed"}] * a[2])
    monkeypatch.setattr(probes, "_forked", lambda *a: pytest.fail("the zygote ran without os.fork"))
    for debug in (True, False):
        got = probes.run_groups(sys.executable, toy_engine.ENGINE, [], [[{"module": "m"}]], 5, {},
                                say=cli_main._debug(debug, sys.stderr))
        assert got == [[{"status": "passed"}]]
    assert len(seen) == 2
    assert capsys.readouterr().err == "probes: one fresh interpreter per module (this platform cannot fork)\n"


@pytest.mark.parametrize("spawn", [False, True], ids=["forked", "spawned"])
@pytest.mark.parametrize("order,started", [
    ([2, 0, 1], "cab"),
    ([0, 0, 1], "abc"),  # not a permutation: as given
    ([0, 1], "abc"),
    (["2", 0, 1], "abc"),
])
def test_groups_start_in_the_order_given_and_report_in_their_own(toy, tmp_path, monkeypatch, spawn, order, started):
    """One CPU: one group at a time, so the order each module was imported in is the order
    they started in; the results come back in the groups' own order either way."""
    root, checks, env = toy
    if spawn:
        env[probes.FORCE_SPAWN] = "1"
    for name in "abc":
        (root / ENGINE / f"{name}.py").write_text(EINOPS.replace("'x'", f"'{name}'"))  # writes its name
    got, said = run(toy, [probe(f"toyengine.{n}", None, checks) for n in "abc"], order=lambda: order)
    assert [r["file"].rsplit("/", 1)[-1] for group in got for r in group] == ["a.py", "b.py", "c.py"], got
    assert (tmp_path / "imports").read_text().replace("x", "") == started  # x: the zygote's preload
    assert said[0].startswith("probes: one fresh interpreter" if spawn else "probes: one child per module forked"), said


def test_cpus_are_the_ones_this_process_may_use(monkeypatch):
    """A container limited to some CPUs (docker --cpuset-cpus) reports the host's count in
    os.cpu_count(); the probes are sized by the CPUs they can run on."""
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert probes.cpus() == 1


def test_a_child_that_dies_or_hangs_is_reported_like_a_spawned_interpreter(toy, tmp_path):
    root, checks, _ = toy
    (root / ENGINE / "dies.py").write_text("import sys, os\nsys.stderr.write('last words\\n')\nos._exit(3)\n")
    (root / ENGINE / "hangs.py").write_text("import time\ntime.sleep(60)\n")
    got, said = run(toy, [probe("toyengine.dies", None, checks), probe("toyengine.hangs", None, checks),
                          probe("toyengine.sub", "sub_is_fresh", checks)], timeout=4)
    assert statuses(got) == [
        ("failed", "probe interpreter died: exit 3: last words"),
        ("failed", "probe interpreter timed out: timed out after 4 s (--probe-timeout, for all probes)"),
        ("failed", "probe interpreter timed out: timed out: the 4 s for all probes ran out before this one started"),
    ], got
    assert said[0].startswith("probes: one child per module forked"), said


def test_the_child_code_is_stdlib_only():
    """It runs in the engine's interpreter, where patcher may not be installed."""
    import ast
    tree = ast.parse(Path(probe_child.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names), names - set(sys.stdlib_module_names)


def test_the_cpu_envs_import_table_runs_through_the_one_runner(monkeypatch):
    """cpu_env has no runner of its own: each module of its table is one import-only group of
    probes.run_groups, in the env's python, with the env's own environment and PROBE_TIMEOUT."""
    from patcher import engine_specs
    from patcher.maintainer import cpu_env
    calls = []

    def fake(python, engine, prepend, batches, timeout, env, cwd=None, say=None, preload=()):
        calls.append((python, engine, prepend, batches, timeout, env))
        assert preload == engine_specs.spec("sglang").probe_preload
        return [[{"status": "passed", "seconds": 1.5}],
                [{"status": "not importable", "detail": "missing module x", "where": "a.py:3", "seconds": 0.1}]]

    monkeypatch.setattr(probes, "run_groups", fake)
    table = [cpu_env.Probe("sglang.a"), cpu_env.Probe("sglang.b", prelude=("p",))]
    monkeypatch.setitem(cpu_env.PROBES, "sglang", table)
    got = cpu_env.run_probes(Path("/env/bin/python"), "sglang", "0.5.9")
    assert got == [{"ok": True, "module": "sglang.a", "prelude": [], "seconds": 1.5},
                   {"ok": False, "module": "sglang.b", "prelude": ["p"], "seconds": 0.1,
                    "error": "not importable: missing module x", "where": "a.py:3"}]
    ((python, engine, prepend, batches, timeout, env),) = calls
    assert (python, engine, prepend, timeout) == ("/env/bin/python", "sglang", [], cpu_env.PROBE_TIMEOUT)
    assert batches == [[{"id": "sglang.a", "module": "sglang.a", "preload": [], "check": None}],
                       [{"id": "sglang.b", "module": "sglang.b", "preload": ["p"], "check": None}]]
    assert env == cpu_env.probe_env()


ENV_CHECKS = '''
import sys


def preloads_left_engine_and_cuda_alone(mod):
    engines = sorted({m.split(".")[0] for m in sys.modules} & {"sglang", "vllm", "sgl_kernel", "flashinfer"})
    assert not engines, f"the zygote imported {engines}"
    import torch

    assert not torch.cuda.is_initialized(), "the zygote initialised CUDA"
'''


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", [release_param(e, v) for e, v in sorted(SAMPLE)])
def test_each_cpu_envs_preloads_fork_a_clean_copy(engine, version, tmp_path):
    """In the real envs: PRELOAD and the engine module's probe_preload import without the engine, CUDA
    or a thread, so probes run forked (test_probes_cpu.py proves their outcomes, not how they ran)."""
    from patcher import engine_specs
    from patcher.maintainer import cpu_env
    spec = engine_specs.spec(engine)
    checks = tmp_path / "probes.py"
    checks.write_text(ENV_CHECKS)
    said: list[str] = []
    with cpu_env.using(engine, version, log=progress.say) as python:
        got = probes.run_groups(str(python), spec.package, [], [probe("json", "preloads_left_engine_and_cuda_alone",
                                                                      checks)],
                                cpu_env.PROBE_TIMEOUT, cpu_env.probe_env(), say=said.append, preload=spec.probe_preload)
    assert statuses(got) == [("passed", "")], got
    assert said[0].startswith("probes: one child per module forked"), said
    preloaded = set(said[0].split(" preloaded ", 1)[1].rpartition(" in ")[0].split(", "))
    assert {"torch", "transformers"} <= preloaded, said
    assert preloaded & set(spec.probe_preload), said  # the engine's own, sent with the request
