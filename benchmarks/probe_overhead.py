"""What isolation costs: `patcher verify` with probes against one interpreter importing the same
modules, wall and CPU (children included), measured side by side in one run (not a timed test).

For each CPU env (patcher/maintainer/cpu_env.py), held with ``cpu_env.using``: every family that
applies is applied (no probes), then, alternating, for --runs rounds:

  import   one ``python -c`` importing every probed module (their preloads first), as one
           interpreter would: the floor;
  fork     ``patcher verify`` as the CLI runs it: the zygote preloads torch & co and forks a child
           per probed module (today's runner);
  spawn    the same with KIMI_PATCHER_PROBE_SPAWN=1: one fresh interpreter per probed module (the
           runner before the zygote, kept as the fallback);
  before   with --before DIR: ``patcher verify`` of another checkout of this repository (run from
           DIR, so ``-m patcher`` is DIR's), e.g. the commit before a change to the runner.

With --bytecode, the engine's modules are compiled first (``compileall``), as ``pip install``
leaves them; without it the env is measured as it is: the vLLM CPU env lays the sources in from
the wheel cache with no bytecode, as ``uv pip install`` leaves an install by default, so that every
interpreter, and every forked child, compiles each module it imports (``verify`` writes no
bytecode).

Medians are printed with the ratios to ``import`` (goal: fork <= 1.0x wall, <= 1.3x CPU), how
fork ran (``--debug``'s line: a zygote that fell back to spawning would otherwise pass for fork),
and whether fork and spawn reported the same probe outcomes. The env is reverted at the end.
Wall time on a loaded machine measures the machine; the load is printed, ``uptime`` before a run helps.

Measured 5 December (2 cores, 3 rounds, medians; ``--bytecode`` for "with"), fork against import:

  SGLang 0.5.9    with bytecode 0.92x wall 1.10x CPU;  without 0.98x wall 1.23x CPU (was 1.05x, 1.38x)
  vLLM 0.34.0     with bytecode 1.08x wall 1.31x CPU;  without 1.12x wall 1.46x CPU (was 1.24x, 1.68x)

"was": ``--before`` at the commit before the children shared their compiled bytecode (an engine
without bytecode: probe_child._shared_bytecode). What is left on vLLM: each of its 9 groups imports
vLLM's config and layers afresh (isolation: a child imports the engine as a fresh interpreter
would), where the one bare interpreter imports them once.

Usage: python benchmarks/probe_overhead.py [--sglang 0.5.9] [--vllm 0.19.1] [--runs 3] [--before DIR] [--no-spawn]
                                           [--bytecode]
       (an empty version skips that engine)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patcher.installer import actions  # noqa: E402
from patcher.maintainer import cpu_env  # noqa: E402
from patcher.probes import probes  # noqa: E402


def timed(argv: list[str], env: dict[str, str],
          cwd: str | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the process and all it waited for, the process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def outcomes(stdout: str) -> dict[str, tuple[str, str]]:
    (report,) = json.loads(stdout)
    return {f"{f['id']}:{p['id']}": (p["status"], p["detail"]) for f in report["families"] for p in f["probes"]}


def measure(engine: str, version: str, runs: int, before: Path | None = None, spawn: bool = True,
            bytecode: bool = False) -> None:
    with cpu_env.using(engine, version, log=lambda *_: None) as python:
        if bytecode:
            compiled(python, engine)
        applied_and_measured(engine, version, python, runs, before, spawn)


def compiled(python: Path, engine: str) -> None:
    """Bytecode for every module of the engine, as ``pip install`` writes it (before apply, which
    then recompiles the files it patches, as on a user's install). It stays until the next swap."""
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", str(Path(site) / engine)], check=True,
                   stdout=subprocess.DEVNULL)


def applied_and_measured(engine: str, version: str, python: Path, runs: int, before: Path | None = None,
                         spawn: bool = True) -> None:
    """Every family applied (no probes), measured, reverted (the env is shared)."""
    actions.apply(engine, actions.Options(python=str(python), probes=False))
    try:
        _measure(engine, version, str(python), runs, before, spawn)
    finally:
        actions.revert(engine, actions.Options(python=str(python), probes=False))


