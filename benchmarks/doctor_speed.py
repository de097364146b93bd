"""How fast `patcher doctor` answers, cold and warm, side by side in one run (issue 46).

Doctor reads the launch line with the release's own parser, in the engine's interpreter: the
first run on a line imports the engine's CLI (seconds); the answer is cached per release files and
line, so the next run on the same line does not import it. Goal: warm under one second.

For each engine, in the CPU environment of its newest covered release (the tests' environments:
``patcher.maintainer.cpu_env``), one EAGLE-3 launch on a Kimi-K2 target with a SpecForge drafter
is judged as a whole process (``python -m patcher doctor --python ENV -- ...``):
- cold: an empty launch cache (``KIMI_PATCHER_CACHE`` in a fresh folder), so the parser runs;
- warm: the same line again, the cache filled;
- bare: the same line on the bare published tree (no dependencies: the parser cannot run; doctor
  reads the exact spellings it knows).
Prints the median of ``--runs`` runs of each and the ratio warm / cold.

    python benchmarks/doctor_speed.py [--runs 5] [--engine vllm|sglang]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from patcher.core import matrix  # noqa: E402
from patcher.maintainer import cpu_env, wheels  # noqa: E402
from tests.support import real_drafters as rd  # noqa: E402


def launch(engine: str, target: Path, drafter: Path) -> list[str]:
    if engine == "sglang":
        return ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--speculative-algorithm",
                "EAGLE3", "--speculative-draft-model-path", str(drafter), "--tp", "8"]
    spec = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
    return ["vllm", "serve", str(target), "--speculative-config", spec, "-tp", "8"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "patcher", "doctor", "--json", *argv], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    seconds = time.monotonic() - t0
    parsed = next((f["message"] for f in json.loads(proc.stdout)["findings"] if f["code"] == "launch.parse"), "?")
    return seconds, parsed


def side_by_side(engine: str, runs: int, timed, argv_for) -> tuple[str, dict[str, list[tuple[float, str]]]]:
    """``timed(argv, env)`` run ``runs`` times each, cold, warm and on the bare tree, in the CPU env of
    the engine's newest covered release; ``argv_for(where, target, drafter)`` is the command's argv,
    ``where`` the ``--python ENV`` or ``--site TREE`` words. Kimi-K2's target and SpecForge's drafter."""
    version = matrix.releases(engine)[-1]
    with tempfile.TemporaryDirectory() as tmp, cpu_env.using(engine, version, log=lambda line: None) as python:
        root = Path(tmp)
        target, drafter = rd.kimi_target(root, "kimi-k2", k25=False), rd.specforge_kimi(root)
        base = dict(os.environ, PYTHONPATH=str(ROOT))
        cold, warm = [], []
        for i in range(runs):
            env = dict(base, KIMI_PATCHER_CACHE=str(root / f"cache-{i}"))
            cold.append(timed(argv_for(["--python", str(python)], target, drafter), env))
            warm.append(timed(argv_for(["--python", str(python)], target, drafter), env))
        bare = [timed(argv_for(["--site", str(wheels.tree(engine, version))], target, drafter), base)
                for _ in range(runs)]
    return version, {"cold": cold, "warm": warm, "bare": bare}


def report(engine: str, version: str, runs: dict[str, list[tuple[float, str]]]) -> None:
    med = {name: statistics.median(s for s, _ in got) for name, got in runs.items()}
    print(f"{engine} {version}, {len(runs['cold'])} runs each, median wall seconds of the whole process:")
    for name, got in runs.items():
        print(f"  {name:6} {med[name]:6.2f} s   (first: {got[0][0]:.2f} s; {got[0][1][:80]})")
    print(f"  warm / cold: {med['warm'] / med['cold']:.3f}; warm under 1 s: {med['warm'] < 1.0}")


def run(description: str, timed, argv_for, runs: int) -> int:
    """Both benchmarks' command line: ``argv_for(engine)`` gives ``side_by_side``'s argv maker."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--engine", choices=("vllm", "sglang"), action="append")
    args = ap.parse_args()
    for engine in args.engine or ("vllm", "sglang"):
        report(engine, *side_by_side(engine, args.runs, timed, argv_for(engine)))
    return 0


def main() -> int:
    return run(__doc__.splitlines()[0], timed,
               lambda engine: lambda where, t, d: [*where, "--", *launch(engine, t, d)], runs=5)


if __name__ == "__main__":
    raise SystemExit(main())
