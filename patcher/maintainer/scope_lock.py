"""Write each family's scope locks from the published wheels: ``derived-scope.json``, the scope
derived from each variant's hunks (``patcher.core.derived_scope``), for every family, and
``scope.json``, the signature of a hand-written ``[scope]`` (``patcher.core.scope``), on the files
of every covered release each variant declares.

Each variant keeps the distinct signatures of the releases it was proven on (a new reader in the
middle of a range that the variant already handles, e.g. vLLM 0.34.0's, is one more proven
signature). ``tests/test_scope.py`` checks the written files against the wheels.

    python -m patcher.maintainer.scope_lock [--engine E] [--family NAME] [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version

from patcher.core import derived_scope, manifest, matrix, scope
from patcher.core.manifest import Family, Variant, tomllib
from patcher.core.release_files import Files
from patcher.environment import engines
from patcher.maintainer import wheels


def signatures(family: Family, releases: list[str] | None = None,
               files_of: Callable[[str, str], Files] | None = None) -> dict[str, list[dict]]:
    """{variant id: the distinct signatures of the covered releases it declares, oldest first}.
    ``files_of(engine, version)``: the release's files (a reader that keeps them, for many calls)."""
    assert family.scope is not None
    out: dict[str, list[dict]] = {v.id: [] for v in family.variants}
    for version in releases if releases is not None else matrix.releases(family.engine):
        entry = family.classify(Version(version))
        if not isinstance(entry, Variant):
            continue
        files = (files_of(family.engine, version) if files_of is not None else
                 Files(engines.find(family.engine, site=wheels.tree(family.engine, version))))
        sig = {rel: list(toks) for rel, toks in scope.signature(family.scope, files).items()}
        if sig not in out[entry.id]:
            out[entry.id].append(sig)
    return out


def derived(family: Family, releases: list[str] | None = None,
            files_of: Callable[[str, str], Files] | None = None,
            signature_of: Callable[[Family, str, Files], derived_scope.Signature] = derived_scope.signature,
            ) -> dict[str, list[dict]]:
    """{variant id: the distinct derived-scope signatures (``derived_scope``) of the covered releases
    it declares, oldest first}. ``signature_of``: a reader that keeps signatures, for many calls."""
    out: dict[str, list[dict]] = {v.id: [] for v in family.variants}
    for version in releases if releases is not None else matrix.releases(family.engine):
        entry = family.classify(Version(version))
        if not isinstance(entry, Variant):
            continue
        files = (files_of(family.engine, version) if files_of is not None else
                 Files(engines.find(family.engine, site=wheels.tree(family.engine, version))))
        sig = {rel: list(toks) for rel, toks in signature_of(family, entry.id, files).items()}
        if sig not in out[entry.id]:
            out[entry.id].append(sig)
    return out


def _bootstrap(root: Path) -> None:
    """A family given a [scope] has no scope.json yet: an empty one, so that the manifest loads."""
    for toml in sorted(root.glob("*/*/patch.toml")):
        raw = tomllib.loads(toml.read_text())
        if "scope" in raw and not (toml.parent / "scope.json").is_file():
            ids = [v["id"] for v in raw.get("variant", [])]
            (toml.parent / "scope.json").write_text(json.dumps(dict.fromkeys(ids, [])) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.scope_lock", description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=manifest.ENGINES, action="append")
    ap.add_argument("--family")
    ap.add_argument("--check", action="store_true", help="compare with the files, write nothing")
    args = ap.parse_args(argv)
    if not args.check:
        _bootstrap(manifest.PATCHES)
    bad = 0
    for fam in manifest.load_all(manifest.PATCHES, tuple(args.engine or manifest.ENGINES)):
        if args.family and args.family not in (fam.name, fam.id):
            continue
        locks = {derived_scope.LOCK: derived(fam)}
        if fam.scope is not None:
            locks["scope.json"] = signatures(fam)
        for name, doc in locks.items():
            text = json.dumps(doc, indent=1) + "\n"
            path = Path(fam.folder) / name
            if args.check:
                if not path.is_file() or path.read_text() != text:
                    print(f"{fam.id}: {name} differs from the wheels", file=sys.stderr)
                    bad += 1
            else:
                path.write_text(text)
                print(f"{fam.id}: {name} written ({len(fam.variants)} variants)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
