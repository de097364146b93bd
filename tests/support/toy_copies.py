"""The four-module toy engine the crash, race and hostile-input tests share: built as a real wheel,
pip-installed into a venv once per test module (``base_venv``) and copied per test (``new_env``).

Its family ``pair`` spans two files, so a partial apply is possible; ``crlf`` and ``nonl`` patch a
CRLF file and one without a final newline. Every pristine / patched pair is known byte for byte
(``PRISTINE``, ``PATCHED``), so ``kinds`` can say of each file: old, new or OTHER. Used by
test_kill_points.py, test_races.py and test_hostile_inputs.py; the child-process driver they run
is tests/support/killpoints.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from patcher.core import write
from patcher.errors import PatcherError
from patcher.installer import actions
from tests.support import toy

REPO = Path(__file__).resolve().parent.parent.parent


ENGINE = toy.ENGINE


PY = f"python{sys.version_info[0]}.{sys.version_info[1]}"


# The toy engine: four modules, each pristine / patched pair known byte for byte.


OTHER_V1 = "X = 1\n\n\ndef other():\n    return X\n"


CRLF_V1 = "A = 1\r\nB = 1\r\nC = 1\r\n"


NONL_V1 = "A = 1\nB = 1\nC = 1"  # no final newline


PRISTINE = {
    "toyengine/core.py": toy.MODULE_V1.encode(),
    "toyengine/other.py": OTHER_V1.encode(),
    "toyengine/crlf.py": CRLF_V1.encode(),
    "toyengine/nonl.py": NONL_V1.encode(),
}


PATCHED = {
    "toyengine/core.py": toy.PATCHED.encode(),
    "toyengine/other.py": OTHER_V1.replace("X = 1", "X = 2").encode(),
    "toyengine/crlf.py": CRLF_V1.replace("B = 1", "B = 2").encode(),
    "toyengine/nonl.py": NONL_V1.replace("C = 1", "C = 2").encode(),
}


CORE_DIFF = toy.DIFF


OTHER_DIFF = """--- a/toyengine/other.py
+++ b/toyengine/other.py
@@ -1,4 +1,4 @@
-X = 1
+X = 2
 
 
 def other():
"""


CRLF_DIFF = """--- a/toyengine/crlf.py
+++ b/toyengine/crlf.py
@@ -1,3 +1,3 @@
 A = 1
-B = 1
+B = 2
 C = 1
"""


NONL_DIFF = """--- a/toyengine/nonl.py
+++ b/toyengine/nonl.py
@@ -1,3 +1,3 @@
 A = 1
 B = 1
