"""Run mutmut's survivors against tests its fast selection leaves out (kill points, races, real wheels).

mutmut (see [tool.mutmut] in pyproject.toml and benchmarks/MUTATION.md) runs each mutant against
the fast tests only; a survivor there may still be killed by a slow test. This script activates each
survivor the way mutmut does (MUTANT_UNDER_TEST, in the mutants/ copy) and runs the given pytest
arguments, stopping at the first failure. Run it from the folder where `mutmut run` ran:

    python /path/to/benchmarks/mutmut_recheck.py [--only SUBSTRING] -- <pytest args>

Prints one line per survivor, KILLED (with the test that failed) or SURVIVED, then the totals.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path


def survivors(only: list[str]) -> list[str]:
    out = subprocess.run(["mutmut", "results"], capture_output=True, text=True, check=True).stdout
    names = [m.group(1) for m in re.finditer(r"^\s*(\S+): survived$", out, re.M)]
    return [n for n in names if not only or any(o in n for o in only)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="survivors whose name contains this")
    ap.add_argument("pytest_args", nargs="+", help="after --: the tests to run against each survivor")
    args = ap.parse_args()
    left = 0
    for name in survivors(args.only):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args.pytest_args],
                              cwd=Path("mutants"), capture_output=True, text=True,
                              env=dict(os.environ, MUTANT_UNDER_TEST=name))
        failed = re.search(r"^FAILED (\S+)", proc.stdout, re.M)
        if proc.returncode == 1 and failed:
            print(f"KILLED    {name}  by {failed.group(1)}", flush=True)
        elif proc.returncode == 0:
            left += 1
            print(f"SURVIVED  {name}", flush=True)
        else:  # collection error, usage error, no tests: not a verdict
            print(f"ERROR     {name}  pytest exit {proc.returncode}: {proc.stdout.strip().splitlines()[-1:]}",
                  flush=True)
            left += 1
    print(f"{left} not killed")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
