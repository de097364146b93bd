"""How fast `patcher drafter check` answers with the release's own loader, cold and warm, side by side
in one run (issue 52).

With ``--python ENV`` the check asks the drafter class the release builds, in the engine's interpreter,
what its ``load_weights`` does with the checkpoint's names and shapes (no tensor data): the first run
on a drafter imports the engine (seconds); the answer is cached per release files and drafter header,
so the next run does not import it. Goal: warm under one second.

For each engine, in the CPU environment of its newest covered release (the tests' environments,
``patcher.maintainer.cpu_env``), SpecForge's Kimi-K2 EAGLE-3 drafter (the real tool's layout, at
full size: a sparse file, headers only are read) is checked against a Kimi-K2 target, as a whole
process (``python -m patcher drafter check --python ENV --target T D``):
- cold: an empty answer cache (``KIMI_PATCHER_CACHE`` in a fresh folder), so the loader runs;
- warm: the same drafter again, the cache filled;
- bare: the same drafter on the bare published tree (``--site``: nothing can run, so the loader's
  questions are "cannot tell").
The releases are as published, so the check exits 1 on each ("setup": our families not applied yet);
what is timed is the whole answer, the loader's included.
Prints the median of ``--runs`` runs of each and the ratio warm / cold.

    python benchmarks/drafter_check_speed.py [--runs 3] [--engine vllm|sglang]
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


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "patcher", "drafter", "check", "--json", *argv],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return seconds, f"exit {proc.returncode}: {proc.stderr.strip()[-120:]}"
    findings = doc.get("findings", [])
    keys = [f for f in findings if f.get("code", "").startswith("keys")]
    said = "; ".join(f"{f['level']} {f['code']}" for f in keys[:2]) or "no keys finding"
    problems = sorted({f["code"].split(".")[0] for f in findings if f.get("level") == "problem"})
    return seconds, f"exit {proc.returncode}: {said}; problems in {problems or 'none'}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engine", choices=("vllm", "sglang"), action="append")
    args = ap.parse_args()
    for engine in args.engine or ("vllm", "sglang"):
        version = matrix.releases(engine)[-1]
        with tempfile.TemporaryDirectory() as tmp, cpu_env.using(engine, version, log=lambda line: None) as python:
            root = Path(tmp)
            target, drafter = rd.kimi_target(root, "kimi-k2", k25=False), rd.specforge_kimi(root)
            argv = ["--target", str(target), str(drafter)]
            base = dict(os.environ, PYTHONPATH=str(ROOT))
            cold, warm = [], []
            for i in range(args.runs):
                env = dict(base, KIMI_PATCHER_CACHE=str(root / f"cache-{i}"))
                cold.append(timed(["--python", str(python), *argv], env))
                warm.append(timed(["--python", str(python), *argv], env))
            bare = [timed(["--site", str(wheels.tree(engine, version)), *argv], base) for _ in range(args.runs)]
        runs = {"cold": cold, "warm": warm, "bare": bare}
        med = {name: statistics.median(s for s, _ in got) for name, got in runs.items()}
        print(f"{engine} {version}, {args.runs} runs each, median wall seconds of the whole process:")
        for name, got in runs.items():
            print(f"  {name:6} {med[name]:6.2f} s   (first: {got[0][0]:.2f} s; {got[0][1][:80]})")
        print(f"  warm / cold: {med['warm'] / med['cold']:.3f}; warm under 1 s: {med['warm'] < 1.0}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
