"""No interpreter may run stale bytecode of a file we changed.

Every cached ``.pyc`` of a touched module goes, for every interpreter tag and
optimisation level, in ``__pycache__`` and under the target's ``sys.pycache_prefix``.
Where the install shipped bytecode for the target interpreter, it is recompiled in the
same invalidation mode (Docker images often ship ``unchecked-hash`` pycs, which CPython
never revalidates against the source: deleting them is the only safe fix, recompiling
keeps start-up fast).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patcher.environment.engines import Install

# PEP 552 flags word: bit 0 = hash-based, bit 1 = check the source.
_MODES = {0: "TIMESTAMP", 1: "UNCHECKED_HASH", 3: "CHECKED_HASH"}


@dataclass(frozen=True)
class Compiled:
    source: str  # absolute path of the .py
    optimize: int
    mode: str  # py_compile.PycInvalidationMode member name


def cached_files(install: Install, rel: str) -> list[Path]:
    src = install.site / rel
    stem = src.stem  # a module name: no glob metacharacters
    dirs = [src.parent / "__pycache__"]
    if install.pycache_prefix:
        # CPython mirrors the path it imported from, symlinks and all (cache_from_source does not
        # resolve); another process may import the same file through its real path.
        for parent in dict.fromkeys((os.path.abspath(src.parent), os.path.realpath(src.parent))):
            dirs.append(Path(install.pycache_prefix) / parent.lstrip("/"))
    out: list[Path] = []
    for d in dirs:
        if d.is_dir():
            out.extend(d.glob(f"{stem}.*.pyc"))  # the dot is literal: never coremore.*.pyc
    legacy = src.with_suffix(".pyc")  # sourceless-style pyc beside the source wins over it
    if legacy.exists():
        out.append(legacy)
    return out


def shipped(install: Install, rels: list[str]) -> list[Compiled]:
    """Bytecode the target interpreter had for these files, to rebuild the same way."""
    out: list[Compiled] = []
    if not install.cache_tag:
        return out
    for rel in rels:
        for pyc in cached_files(install, rel):
            parts = pyc.name.split(".")
            if len(parts) < 3 or parts[1] != install.cache_tag:
                continue
            opt = int(parts[2][4:]) if parts[2].startswith("opt-") else 0
            try:
                flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
            except OSError:
                continue
            out.append(Compiled(str(install.site / rel), opt, _MODES.get(flags, "TIMESTAMP")))
    return list(dict.fromkeys(out))  # the same pyc under both prefix mirrors is rebuilt once


def remove(install: Install, rels: list[str]) -> None:
    for rel in rels:
        for pyc in cached_files(install, rel):
            pyc.unlink(missing_ok=True)  # another interpreter importing the engine may beat us to it


COMPILE_TIMEOUT = 300  # seconds: a compile of a few engine modules takes well under one
_COMPILE = """
import json, py_compile, sys
for src, opt, mode in json.loads(sys.argv[1]):
    py_compile.compile(src, doraise=True, optimize=opt,
                       invalidation_mode=py_compile.PycInvalidationMode[mode])
"""


def recompile(install: Install, items: list[Compiled]) -> str | None:
    """Rebuild in the target interpreter itself: the magic number must be its own. Returns why
    it failed, or None. A failure is not an error: the stale bytecode is already gone, so the
    engine's next import compiles the new source itself (only start-up is slower)."""
    if not items or not install.python:
        return None
    payload = json.dumps([[c.source, c.optimize, c.mode] for c in items])
    try:
        subprocess.run([install.python, "-c", _COMPILE, payload], check=True, capture_output=True,
                       timeout=COMPILE_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        return (exc.stderr.decode(errors="replace").strip().splitlines() or [f"exit {exc.returncode}"])[-1][:300]
    except subprocess.TimeoutExpired:  # its str() is the whole command line, payload included
        return f"{install.python} did not finish compiling in {COMPILE_TIMEOUT} s"
    except OSError as exc:
        return str(exc)[:300]
    return None
