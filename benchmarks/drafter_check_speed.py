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

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doctor_speed import ROOT, run  # noqa: E402


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
    return run(__doc__.splitlines()[0], timed, lambda engine: lambda where, t, d: [*where, "--target", str(t), str(d)],
               runs=3)


if __name__ == "__main__":
    raise SystemExit(main())
