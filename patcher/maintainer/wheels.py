"""Published engine wheels as test fixtures.

A wheel is fetched once per machine with ``pip download --no-deps`` and unpacked
into a site-packages-shaped tree under ``~/.cache/kimi-patcher/trees/`` holding
only the Python sources and the dist-info (vLLM wheels are ~340 MB, almost all
of it compiled kernels we never touch). The wheel is deleted after unpacking to
keep disk bounded; the tree is the cache. A marker file written last makes an
interrupted unpack invisible, so a killed run resumes cleanly.

CLI (for maintainers and for warming CI): ``python -m patcher.maintainer.wheels sglang 0.5.9 ...``
or ``--all sglang`` for the whole coverage window.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from patcher import engine_specs

CACHE = Path(os.environ.get("KIMI_PATCHER_CACHE", Path.home() / ".cache" / "kimi-patcher"))
TREES = CACHE / "trees"
_DONE = ".complete"

# Coverage window of the compatibility matrix: every published release from the first one we
# reason about (each engine's description: engine_specs.<engine>.SPEC.first_covered) to the
# newest on the index when the matrix was made.
WINDOW = {s.name: s.first_covered for s in engine_specs.ALL}


def _keep(name: str) -> bool:
    """Members of the wheel a test tree needs: sources and the dist-info."""
    top = name.split("/", 1)[0]
    return name.endswith(".py") or top.endswith(".dist-info")


def tree(engine: str, version: str) -> Path:
    """Site-packages-shaped tree of ``engine==version``; fetched on first use. One fetch per
    release at a time on this machine: two at once (a test session and a warm-up job) could each
    remove the other's partial tree and leave a complete-marked tree with files missing."""
    dest = TREES / f"{engine}-{version}"
    if (dest / _DONE).exists():
        return dest
    TREES.mkdir(parents=True, exist_ok=True)
    with open(TREES / f".{engine}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / _DONE).exists():  # fetched by the holder we waited for
            return dest
        _fetch(engine, version, dest)
    return dest


def _fetch(engine: str, version: str, dest: Path) -> None:
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        subprocess.run(
            # The wheel for this interpreter: SGLang >= 0.5.11 ships per-CPython builds
            # (the sources we patch are the same in each).
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "-d", tmp, f"{engine}=={version}"],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        partial = dest.with_name(dest.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(partial, [m for m in zf.namelist() if _keep(m)])
        (partial / _DONE).write_text(wheel.name + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        partial.rename(dest)


def published(engine: str) -> list[str]:
    """Every release of ``engine`` on the index inside the coverage window, oldest first."""
    from packaging.version import Version

    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", engine],
        check=True, capture_output=True, text=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    floor = Version(WINDOW[engine])
    return sorted((v for v in versions if Version(v) >= floor), key=Version)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.wheels")
    ap.add_argument("engine", choices=sorted(WINDOW))
    ap.add_argument("versions", nargs="*")
    ap.add_argument("--all", action="store_true", help="every release in the coverage window")
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    versions = published(args.engine) if args.all else args.versions
    with ThreadPoolExecutor(args.jobs) as pool:
        for path in pool.map(lambda v: tree(args.engine, v), versions):
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
