"""How fast `patcher doctor` answers, cold and warm, side by side in one run (issue 46).

Doctor reads the launch line with the release's own parser, in the engine's interpreter: the
first run on a line imports the engine's CLI (seconds); the answer is cached per release files and
line, so the next run on the same line does not import it. Goal: warm under one second.

For each engine, in the CPU environment of its newest covered release (the tests' environments:
``patcher.maintainer.cpu_env``), one EAGLE-3 launch on a Kimi-K2 target with a SpecForge drafter
is judged as a whole process (``python -m patcher doctor --python ENV -- ...``):
- cold: an empty launch cache (``KIMI_PATCHER_CACHE`` in a fresh folder), so the parser runs;
- warm: the same line again, the cache filled;
- spellings: the same line on the bare published tree (no dependencies: the parser cannot run).
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--engine", choices=("vllm", "sglang"), action="append")
    args = ap.parse_args()
    for engine in args.engine or ("vllm", "sglang"):
        version = matrix.releases(engine)[-1]
        with tempfile.TemporaryDirectory() as tmp, cpu_env.using(engine, version, log=lambda line: None) as python:
            root = Path(tmp)
            line = launch(engine, rd.kimi_target(root, "kimi-k2", k25=False), rd.specforge_kimi(root))
            base = dict(os.environ, PYTHONPATH=str(ROOT))
            cold, warm = [], []
            for i in range(args.runs):
                env = dict(base, KIMI_PATCHER_CACHE=str(root / f"cache-{i}"))
                cold.append(timed(["--python", str(python), "--", *line], env))
                warm.append(timed(["--python", str(python), "--", *line], env))
            bare = [timed(["--site", str(wheels.tree(engine, version)), "--", *line], base) for _ in range(args.runs)]
        med = {name: statistics.median(s for s, _ in runs) for name, runs in
               (("cold", cold), ("warm", warm), ("spellings", bare))}
        print(f"{engine} {version}, {args.runs} runs each, median wall seconds of the whole process:")
        for name in med:
            said = {"cold": cold, "warm": warm, "spellings": bare}[name][0][1]
            print(f"  {name:10} {med[name]:6.2f} s   ({said[:70]})")
        print(f"  warm / cold: {med['warm'] / med['cold']:.3f}; warm under 1 s: {med['warm'] < 1.0}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