-C = 1
\\ No newline at end of file
+C = 2
\\ No newline at end of file
"""


PAIR = ("toyengine/core.py", "toyengine/other.py")


def manifest(diffs: list[str], versions: str = ">=1.0,<2.0", extra: str = "") -> str:
    return (f'title = "toy"\nwhy = "tests"\n\n[[variant]]\nid = "v1"\nversions = "{versions}"\n'
            f"diffs = {json.dumps(diffs)}\n" + extra)


FAMILIES = {
    # name -> {file name: text}
    "pair": {"patch.toml": manifest(["core.diff", "other.diff"]), "core.diff": CORE_DIFF, "other.diff": OTHER_DIFF},
    "crlf": {"patch.toml": manifest(["crlf.diff"]), "crlf.diff": CRLF_DIFF},
    "nonl": {"patch.toml": manifest(["nonl.diff"]), "nonl.diff": NONL_DIFF},
}


def write_families(root: Path, families: dict[str, dict[str, str]]) -> Path:
    for name, files in families.items():
        d = root / ENGINE / name
        d.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            (d / fname).write_bytes(text.encode())
    return root


def build_wheel(dest: Path, version: str, sources: dict[str, bytes]) -> Path:
    return toy.build_wheel(dest, version, sources=sources)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base")
    python = toy.make_venv(root / "venv")
    toy.pip_install(python, build_wheel(root, "1.0", PRISTINE))
    return root / "venv"


@dataclass
class Env:
    venv: Path
    patches: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site(self) -> Path:
        return self.venv / "lib" / PY / "site-packages"

    def opts(self, **kw) -> actions.Options:
        kw.setdefault("probes", False)
        return actions.Options(python=str(self.python), patches=self.patches, **kw)

    def read(self, rel: str) -> bytes:
        return (self.site / rel).read_bytes()

    def copy(self, dest: Path) -> Env:
        shutil.copytree(self.venv, dest, symlinks=True)
        return Env(dest, self.patches)


def new_env(base_venv: Path, where: Path, families=("pair", "crlf", "nonl")) -> Env:
    where.mkdir(parents=True, exist_ok=True)
    patches = where / "patches"
    if not patches.exists():
        write_families(patches, {k: FAMILIES[k] for k in families})
    shutil.copytree(base_venv, where / "venv", symlinks=True)
    return Env(where / "venv", patches)


def run(action: str, opts: actions.Options, engine: str = ENGINE):
    """(exit code as the CLI would return it, report or error)."""
    try:
        report = getattr(actions, action)(engine, opts)
    except PatcherError as exc:
        return exc.exit_code, exc
    return report.exit_code(opts.strict), report


def record(env: Env) -> dict[str, str]:
    (info,) = env.site.glob(f"{ENGINE}-*.dist-info")
    return {ln.split(",")[0]: ln.split(",")[1] for ln in (info / "RECORD").read_text().splitlines()}


def leftovers(env: Env) -> list[str]:
    tmp = [str(p) for p in env.site.rglob(f"*{write.TMP_SUFFIX}")]
    home = env.site / write.DIRNAME
    if (home / f"{ENGINE}.txn").exists():
        tmp.append(str(home / f"{ENGINE}.txn"))
    return tmp


def kinds(env: Env, rels) -> dict[str, str]:
    out = {}
    for rel in rels:
        data = env.read(rel)
        out[rel] = "old" if data == PRISTINE[rel] else "new" if data == PATCHED[rel] else "OTHER"
    return out


def child_result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


KILL_FAMILIES = ("pair", "crlf")


FAMILY_FILES = {"toyengine/pair": PAIR, "toyengine/crlf": ("toyengine/crlf.py",)}


ALL_FILES = tuple(sorted((*PAIR, "toyengine/crlf.py")))


def cfg_for(env: Env, action: str, **kw) -> dict:
    return {"action": action, "engine": ENGINE, "python": str(env.python), "patches": str(env.patches), **kw}


def print_campaign(tried: dict[str, list[str]]) -> None:
    """What a kill-point, race or hostile-input module tried, printed once after its tests (-s)."""
    if tried:
        print("\nreliability campaign:")
        for k, v in tried.items():
            print(f"  {k}: {len(v)} tried: {v}")


def snapshot(root: Path) -> dict[str, str]:
    """Hash of every file under root except our own bookkeeping (symlinks hashed as their target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if ".kimi-patcher" in p.parts:
            continue
        if p.is_symlink():
            out[str(p.relative_to(root))] = "->" + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def refused(env: Env, expect_exit: int, action: str = "apply", ignore_pyc: bool = False, **kw):
    """Run ``action``: it must exit ``expect_exit`` with a clear error (never an OSError) and change
    no byte under site-packages."""
    before = snapshot(env.site)
    try:
        code, rep = run(action, env.opts(**kw))
    except OSError as exc:  # not a PatcherError: the CLI would print a traceback
        pytest.fail(f"{action} raised {type(exc).__name__}: {exc} instead of a clear error")
    after = snapshot(env.site)
    if ignore_pyc:
        before = {k: v for k, v in before.items() if "__pycache__" not in k}
        after = {k: v for k, v in after.items() if "__pycache__" not in k}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert code == expect_exit, f"exit {code}, wanted {expect_exit}: {rep}"
    assert changed == [], f"bytes changed: {changed}"
    return rep
