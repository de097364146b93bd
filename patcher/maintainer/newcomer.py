"""The newcomer's path: the README's two commands, run as a new user runs them, in a fresh clone.

    python -m patcher.maintainer.newcomer [--cold DIR] [--log DIR]

1. clones this repository's committed HEAD into a temporary folder (what ``git clone`` gives);
2. reads the commands under the README's "## The two commands": its first two ``sh`` blocks;
3. runs each with bash in the clone, stdin closed, its output kept, timed; and measures how much
   the caches grew (``KIMI_PATCHER_CACHE``, default ``~/.cache/kimi-patcher``, and pip's).

``--cold DIR`` points both caches into an empty ``DIR``: the numbers are a fresh machine's (the
README's cold figures come from here). Without it the machine's warm caches are used, as the slow
tier does (tests/test_newcomer.py asserts on what the two commands print).
One line per command: exit code, wall time, cache growth. Exit: 0 when both commands exited 0.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTION = "## The two commands"


@dataclass(frozen=True)
class Run:
    command: str
    code: int
    seconds: float
    output: str
    cache_growth: int  # bytes the caches grew by while it ran

    def line(self) -> str:
        return (f"exit {self.code} in {self.seconds / 60:.0f} min {self.seconds % 60:.0f} s, "
                f"caches grew {self.cache_growth / 1e9:.1f} GB: {self.command}")


def readme_commands(readme: str) -> list[str]:
    """The two commands a newcomer pastes: the first two sh blocks under SECTION."""
    if SECTION not in readme:
        raise ValueError(f"README has no {SECTION!r} section")
    blocks = re.findall(r"```sh\n(.+?)\n```", readme.split(SECTION, 1)[1], re.S)
    if len(blocks) < 2:
        raise ValueError(f"wanted two sh blocks under {SECTION!r}, found {len(blocks)}")
    return blocks[:2]


def caches(cold: Path | None) -> dict[str, Path]:
    """The caches the commands fill, by the variable that moves each (set only when cold)."""
    if cold is not None:
        return {"KIMI_PATCHER_CACHE": cold / "kimi-patcher", "PIP_CACHE_DIR": cold / "pip"}
    home = Path.home() / ".cache"
    return {"KIMI_PATCHER_CACHE": Path(os.environ.get("KIMI_PATCHER_CACHE", home / "kimi-patcher")),
            "PIP_CACHE_DIR": Path(os.environ.get("PIP_CACHE_DIR", home / "pip"))}


def disk_use(paths: list[Path]) -> int:
    """Bytes on disk under paths (du's count: what the machine loses, hard links once)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return 0
    out = subprocess.run(["du", "-s", "-B1", "-c", *existing], capture_output=True, text=True)
    # Another process (a second pytest worker) may delete a file of the shared cache while du walks it:
    # du then exits 1 with "No such file or directory" and still prints the total of what it counted.
    vanished = all("No such file or directory" in line for line in out.stderr.splitlines())
    if out.returncode != 0 and not (out.returncode == 1 and vanished and out.stdout.strip()):
        raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
    return int(out.stdout.splitlines()[-1].split()[0])


def walk(source: Path = REPO, cold: Path | None = None, log: Path | None = None,
         say: Callable[[str], None] = print, pytest_addopts: str | None = None) -> list[Run]:
    """Clone source, then run the README's two commands in the clone, one after the other.

    ``pytest_addopts`` (PYTEST_ADDOPTS for the commands) narrows what the test command runs: the
    slow test proves the command works in a clone, while CI's default tier is that very command on
    a clean clone, run in full."""
    where = caches(cold)
    # A newcomer's shell: none of the variables a surrounding venv or pytest run sets
    # (KIMI_TEST_PROGRESS is tests/support/progress.py's: it would print to our terminal).
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "KIMI_TEST_PROGRESS") and not k.startswith("PYTEST_")}
    if cold is not None:
        env.update({k: str(v) for k, v in where.items()})
    if pytest_addopts is not None:
        env["PYTEST_ADDOPTS"] = pytest_addopts
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="newcomer-") as tmp:
        clone = Path(tmp) / "kimi-patcher"
        subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
        for i, command in enumerate(readme_commands((clone / "README.md").read_text()), 1):
            say(f"... command {i}: {command}")
            before, t0 = disk_use(list(where.values())), time.monotonic()
            proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
            run = Run(command, proc.returncode, time.monotonic() - t0, proc.stdout,
                      disk_use(list(where.values())) - before)
            if log is not None:
                log.mkdir(parents=True, exist_ok=True)
                (log / f"command-{i}.log").write_text(f"$ {command}\n{run.output}\n# {run.line()}\n")
            say("    " + run.line())
            runs.append(run)
            if run.code != 0:
                break  # the second command after a failed first proves nothing new
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.newcomer",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold", type=Path, metavar="DIR",
                    help="an empty folder to hold the caches: measure a fresh machine")
    ap.add_argument("--log", type=Path, metavar="DIR", help="write each command's whole output here")
    args = ap.parse_args(argv)
    if args.cold is not None and args.cold.exists() and any(args.cold.iterdir()):
        print(f"error: --cold {args.cold} is not empty\n  hint: name a new folder; a cold run "
              "measures caches filled from nothing", file=sys.stderr)
        return 2
    runs = walk(cold=args.cold, log=args.log, say=lambda line: print(line, flush=True))
    return 0 if len(runs) == 2 and all(r.code == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
