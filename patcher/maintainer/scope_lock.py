"""Write each family's scope locks from the published wheels: ``derived-scope.json``, the scope
derived from each variant's hunks (``patcher.core.derived_scope``), for every family, and
``scope.json``, the signature of a hand-written ``[scope]`` (``patcher.core.scope``), on the files
of every covered release each variant declares.

Each variant keeps the distinct signatures of the releases it was proven on (a new reader in the
middle of a range that the variant already handles, e.g. vLLM 0.34.0's, is one more proven
signature). ``tests/test_scope.py`` checks the written files against the wheels.

    python -m patcher.maintainer.scope_lock [--engine E] [--family NAME] [--check] [--site DIR]

``--site DIR``: the release installed there instead of the published wheels (an engine whose
releases are not on the index, as the tests' toy engines).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version

from patcher.core import derived_scope, manifest, matrix, scope
from patcher.core.manifest import Family, Scope, Variant, tomllib
from patcher.core.release_files import Files
from patcher.environment import engines
from patcher.maintainer import wheels


def signatures(family: Family, releases: list[str] | None = None,
               files_of: Callable[[str, str], Files] | None = None,
               signature_of: Callable[[Scope, Files], scope.Signature] | None = None) -> dict[str, list[dict]]:
    """{variant id: the distinct signatures of the covered releases it declares, oldest first}.
    ``files_of(engine, version)``: the release's files (a reader that keeps them, for many calls);
    ``signature_of(scope, files)``: default, the one recorded per input (``cached_hand_signature``)."""
    assert family.scope is not None
    out: dict[str, list[dict]] = {v.id: [] for v in family.variants}
    for version in releases if releases is not None else matrix.releases(family.engine):
        entry = family.classify(Version(version))
        if not isinstance(entry, Variant):
            continue
        files = (files_of(family.engine, version) if files_of is not None else
                 Files(engines.find(family.engine, site=wheels.tree(family.engine, version))))
        sig = {rel: list(toks) for rel, toks in (signature_of or cached_hand_signature)(family.scope, files).items()}
        if sig not in out[entry.id]:
            out[entry.id].append(sig)
    return out


# A signature is a pure function of what it looks for (a variant's diff; a hand-written [scope]), the
# release's published files (named by their RECORD, every file's hash) and the code that reads them:
# recorded under all three, it is read again, not recomputed, until one of them changes (issue 57).
# tests/test_derived_scope.py and tests/test_scope.py prove each key and compare a recorded answer
# with a fresh one.
DERIVED_CACHE = wheels.CACHE / "derived"
HAND_CACHE = wheels.CACHE / "scope"
_CODE = ("core/derived_scope.py", "core/hunks.py", "core/release_files.py")
_HAND_CODE = ("core/scope.py", "core/release_files.py")


@functools.cache
def code_digest(rels: tuple[str, ...] = _CODE) -> str:
    root = Path(derived_scope.__file__).resolve().parents[1]
    return hashlib.sha256(b"".join((root / rel).read_bytes() for rel in rels)).hexdigest()


def _release_key(sought: str, files: Files, code: str) -> str | None:
    """The key of a signature of ``sought`` on a release; None: the release has no RECORD to name its
    files by."""
    record = files.install.dist_info / "RECORD"
    try:
        named = record.read_bytes()
    except OSError:
        return None
    parts = (code, sought, files.install.engine, str(files.install.version), hashlib.sha256(named).hexdigest())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def derived_key(patches: tuple, files: Files, code: str | None = None) -> str | None:
    return _release_key(repr(patches), files, code or code_digest())


def hand_key(hand: Scope, files: Files, code: str | None = None) -> str | None:
    sought = json.dumps([hand.under, hand.all, hand.any, hand.reads])  # what it looks for, not what it found
    return _release_key(sought, files, code or code_digest(_HAND_CODE))


def _kept(key: str | None, cache: Path, compute: Callable[[], dict[str, tuple[str, ...]]]) -> dict:
    """The signature recorded under ``key`` in ``cache``, else ``compute()``'s, recorded there."""
    path = cache / f"{key}.json"
    if key is not None and path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) and all(isinstance(k, str) and isinstance(v, list) and
                                             all(isinstance(t, str) for t in v) for k, v in doc.items()):
                return {rel: tuple(toks) for rel, toks in doc.items()}
        except (OSError, UnicodeDecodeError, ValueError):
            pass  # unreadable: computed again and rewritten
    sig = compute()
    if key is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({rel: list(t) for rel, t in sig.items()}))
        os.replace(tmp, path)  # whole or absent: a reader in another worker never sees half of it
    return sig


