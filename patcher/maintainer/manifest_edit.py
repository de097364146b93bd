"""Text edits of a patch.toml, as a maintainer would make them, for ``patcher port``.

The manifest is edited as text (not re-serialised) so the reviewed change is the few lines
that matter: a new ``[[variant]]`` after the one it was ported from, the releases it now
covers carved out of the entries that claimed them, and the new id in the probes' ``when``.
The result is loaded with patcher.core.manifest before anyone sees it, so an edit that breaks
the manifest's rules (overlapping ranges) is an error, never a file on disk.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher.engine_specs.base import contains
from patcher.errors import ManifestError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10
    import tomli as tomllib

_HEADER = re.compile(r"^\[\[(\w+)\]\]\s*$")
_VERSIONS = re.compile(r'^versions\s*=\s*"([^"]*)"\s*$')
_ENTRIES = ("variant", "upstream", "refused")  # [[requires]] ranges are of other distributions


@dataclass
class Block:
    kind: str  # "" for the top of the file, else the [[table]] name
    lines: list[str]

    def field(self, name: str):
        return tomllib.loads("".join(self.lines[1:] if self.kind else self.lines)).get(name)


def blocks(text: str) -> list[Block]:
    out = [Block("", [])]
    for line in text.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            out.append(Block(m.group(1), []))
        out[-1].lines.append(line)
    return out


def _set_versions(block: Block, spec: str) -> None:
    for i, line in enumerate(block.lines):
        if _VERSIONS.match(line):
            block.lines[i] = f'versions = "{spec}"\n'
            return
    raise ManifestError(f"a [[{block.kind}]] table has no one-line 'versions' field", hint="port edits it as text")


def _carve(spec: str, version: str, covered: list[str]) -> str:
    """``spec`` without ``version``: capped below it when it held no later release, else excluded."""
    later = [r for r in covered if Version(r) > Version(version)]
    return f"{spec},<{version}" if not later else f"{spec},!={version}"


def _extend(spec: str, version: str) -> str:
    """``spec`` reaching up to ``version``: upper bounds (and ``==``) replaced by ``<=version``."""
    kept = []
    for s in SpecifierSet(spec):
        if s.operator in ("<", "<="):
            continue
        kept.append(f">={s.version}" if s.operator in ("==", "===") else str(s))
    return ",".join(sorted(kept) + [f"<={version}"])


def add_variant(text: str, source: str, new_id: str, version: str, releases: list[str],
                moved: dict[str, str] | None = None) -> str:
    """The manifest with ``new_id`` (a copy of ``source``'s table) declared for ``version``.

    Every entry that claimed ``version`` gives it up; the new variant covers it alone, or from
    it on when no entry claims a later release (the newest release of the line)."""
    parts = blocks(text)
    taken = False
    for b in parts[1:]:
        spec = b.field("versions") if b.kind in _ENTRIES else None
        if isinstance(spec, str) and contains(SpecifierSet(spec), Version(version)):
            covered = [r for r in releases if contains(SpecifierSet(spec), Version(r))]
            _set_versions(b, _carve(spec, version, covered))
        if isinstance(spec, str) and any(Version(r) > Version(version) and contains(SpecifierSet(spec), Version(r))
                                         for r in releases):
            taken = True
    at = next((i for i, b in enumerate(parts) if b.kind == "variant" and b.field("id") == source), None)
    if at is None:
        raise ManifestError(f"no [[variant]] with id {source!r} in the manifest")
    new = Block("variant", [ln for ln in parts[at].lines if not ln.startswith("diffs")])
    new.lines = [f'id = "{new_id}"\n' if ln.startswith("id ") or ln.startswith("id=") else ln for ln in new.lines]
    _set_versions(new, f"=={version}" if taken else f">={version}")
    if not new.lines[-1].strip() == "":
        new.lines.append("\n")
    parts.insert(at + 1, new)
    for b in list(parts[1:]):
        if b.kind != "probe":
            continue
        module = b.field("module")
        if moved and module in moved and source in (b.field("when") or []):
            if parts[-1].lines[-1].strip():
                parts[-1].lines.append("\n")
            parts.append(_moved_probe(b, module, moved[module], new_id))
            continue
        when = b.field("when")
        if isinstance(when, list) and source in when and new_id not in when:
            when.insert(when.index(source) + 1, new_id)
            set_when(b, when)
    return "".join("".join(b.lines) for b in parts)


def set_when(block: Block, when: list[str]) -> None:
    """Replace the ``when = [...]`` field, on one line or spread over several."""
    start = next(i for i, ln in enumerate(block.lines) if re.match(r"when\s*=", ln))
    end, depth = start, 0
    for end in range(start, len(block.lines)):
        depth += block.lines[end].count("[") - block.lines[end].count("]")
        if depth <= 0:
            break
    block.lines[start:end + 1] = [f"when = {json.dumps(when)}\n"]


def _moved_probe(probe: Block, old: str, new: str, new_id: str) -> Block:
    """A copy of ``probe`` for the new variant, importing the module where upstream moved the file."""
    out = Block("probe", [])
    for line in probe.lines:
        if line.startswith("id"):
            line = f'id = "{probe.field("id")}-{new_id.lower()}"\n'
        elif line.startswith("module"):
            line = f'module = "{new}"\n'
        out.lines.append(line)
    if any(re.match(r"when\s*=", ln) for ln in out.lines):
        set_when(out, [new_id])
    else:
        out.lines.insert(1, f'when = ["{new_id}"]\n')
    if out.lines[-1].strip():
        out.lines.append("\n")
    return out


def extend_variant(text: str, variant: str, version: str) -> str:
    """The manifest with ``variant``'s range reaching ``version`` (its pre-image matches there)."""
    parts = blocks(text)
    for b in parts[1:]:
        if b.kind == "variant" and b.field("id") == variant:
            _set_versions(b, _extend(b.field("versions"), version))
            return "".join("".join(b.lines) for b in parts)
    raise ManifestError(f"no [[variant]] with id {variant!r} in the manifest")


def add_release(text: str, version: str) -> str:
    """releases.txt with ``version`` in version order (comments kept at the top)."""
    lines = text.splitlines()
    head = [ln for ln in lines if ln.startswith("#") or not ln.strip()]
    known = {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}
    known.add(version)
    return "\n".join(head + sorted(known, key=Version)) + "\n"


def next_id(ids: list[str], source: str) -> str:
    """The id after every id that shares ``source``'s prefix: D4 -> D6 when D5 exists."""
    m = re.fullmatch(r"(.*?)(\d+)", source)
    if not m:
        return source + "-port"
    prefix = m.group(1)
    nums = [int(x.group(1)) for i in ids if (x := re.fullmatch(re.escape(prefix) + r"(\d+)", i))]
    return f"{prefix}{max(nums) + 1}"