def _measure(engine: str, version: str, python: str, runs: int, before: Path | None, spawn: bool) -> None:
    statuses = actions.verify(engine, actions.Options(python=python, probes=False)).statuses
    todo = probes.selected(statuses)
    modules = list(dict.fromkeys(m for _, p in todo for m in (*p["preload"], p["module"])))
    groups = len(probes.groups(todo))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop(probes.FORCE_SPAWN, None)
    spawn_env = dict(env, **{probes.FORCE_SPAWN: "1"})
    verify = [sys.executable, "-m", "patcher", "verify", "--engine", engine, "--python", python, "--json", "--debug"]
    # A module the release does not ship (a probe 'not in release') is skipped, as verify skips it;
    # without the try, the floor stopped at the first one (vLLM 0.34.0: 1.4 s, a false 6.8x).
    importing = [python, "-c", f"import importlib, sys\nfor m in {modules!r}:\n    try:\n"
                 "        importlib.import_module(m)\n    except ModuleNotFoundError as e:\n"
                 "        if not m.startswith(e.name or '\\0'):\n            raise\n"
                 "        print('not in release:', m, file=sys.stderr)\n"]
    here = str(Path(__file__).resolve().parent.parent)  # ``-m patcher`` finds the package of cwd first
    kinds = {"import": (importing, env, here), "fork": (verify, env, here)}
    if spawn:
        kinds["spawn"] = (verify, spawn_env, here)
    if before is not None:
        kinds["before"] = (verify, env, str(before.resolve()))
    warm = timed(importing, env)[2]  # warm the page cache once, for everyone
    if warm.returncode != 0:  # a floor that stopped early measures nothing
        raise SystemExit(f"the import floor failed: {warm.stderr.strip().splitlines()[-1:]}")
    figures: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    seen: dict[str, dict] = {}
    how: dict[str, str] = {}
    for r in range(runs):
        order = list(kinds) if r % 2 == 0 else list(kinds)[::-1]
        for kind in order:
            argv, e, cwd = kinds[kind]
            wall, cpu, proc = timed(argv, e, cwd)
            figures[kind].append((wall, cpu))
            if kind != "import":
                seen[kind] = outcomes(proc.stdout)
                how[kind] = _how(proc.stderr)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in figures.items()}
    iw, ic = med["import"]
    states = sorted({s for s, _ in seen["fork"].values()})
    print(f"\n{engine} {version}: {len(todo)} probes in {groups} groups over {len(modules)} modules, "
          f"outcomes {states}; median of {runs} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for kind, (w, c) in med.items():
        ratio = "" if kind == "import" else f"   {w / iw:4.2f}x wall  {c / ic:4.2f}x CPU   {how[kind]}"
        print(f"  {kind:6}  wall {w:6.1f} s  CPU {c:6.1f} s{ratio}")
    same = all(seen[k] == seen["fork"] for k in seen)
    print(f"  goal (issue 42): fork <= 1.0x wall, <= 1.3x CPU;  {', '.join(seen)} report the same outcomes: "
          f"{'yes' if same else 'NO'}")
    for other in [k for k in seen if k != "fork"]:
        for k in sorted(set(seen["fork"]) | set(seen[other])):
            if seen["fork"].get(k) != seen[other].get(k):
                print(f"    {k}: fork {seen['fork'].get(k)}  {other} {seen[other].get(k)}")


def _how(stderr: str) -> str:
    """--debug's line on how the probes ran, without the list of preloaded modules."""
    line = next((ln for ln in stderr.splitlines() if ln.startswith("probes: ")), "probes: (no line)")
    if " preloaded " in line:
        names, _, seconds = line.split(" preloaded ", 1)[1].rpartition(" in ")
        return f"(forked; {len(names.split(', '))} modules preloaded in {seconds})"
    return "(" + line.removeprefix("probes: ") + ")"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglang", default="0.5.9")
    ap.add_argument("--vllm", default="0.19.1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", type=Path, help="a checkout of this repository whose verify is timed too")
    ap.add_argument("--no-spawn", action="store_true", help="leave out spawn (the slowest, by far)")
    ap.add_argument("--bytecode", action="store_true", help="compile the engine's modules first, as pip does")
    args = ap.parse_args()
    for engine, version in (("sglang", args.sglang), ("vllm", args.vllm)):
        if version:
            measure(engine, version, args.runs, args.before, spawn=not args.no_spawn, bytecode=args.bytecode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
