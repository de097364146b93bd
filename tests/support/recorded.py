"""What a release's own code answered in a test, recorded per input (issue 57).

The loader grid's truth (tests/support/loader_oracle.py run in a CPU env) is a pure function of its
inputs: the oracle's code, our loader child's code, the request, the drafter and target files, the
release's files as the env holds them, and the env's lock. ``truth`` keeps it under
``$KIMI_PATCHER_CACHE/truths/<kind>/<key>.json``, the key a hash of all of them
(``tests/test_recorded.py`` changes each in turn and sees the key change). A cell asked ``fresh``
(the default tier's) computes it again and fails where the record says otherwise.

The same holds for the probes' pass on a real import (tests/test_probes_cpu.py) and the mutant
sample's catches (tests/test_mutation.py), with all of our own files in the key (``our_files``).

``settled`` puts generated test inputs (the drafters of the grid) at a path named by their bytes,
so what is keyed by path (the product's own loader answers, ``release_loader``) is found again by
the next run instead of asked anew.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import patcher
from patcher.release import answers

REPO = Path(patcher.__file__).resolve().parent.parent
TRUTHS = answers.folder("truths")
SETTLED = answers.folder("test-inputs")
# What an oracle's interpreter is started with besides the CPU env's own: a fixed hash seed, since the
# releases' messages print sets (vLLM's "no module or parameter named ..." lists the module's), and a
# truth that is recorded must be the same every run.
ORACLE_ENV = {"PYTHONHASHSEED": "0"}


def key(*parts: str | bytes) -> str:
    """One hash of every part, each length-prefixed (no two lists of parts hash alike)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(f"{len(data)}\0".encode() + data)
    return h.hexdigest()


BIG = 64 << 20


def tree_digest(root: Path) -> str:
    """Every file under ``root``: its path relative to it and its bytes. A file past 64 MiB (the
    start-up grid's full-size drafters, written sparse: a safetensors header and holes) by its size
    and its first and last MiB, where the header and the last tensor are; reading gigabytes of
    holes every run would cost more than the answers it finds."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return key(*(x for p in files for x in (p.relative_to(root).as_posix(), _bytes(p))))


def _bytes(path: Path) -> bytes:
    size = path.stat().st_size
    if size <= BIG:
        return path.read_bytes()
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
        fh.seek(size - (1 << 20))
        return f"{size}\0".encode() + head + fh.read()


@functools.cache
def our_files(root: Path = REPO) -> str:
    """Everything of ours a patcher run reads: every file of the ``patcher`` package and of
    ``patches/`` (the diffs, manifests and probes), by content. A truth that runs the CLI (the probes'
    pass, a mutant's catch) depends on all of it: no narrower key would see every change that could
    alter it."""
    files = sorted(p for top in ("patcher", "patches") for p in (root / top).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    return key(*(x for p in files for x in (p.relative_to(root).as_posix(), p.read_bytes())))


def release_parts(install) -> list[str | bytes]:
    """What a truth asked in a CPU env depends on besides the question: the release's files as the
    env holds them (published or patched), the env line's lock, its shims and the code that picks
    them (cpu_env.py), the interpreter's version."""
    return [answers.files_digest(install.site, None, install.package),
            *env_parts(install.engine, str(install.version), Path(install.python))]


def published_parts(engine: str, version: str) -> list[str | bytes]:
    """``release_parts`` of the release as published (its wheel's files), for a truth whose run puts the
    published bytes back first (the mutant sample), asked before its env is entered."""
    from patcher import engine_specs
    from patcher.maintainer import cpu_env, wheels

    package = engine_specs.names(engine)[1]
    return [answers.files_digest(wheels.tree(engine, version), None, package),
            *env_parts(engine, version, cpu_env.ENVS / cpu_env.line_for(engine, version) / "bin" / "python")]


def env_parts(engine: str, version: str, python: Path) -> list[str | bytes]:
    """The CPU env's lock, its shims and the code that picks them (cpu_env.py), and the Python it
    runs: its version, not its path (each xdist worker has envs of its own, at another path, and
    either may run a release's tests)."""
    from patcher.maintainer import cpu_env

    line = cpu_env.line_for(engine, version)
    return [cpu_env.lock_path(line).read_bytes(), cpu_env.SHIM_TEMPLATE.read_bytes(),
            Path(cpu_env.__file__).read_bytes(), f"python {interpreter_version(python)}"]


def interpreter_version(python: Path) -> str:
    """The venv's Python version (its pyvenv.cfg), or, for an env not built yet, the one that will
    build it (cpu_env makes its venvs with this interpreter): the same string either way."""
    try:
        for line in (Path(python).parent.parent / "pyvenv.cfg").read_text().splitlines():
            name, _, value = line.partition("=")
            if name.strip() in ("version", "version_info"):
                return value.strip()
    except OSError:
        pass
    return platform.python_version()


def lookup(kind: str, parts: list[str | bytes]):
    """The record of ``parts``, or None."""
    return answers.load(TRUTHS / kind / f"{key(*parts, json.dumps(ORACLE_ENV))}.json")


def truth(kind: str, parts: list[str | bytes], compute, fresh: bool = False):
    """``compute()``'s answer (JSON), recorded under the hash of ``parts``; computed again where
    ``fresh`` or nothing is recorded, and then it must equal the record."""
    recorded = lookup(kind, parts)
    if recorded is not None and not fresh:
        return recorded
    return record(kind, parts, compute())


def record(kind: str, parts: list[str | bytes], got):
    """``got`` recorded under the hash of ``parts``; where a record is there, it must equal it."""
    path = TRUTHS / kind / f"{key(*parts, json.dumps(ORACLE_ENV))}.json"
    recorded = answers.load(path)
    if recorded is not None and got != recorded:
        answers.store(path.with_suffix(".fresh"), got)
        raise AssertionError(f"{path}: the recorded truth differs from the one computed now from the same "
                             f"inputs ({path.with_suffix('.fresh')})")
    answers.store(path, got)
    return got


def settled(made: Path) -> Path:
    """``made`` (a generated folder) moved to a path named by its bytes; the one already there
    where the same bytes were settled before (it is never written again). ``made`` is gone after:
    it is moved, not copied, where it can be (a copy would fill a sparse file's holes)."""
    digest = tree_digest(made)
    home = SETTLED / digest[:32]
    if home.exists() and tree_digest(home) != digest:  # changed since: input like any other
        shutil.rmtree(home)
    if not home.exists():
        SETTLED.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=SETTLED, prefix=".staging-"))
        try:
            os.rename(made, staging / "tree")
        except OSError:  # another file system
            shutil.copytree(made, staging / "tree")
        try:
            os.rename(staging / "tree", home)
        except OSError:  # another run settled the same bytes first
            pass
        shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(made, ignore_errors=True)
    return home


def settled_paths(tmp_path: Path, *writers) -> tuple[Path, ...]:
    """What each ``writer(folder)`` writes (it returns the path it made), settled together at a
    path named by their bytes (``settled``): the paths there, in order."""
    made = tmp_path / "inputs"
    made.mkdir(parents=True)
    paths = [writer(made) for writer in writers]
    home = settled(made)
    return tuple(home / path.relative_to(made) for path in paths)
