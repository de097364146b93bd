"""A real SGLang release (0.5.9: its dist-info, RECORD and every file our SGLang families read,
copied into a temporary site tree), pristine and patched, and the helpers that plant files in our
bookkeeping folder and run the CLI on it: shared by test_bookkeeping.py (the cases by table) and
test_bookkeeping_properties.py (arbitrary bytes and JSON).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.core import manifest, release_files, write
from patcher.environment import engines
from patcher.environment.engines import sha256_record

ENGINE, VERSION = "sglang", "0.5.9"
TARGET = "sglang/srt/models/llama_eagle3.py"  # patched on 0.5.9 by eagle3-drafter-keys


def _files_we_read(version: str) -> set[str]:
    from patcher.maintainer import wheels

    files = release_files.Files(engines.find(ENGINE, site=wheels.tree(ENGINE, version)))
    out = set()
    for fam in manifest.load_all(manifest.PATCHES, (ENGINE,)):
        for v in fam.variants:
            out |= {fp.path for fp in fam.patches[v.id]}
        out |= release_files.evidence_paths(files, fam)
    return out


def _release_site(tmp_path_factory, version: str) -> Path:
    from patcher.maintainer import wheels

    src = wheels.tree(ENGINE, version)
    dest = tmp_path_factory.mktemp("release") / "site"
    for info in src.glob(f"{ENGINE}-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    for rel in _files_we_read(version):
        if (src / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def release_site(tmp_path_factory) -> Path:
    return _release_site(tmp_path_factory, VERSION)


@pytest.fixture(scope="module")
def starts(release_site, tmp_path_factory) -> dict[str, Path]:
    """The release pristine, and with our patches applied (state file written)."""
    root = tmp_path_factory.mktemp("starts")
    pristine, applied = root / "pristine", root / "applied"
    shutil.copytree(release_site, pristine)
    shutil.copytree(release_site, applied)
    assert run("apply", applied)[0] == 0
    return {"pristine": pristine, "applied": applied}


def snapshot(root: Path, skip_ours: bool = False) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if skip_ours and write.DIRNAME in p.parts:
            continue
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = "->" + os.readlink(p)
        elif p.is_file():
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[key] = "dir"
    return out


def cli(*argv: str) -> tuple[int, str, str]:
    """The CLI in-process; an exception escaping main() is what a user would see as a traceback."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), out=out, err=err)
    except BaseException as exc:  # noqa: BLE001 - counting tracebacks is the point
        return -1, out.getvalue(), f"Traceback: {type(exc).__name__}: {exc}"
    return code, out.getvalue(), err.getvalue()


def run(action: str, site: Path, *extra: str) -> tuple[int, str, str]:
    return cli(action, "--engine", ENGINE, "--site", str(site), "--no-probes", *extra)


def assert_clean_error(code: int, err: str) -> None:
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    assert any(ln.strip().startswith(("wanted:", "found:")) for ln in lines[1:]), err
    assert any(ln.strip().startswith("hint:") for ln in lines[1:]), err


def _valid(kind: str, applied: Path) -> object:
    """The document patcher itself writes for ``kind``, to mutate one field of."""
    if kind in ("state", "state.orig"):
        return json.loads((applied / write.DIRNAME / f"{ENGINE}.json").read_text())
    patched = (applied / TARGET).read_bytes()
    return {"engine": ENGINE, "state_before": False, "files": [
        {"rel": TARGET, "old": sha256_record(patched), "new": sha256_record(b"x"), "backup": "0.orig", "mode": 420}]}


def _mutate(doc: object, path: list[int], value: object) -> object:
    """``doc`` with the node chosen by ``path`` (indices into each level's keys) replaced by ``value``."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc.keys()) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[key] = _mutate(doc[key], path[1:], value)  # type: ignore[index]
    return copy


def _plant(site: Path, applied: Path, which: str, how: tuple) -> None:
    kind, value, path = how
    home = site / write.DIRNAME
    txn = home / f"{ENGINE}.txn"
    if which in ("backup", "state.orig") or (which == "journal" and kind == "mutant"):
        txn.mkdir(parents=True, exist_ok=True)  # a run killed after its renames: the journal and its backup
        (txn / "journal.json").write_text(json.dumps(_valid("journal", applied)))
        (txn / "0.orig").write_bytes((applied / TARGET).read_bytes())
    if kind == "bytes":
        data = value
    else:
        data = json.dumps(_mutate(_valid(which, applied), path, value) if kind == "mutant" else value).encode()
    dest = {"state": home / f"{ENGINE}.json", "journal": txn / "journal.json", "backup": txn / "0.orig",
            "state.orig": txn / "state.orig", "lock": home / f"{ENGINE}.lock"}[which]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
