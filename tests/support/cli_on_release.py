"""The CLI in-process, and a site-packages holding a published release's files our families read:
exact lines and exit codes on real releases without copying whole trees (test_cli.py,
test_selection.py)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from patcher.cli.main import main
from patcher.core import manifest, release_files
from patcher.environment import engines
from patcher.maintainer import wheels


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def install(tmp_path: Path, engine: str, version: str) -> Path:
    """A site-packages holding the release's dist-info and every file our families read:
    the same answers as the full tree, in a fraction of the copying."""
    tree, site = wheels.tree(engine, version), tmp_path / f"{engine}-{version}"
    dist = next(tree.glob(f"{engine}-*.dist-info"))
    shutil.copytree(dist, site / dist.name)
    rels = {"__init__.py"}
    files = release_files.Files(engines.find(engine, site=tree))
    for fam in manifest.load_all(manifest.PATCHES, (engine,)):
        for v in fam.variants:
            rels |= {fp.path.split("/", 1)[1] for fp in fam.patches[v.id]}
        rels |= {rel.split("/", 1)[1] for rel in release_files.evidence_paths(files, fam)}
    for rel in rels:
        src = tree / engine / rel
        if src.is_file():
            (site / engine / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, site / engine / rel)
    return site
