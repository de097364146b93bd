"""A small engine distribution built by the tests as a real wheel and installed with real pip.

So RECORD, dist-info and compiled bytecode are exactly what pip makes, and every
scenario runs the patched module in a fresh interpreter of that environment.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ENGINE = "toyengine"

# The module we patch: value() returns 1 before and 2 after (same size on purpose:
# a same-size, same-second edit is the classic stale-.pyc trap).
MODULE_V1 = '''"""Toy engine core."""


def value():
    return 1


def name():
    return "toy"
'''
PATCHED = MODULE_V1.replace("return 1", "return 2")

DIFF = """--- a/toyengine/core.py
+++ b/toyengine/core.py
@@ -2,7 +2,7 @@
 
 
 def value():
-    return 1
+    return 2
 
 
 def name():
"""

MANIFEST = """title = "toy fix"
why = "value() must be 2"
refs = ["toy/toy#1"]

[[variant]]
id = "v1"
versions = ">=1.0,<2.0"

[[upstream]]
versions = ">=2.0,<3.0"
since = "2.0"
ref = "toy/toy#2"
evidence = [{ file = "toyengine/core.py", contains = ["return 2"] }]

[[refused]]
versions = "<1.0"
reason = "no core module"
use = "1.0"
evidence = [{ file = "toyengine/core.py", lacks = ["def value"] }]

[[probe]]
id = "value-is-2"
module = "toyengine.core"
check = "value_is_2"
when = ["v1", "upstream"]
"""

PROBES = '''def value_is_2(mod):
    got = mod.value()
    assert got == 2, f"toyengine.core.value() returned {got}, wanted 2"
'''


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest: Path, version: str, core: str = MODULE_V1, sources: dict[str, bytes] | None = None) -> Path:
    """A real wheel of the toy engine; ``sources`` replaces its modules when given."""
    files = {f"{ENGINE}/__init__.py": b"", **(sources if sources is not None else {
        f"{ENGINE}/core.py": core.encode(),
        f"{ENGINE}/other.py": b"X = 1\n",
    })}
    info = f"{ENGINE}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {ENGINE}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{p},{_hash(d)},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    wheel = dest / f"{ENGINE}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
    return wheel


def write_family(root: Path) -> Path:
    fam = root / ENGINE / "fix"
    fam.mkdir(parents=True)
    (fam / "patch.toml").write_text(MANIFEST)
    (fam / "v1.diff").write_text(DIFF)
    (fam / "probes.py").write_text(PROBES)
    return root


# Templates: creating a venv and pip-installing the toy wheel cost about 2 s of CPU a test (pip
# starts twice: ``--python`` re-runs it in the target). Each is done once per test process into a
# template and copied per test (symlinks and timestamps kept, so pip's timestamp bytecode stays
# valid). A copy is only taken where it is byte-for-byte what the real command would leave: the
# install template is keyed by the whole venv before the install (every path, its mode, its
# mtime and its bytes), the wheel's members and pip's flags, so anything a test changed first
# (a planted file, a chmod, a hand edit) means a real pip run. Differences from a fresh run:
# direct_url.json names the template's wheel path, and pyvenv.cfg's informational ``command``
# line and the activate scripts name the template's folder; nothing in patcher reads them.
_TEMPLATES = Path(tempfile.mkdtemp(prefix="kimi-toy-templates-"))
atexit.register(shutil.rmtree, _TEMPLATES, True)


def make_venv(path: Path) -> Path:
    """A fresh venv without pip (``python -m venv --without-pip``), copied from this process's template."""
    empty = _TEMPLATES / "venv"
    if not empty.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(_TEMPLATES / "venv.partial")], check=True)
        (_TEMPLATES / "venv.partial").rename(empty)
    shutil.copytree(empty, path, symlinks=True)
    return path / "bin" / "python"


def make_venv_seeing_ours(path: Path) -> Path:
    """A venv that also sees the packages of the interpreter running the tests (patcher's own
    dependencies). ``--system-site-packages`` would not do it from inside a virtualenv: it reaches
    the *base* interpreter's site-packages, where a PEP 668 system python has none of them."""
    python = make_venv(path)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages")]
    (Path(purelib) / "zz-test-parent.pth").write_text("".join(f"{p}\n" for p in ours))
    return python


def _venv_state(root: Path) -> str | None:
    """Digest of everything under a venv: path, mode, mtime and bytes (or link target) of each entry."""
    if not (root / "pyvenv.cfg").is_file():
        return None
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            h.update(f"{p.relative_to(root)}\0{st.st_mode}\0".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                h.update(f"{st.st_mtime_ns}\0".encode() + p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _wheel_digest(wheel: Path) -> str:
    """The wheel's name and members (not its zip timestamps, which change every second)."""
    h = hashlib.sha256(wheel.name.encode())
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            h.update(f"\0{info.filename}\0{info.external_attr}\0".encode() + zf.read(info))
    return h.hexdigest()


def pip_install(python: Path, wheel: Path, *extra: str) -> None:
    """``pip install --no-deps --no-index [extra] wheel`` into ``python``'s venv; the result is
    copied from this process's template when the same install into the same venv state was done before."""
    root = Path(python).parent.parent.resolve()
    before = _venv_state(root)
    key = hashlib.sha256(f"{before}\0{_wheel_digest(wheel)}\0{extra!r}".encode()).hexdigest()[:32]
    done = _TEMPLATES / "pip" / key
    if before is not None and done.exists():
        for entry in list(root.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        shutil.copytree(done, root, symlinks=True, dirs_exist_ok=True)
        return
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-index", *extra, str(wheel)], check=True,
                   capture_output=True)
    if before is not None:
        shutil.copytree(root, done.with_name(key + ".partial"), symlinks=True)
        done.with_name(key + ".partial").rename(done)


def run_value(python: Path, env: dict | None = None) -> int:
    out = subprocess.run([str(python), "-c", "import toyengine.core as c; print(c.value())"],
                         check=True, capture_output=True, text=True, env=env)
    return int(out.stdout.strip())
