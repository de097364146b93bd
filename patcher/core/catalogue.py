"""``patcher list``: the catalogue we ship (families, variants, the releases each entry covers).

It describes the patch set, not an install: 'patcher verify' says what an install gets.
Upstream or refused entries split only for probes or reasons are shown as one range.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher import program
from patcher.core import manifest, selection
from patcher.core.manifest import Family

SCHEMA = "patcher.catalogue/1"  # list --json (docs/reference.md "--json schema")
_ORDER = {">=": 0, ">": 0, "==": 1, "===": 1, "~=": 1, "!=": 2, "<": 3, "<=": 3}


def show(spec: SpecifierSet) -> str:
    """A range as people read it, lower bound first ('>=0.11.1,<0.16.0'); str() sorts the
    specifiers as text and gives '<0.16.0,>=0.11.1'. Still a valid specifier string."""
    return ",".join(str(s) for s in sorted(spec, key=lambda s: (_ORDER.get(s.operator, 2), str(s)))) or "any release"


def _bounds(spec: SpecifierSet) -> tuple[str | None, str | None] | None:
    """(lower, upper) as text, or None when the range is not a plain interval."""
    lower = upper = None
    for s in spec:
        if s.operator in (">=", ">") and lower is None:
            lower = f"{s.operator}{s.version}"
        elif s.operator in ("<", "<=") and upper is None:
            upper = f"{s.operator}{s.version}"
        else:
            return None
    return lower, upper


def merged(specs: list[SpecifierSet]) -> str:
    """One range for adjacent intervals ('<0.9.2', '>=0.9.2,<0.10.1' -> '<0.10.1'), else each."""
    parts = [_bounds(s) for s in specs]
    if len(specs) > 1 and all(p is not None for p in parts):
        chain = sorted(parts, key=lambda p: Version(p[0].lstrip(">=")) if p[0] else Version("0"))  # type: ignore[index]
        if all(a[1] is not None and b[0] is not None and a[1].lstrip("<") == b[0].lstrip(">=")  # type: ignore[index]
               and a[1].startswith("<") and not a[1].startswith("<=") and b[0].startswith(">=")  # type: ignore[index]
               for a, b in zip(chain, chain[1:])):
            ends = [e for e in (chain[0][0], chain[-1][1]) if e]  # type: ignore[index]
            return ",".join(ends) or "any release"
    return " or ".join(show(s) for s in specs)


def _groups(entries: list[Any], key) -> list[tuple[Any, list[SpecifierSet]]]:
    out: dict[Any, list[SpecifierSet]] = {}
    for e in entries:
        out.setdefault(key(e), []).append(e.versions)
    return list(out.items())


def _start(*specs: SpecifierSet) -> Version:
    """Where a range starts, to list entries in release order: ids are names, not an order
    (v12 was added after v4, for older releases)."""
    lows = [Version(s.version) for spec in specs for s in spec if s.operator in (">=", ">", "==", "===")]
    return min(lows, default=Version("0"))


def rows(fams: list[Family]) -> list[dict[str, Any]]:
    return [{"id": f.id, "title": f.title, "default": f.default,
             "variants": {v.id: show(v.versions) for v in f.variants},
             "upstream": [{"versions": show(u.versions), "since": u.since, "id": u.id, "covers": u.covers}
                          for u in f.upstream],
             "refused": [{"versions": show(r.versions), "use": r.use} for r in f.refused]} for f in fams]


def lines(fams: list[Family]) -> list[str]:
    """Each family's entries as one timeline, oldest releases first (variants, upstream and
    refused ranges interleaved where they alternate)."""
    out = [f"the catalogue (what an install gets: '{program.command('verify')}'), each family's entries by release, "
           "oldest first"]
    for f in fams:
        out.append(f"{f.id}: {f.title}" + ("" if f.default else " (opt-in)"))
        entries = [(_start(v.versions), f"  variant {v.id}: {show(v.versions)}") for v in f.variants]
        for (since, covers), specs in _groups(list(f.upstream), lambda u: (u.since, u.covers)):
            entries.append((_start(*specs), f"  upstream since {since}: {merged(specs)}"
                            + (f" ({covers})" if covers else "")))
        for use, specs in _groups(list(f.refused), lambda r: r.use):
            entries.append((_start(*specs), f"  refused {merged(specs)} (use {use})"))
        out.extend(text for _, text in sorted(entries, key=lambda e: e[0]))
    return out


def families(engine: str, only: tuple[str, ...], skip: tuple[str, ...], patches: Path) -> list[Family]:
    """The families --engine / --only / --skip select, opt-in ones included."""
    return [f for e in selection.scope(engine, only, skip, patches)
            for f in selection.families(e, only, skip, patches, every_family=True)]


def identity(patches: Path = manifest.PATCHES) -> dict[str, Any]:
    """Which patch set this is, for --version and bug reports: the families and variants it
    declares, and a hash of every file under patches/ (path and bytes), so two installs that
    say the same ran the same diffs, manifests and probes."""
    fams = manifest.load_all(patches, manifest.ENGINES)  # ENGINES read at call time (tests swap it)
    digest = hashlib.sha256()
    for path in sorted(p for p in patches.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(patches).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"families": len(fams), "variants": sum(len(f.variants) for f in fams), "sha256": digest.hexdigest()[:12]}


def identity_line(patches: Path = manifest.PATCHES) -> str:
    ident = identity(patches)
    return f"patch set: {ident['families']} families, {ident['variants']} variants, sha256 {ident['sha256']}"