def cached_signature(family: Family, variant_id: str, files: Files, package: derived_scope.Package | None = None,
                     cache: Path | None = None, code: str | None = None) -> derived_scope.Signature:
    """``derived_scope.signature``, recorded per input (``derived_key``) under ``cache``."""
    return _kept(derived_key(family.patches[variant_id], files, code), cache or DERIVED_CACHE,
                 lambda: derived_scope.signature(family, variant_id, files, package))


def cached_hand_signature(hand: Scope, files: Files, cache: Path | None = None,
                          code: str | None = None) -> scope.Signature:
    """``scope.signature`` of a hand-written [scope], recorded per input (``hand_key``) under ``cache``:
    it reads every file under the scope's folders (about 1,000 per vLLM release), and a cut before a
    release asks it of every release before (tests/test_new_release.py)."""
    return _kept(hand_key(hand, files, code), cache or HAND_CACHE, lambda: scope.signature(hand, files))


def derived_all(families: list[Family], releases: dict[str, list[str]] | None = None,
                files_of: Callable[[str, str], Files] | None = None,
                signature_of: Callable[..., derived_scope.Signature] = derived_scope.signature,
                ) -> dict[str, dict[str, list[dict]]]:
    """{family id: {variant id: the distinct derived-scope signatures (``derived_scope``) of the
    covered releases it declares, oldest first}}, release by release: each release's files are
    read once for all the families (``derived_scope.Package``). ``releases``: per engine (default:
    releases.txt); ``signature_of(family, variant, files, package)``: a reader that keeps
    signatures, for many calls (leave_out)."""
    out: dict[str, dict[str, list[dict]]] = {f.id: {v.id: [] for v in f.variants} for f in families}
    for engine in sorted({f.engine for f in families}):
        fams = [f for f in families if f.engine == engine]
        versions = releases.get(engine, []) if releases is not None else matrix.releases(engine)
        for version in versions:
            todo = [(f, e) for f in fams if isinstance(e := f.classify(Version(version)), Variant)]
            if not todo:
                continue
            files = files_of(engine, version) if files_of is not None else \
                Files(engines.find(engine, site=wheels.tree(engine, version)))
            package = derived_scope.Package(files)
            for fam, entry in todo:
                sig = {rel: list(toks) for rel, toks in signature_of(fam, entry.id, files, package).items()}
                if sig not in out[fam.id][entry.id]:
                    out[fam.id][entry.id].append(sig)
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
    ap.add_argument("--fresh", action="store_true",
                    help="compute every signature anew, not from $KIMI_PATCHER_CACHE/derived and /scope "
                         "(with --check under another Python: the lock reads alike there)")
    ap.add_argument("--site", type=Path, metavar="DIR",
                    help="read the release installed in this site-packages, not the published wheels")
    args = ap.parse_args(argv)
    releases, files_of = None, None
    if args.site is not None:  # one release: the one installed there, read once
        found = {e: engines.find(e, site=args.site) for e in (args.engine or manifest.ENGINES)
                 if engines.find_first([e], site=args.site)[0] is not None}
        releases = {e: [str(i.version)] for e, i in found.items()}
        read = {e: Files(i) for e, i in found.items()}
        files_of = lambda engine, version: read[engine]  # noqa: E731
    if not args.check:
        _bootstrap(manifest.PATCHES)
    bad = 0
    fams = [f for f in manifest.load_all(manifest.PATCHES, tuple(args.engine or manifest.ENGINES))
            if not args.family or args.family in (f.name, f.id)]
    fams = [f for f in fams if releases is None or f.engine in releases]
    all_derived = derived_all(fams, releases, files_of,
                              signature_of=derived_scope.signature if args.fresh else cached_signature)
    for fam in fams:
        locks = {derived_scope.LOCK: all_derived[fam.id]}
        if fam.scope is not None:
            locks["scope.json"] = signatures(fam, releases[fam.engine] if releases else None, files_of,
                                             signature_of=scope.signature if args.fresh else None)
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
