"""The README's demo: patch a real published release and watch its probes pass (port proves its
candidates with ``port_proof``, not with this).

    python -m patcher.maintainer.demo --engine sglang --version 0.5.9

1. fetches the published wheel (cached in ~/.cache/kimi-patcher/trees);
2. builds, or reuses, the CPU import environment of that release line
   (patcher/maintainer/cpu_env.py: the same environments the test suite uses, the engine's
   real dependencies with the CPU build of torch) and puts the release in it;
3. runs ``patcher apply --no-probes`` then ``patcher verify`` against that environment's python
   and prints what they print: every probe imports the patched module and checks its behaviour;
4. reverts the environment to the published files (``--keep`` leaves it patched).

One line of progress per slow step, with the time it took. The environment is held
(``cpu_env.using``) for the whole run, so concurrent users of the same line wait.
Exit code: verify's (0 when every family is applied or upstream and its probes passed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from patcher import engine_specs
from patcher.maintainer import cpu_env, wheels

REPO = Path(__file__).resolve().parents[2]


def _step(label: str, say: Callable[[str], None]):
    t0 = time.monotonic()
    say(f"... {label}")
    return lambda extra="": say(f"    done in {time.monotonic() - t0:.1f} s{extra}")


def _patcher(python: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, in this interpreter, against the engine environment's python."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "patcher", *args, "--python", str(python)], env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def prove(engine: str, version: str, keep: bool = False, say: Callable[[str], None] = print) -> int:
    start = time.monotonic()
    cpu_env.line_for(engine, version)  # a release no line reaches fails here, before any download
    done = _step(f"fetching the published {engine}=={version} wheel", say)
    wheels.CACHE.mkdir(parents=True, exist_ok=True)
    wheels.tree(engine, version)
    done()
    done = _step(f"preparing the CPU import environment {cpu_env.line_for(engine, version)} "
                 f"(cold: built once, 83 s measured on 2 cores; then about a second to swap a release in)", say)
    with cpu_env.using(engine, version, log=lambda line: say("    " + line)) as python:
        done(f": {python}")
        _patcher(python, "revert", "--engine", engine, "--no-probes")  # a previous run's leftovers
        code = 2
        # apply's own probes would import the engine once more for the same proof verify gives
        # right after (about a minute cold on 2 cores): the first command stays under 5 minutes.
        for action, extra in (("apply", ("--no-probes",)), ("verify", ())):
            done = _step(" ".join(["patcher", action, "--engine", engine, *extra, "--python", str(python)]), say)
            proc = _patcher(python, action, "--engine", engine, *extra)
            done(f" (exit {proc.returncode})")
            for line in (proc.stdout + proc.stderr).splitlines():
                say("    " + line)
            code = proc.returncode
            if code == 2:
                break
        if not keep:
            proc = _patcher(python, "revert", "--engine", engine, "--no-probes")
            say(f"... reverted the environment to the published files (exit {proc.returncode}); "
                "--keep leaves it patched")
    say(f"total {time.monotonic() - start:.1f} s; exit {code}")
    return code


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=engine_specs.NAMES, required=True)
    ap.add_argument("--version", required=True, help="a published release of the engine (README: sglang 0.5.9)")
    ap.add_argument("--keep", action="store_true", help="leave the environment patched")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return prove(args.engine, args.version, args.keep, say=lambda line: print(line, flush=True))
    except ValueError as exc:  # no CPU env line reaches this release
        print(f"error: {exc}\n  hint: the lines are in patcher/maintainer/cpu_env.py (LINES)", file=sys.stderr)
        return 2
    except cpu_env.CpuBuildMissing as exc:  # says what, wanted, found and the command that fixes it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"error: {' '.join(map(str, exc.cmd))[:200]} failed (exit {exc.returncode})\n"
              "  hint: the output above says why; a download needs the package index", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
