"""Side-by-side figures, measured in one run (not timed tests).

1. The file phase of `apply` (plan, journal, temporaries, renames, bytecode, state) against
   `git apply` of the same diffs on the same files. Goal: <= 1.5x.
2. `verify` with probes against a bare `python -c "import <the same modules>"` in the same
   interpreter. Goal: <= 1.2x. Needs an environment where the engine imports (a CPU env from
   patcher/maintainer/cpu_env.py); pass its python with --python, or it is skipped.

Usage: python benchmarks/bench_apply.py [--engine sglang] [--release 0.5.9] [--python PY] [--runs 15]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patcher.core import manifest, write
from patcher.core.plan import State, assess
from patcher.environment import engines
from patcher.installer import actions
from patcher.maintainer import wheels


def scratch(tree: Path, install: engines.Install, rels: list[str], dest: Path) -> None:
    shutil.copytree(install.dist_info, dest / install.dist_info.name)
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(tree / rel, dest / rel)


def file_phase(engine: str, release: str, runs: int) -> None:
    for durable in (True, False):
        write.DURABLE = durable
        _file_phase(engine, release, runs, "journal fsynced" if durable else "no fsync, as git apply")
    write.DURABLE = True


def _file_phase(engine: str, release: str, runs: int, label: str) -> None:
    tree = wheels.tree(engine, release)
    install = engines.find(engine, site=tree)
    pending = [s for s in assess(install, manifest.load_all(manifest.PATCHES, (engine,)), {})
               if s.state is State.PENDING]
    diffs = [s.family.folder / d for s in pending for v in s.family.variants if v.id == s.variant for d in v.diffs]
    rels = sorted({fp.path for s in pending for fp in s.family.patches[s.variant]})
    ours, git = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            scratch(tree, install, rels, Path(a))
            scratch(tree, install, rels, Path(b))
            opts = actions.Options(site=Path(a), probes=False, only=tuple(s.family.id for s in pending))
            t = time.perf_counter()
            r = actions.apply(engine, opts)
            ours.append(time.perf_counter() - t)
            assert sorted(r.changed) == rels
            t = time.perf_counter()
            subprocess.run(["git", "apply", *map(str, diffs)], cwd=b, check=True)
            git.append(time.perf_counter() - t)
    o, g = statistics.median(ours), statistics.median(git)
    print(f"file phase, {engine} {release}: {len(diffs)} diffs on {len(rels)} files, median of {runs}, {label}")
    print(f"  patcher apply (in-process, no probes): {o * 1000:7.1f} ms")
    print(f"  git apply (subprocess):                {g * 1000:7.1f} ms")
    print(f"  ratio: {o / g:.2f}x (goal <= 1.5x)")


def verify_vs_import(engine: str, python: str, runs: int) -> None:
    opts = actions.Options(python=python)
    report = actions.verify(engine, opts)
    modules = sorted({p["module"] for s in report.statuses for p in s.probes})
    if not modules:
        print("verify vs import: no probe ran here; skipped")
        return
    ours, bare = [], []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "patcher", "verify", "--engine", engine, "--python", python],
                       capture_output=True)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([python, "-c", "; ".join(f"import {m}" for m in modules)], capture_output=True)
        bare.append(time.perf_counter() - t)
    o, b = statistics.median(ours), statistics.median(bare)
    states = {p['status'] for s in report.statuses for p in s.probes}
    print(f"verify with probes, {engine} {report.install.version}: {len(modules)} modules, probe outcomes {states}")
    print(f"  patcher verify (CLI, subprocess): {o:6.2f} s")
    print(f"  python -c 'import ...':           {b:6.2f} s")
    print(f"  ratio: {o / b:.2f}x (goal <= 1.2x)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="sglang")
    ap.add_argument("--release", default="0.5.9")
    ap.add_argument("--python", help="an interpreter where the engine imports (CPU env)")
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    file_phase(args.engine, args.release, args.runs)
    if args.python:
        verify_vs_import(args.engine, args.python, max(3, args.runs // 5))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
