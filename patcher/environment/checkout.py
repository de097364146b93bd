"""An editable install (PEP 660, setuptools' finders, legacy ``develop``): where its package is,
and what proves its files as published, since no RECORD lists them (issue 42: SGLang's own Docker
images hold an editable checkout; vLLM built from source is one too).
"""

from __future__ import annotations

import ast
import contextlib
import json
import urllib.parse
from pathlib import Path

from packaging.version import Version

from patcher.environment.paths import HASH_SHAPE, plain_rel


def direct_url(dist_info: Path) -> dict:
    """PEP 610's ``direct_url.json`` of a distribution, or {} (absent or not its shape: input)."""
    try:
        direct = json.loads((dist_info / "direct_url.json").read_text())
    except (OSError, ValueError):
        return {}
    return direct if isinstance(direct, dict) and isinstance(direct.get("dir_info", {}), dict) else {}


def editable(dist_info: Path) -> bool:
    return bool(direct_url(dist_info).get("dir_info", {}).get("editable"))


def package(site: Path, name: str, dists: list) -> Path | None:
    """Where Python would import the package ``name`` from, for an editable install seen through ``--site``
    alone (no interpreter to ask), read as ``site.py`` and the editable finders read it: a path
    line of a ``.pth`` file (setuptools' lenient mode, legacy ``develop``), the ``MAPPING`` of
    setuptools' ``__editable___*_finder.py``, else the folder ``direct_url.json`` names."""
    for pth in sorted(site.glob("*.pth")):
        try:
            lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in (ln.strip() for ln in lines):
            if line and not line.startswith(("#", "import ", "import\t")) and (site / line / name).is_dir():
                return site / line / name  # an absolute line stays itself under '/'
    for finder in sorted(site.glob("__editable___*_finder.py")):
        try:
            tree = ast.parse(finder.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["MAPPING"]:
                with contextlib.suppress(ValueError):
                    mapping = ast.literal_eval(node.value)
                    if isinstance(mapping, dict) and isinstance(mapping.get(name), str) and \
                            Path(mapping[name]).is_dir():
                        return Path(mapping[name])
    for dist in dists:
        direct = direct_url(Path(dist._path))
        url = direct.get("url") if direct.get("dir_info", {}).get("editable") else None
        if isinstance(url, str) and url.startswith("file://"):
            root = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
            for pkg in (root / name, root / "src" / name):
                if pkg.is_dir():
                    return pkg
    return None


def record(engine: str, version: Version, pkg_dir: Path, published: Path | None) -> tuple[dict, str]:
    """The files of an editable checkout (every ``.py`` under the package Python imports), each with
    the hash the release published where the patch set ships it (``patches/<engine>/published.json``,
    the files our variants write), else none: such a file is never pristine, so nothing of ours
    is written over it."""
    table: dict = {}
    if published is not None:
        try:
            raw = json.loads((published / engine / "published.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = {}
        got = raw.get(str(version)) if isinstance(raw, dict) else None
        table = got if isinstance(got, dict) else {}
    record = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        rel = path.relative_to(pkg_dir.parent).as_posix()
        if plain_rel(rel) and "__pycache__" not in rel:
            value = table.get(rel, "")
            record[rel] = value if isinstance(value, str) and HASH_SHAPE.fullmatch(value) else ""
    where = f"an editable checkout at {pkg_dir.parent}"
    if not table:
        return record, (f"{where}: the patch set ships no published hashes for {engine} {version}, so no file "
                        "of it can be proven as published")
    return record, f"{where}, proven against the hashes {engine} {version} published (shipped with the patch set)"
