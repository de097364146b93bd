"""What a release's own code answered in a test, recorded per input (issue 57).

The loader grid's truth (tests/support/loader_oracle.py run in a CPU env) is a pure function of its
inputs: the oracle's code, our loader child's code, the request, the drafter and target files, the
release's files as the env holds them, and the env's lock. ``truth`` keeps it under
``$KIMI_PATCHER_CACHE/truths/<kind>/<key>.json``, the key a hash of all of them
(``tests/test_recorded.py`` changes each in turn and sees the key change). A cell asked ``fresh``
(the default tier's) computes it again and fails where the record says otherwise.

``settled`` puts generated test inputs (the drafters of the grid) at a path named by their bytes,
so what is keyed by path (the product's own loader answers, ``release_loader``) is found again by
the next run instead of asked anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from patcher.release import answers

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


def release_parts(install) -> list[str | bytes]:
    """What a truth asked in a CPU env depends on besides the question: the release's files as the
    env holds them (published or patched), the env line's lock, its shims and the code that picks
    them (cpu_env.py), the interpreter."""
    from patcher.maintainer import cpu_env

    line = cpu_env.line_for(install.engine, str(install.version))
    return [answers.files_digest(install.site, None, install.package), (cpu_env.LOCKS / f"{line}.txt").read_bytes(),
            cpu_env.SHIM_TEMPLATE.read_bytes(), Path(cpu_env.__file__).read_bytes(), str(install.python)]


def lookup(kind: str, parts: list[str | bytes]):
    """The record of ``parts``, or None."""
    return answers.load(TRUTHS / kind / f"{key(*parts, json.dumps(ORACLE_ENV))}.json")


def truth(kind: str, parts: list[str | bytes], compute, fresh: bool = False):
    """``compute()``'s answer (JSON), recorded under the hash of ``parts``; computed again where
    ``fresh`` or nothing is recorded, and then it must equal the record."""
    path = TRUTHS / kind / f"{key(*parts, json.dumps(ORACLE_ENV))}.json"
    recorded = answers.load(path)
    if recorded is not None and not fresh:
        return recorded
    got = compute()
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
