"""A family's scope in a release: where its behaviour lives, read from the release's files.

A variant's hunks can still match a release that changed what the family is about outside
them: a new EAGLE-3 drafter class the family must also guard, an auto-enable that now reaches
the gate we widen, a switch the release now reads and our variant refuses (issue 41). So each
family with a ``[scope]`` (patches/README.md) names, by what the code says, the files that do
what it fixes, and the strings whose presence there is part of its behaviour; each variant
records that signature as found on the published files of every release it declares
(``scope.json``). On a release no entry declares, a variant matched by its hunks counts only
when the release's signature is the one recorded for it: anything else is a place in scope no
variant was proven on, and the family is ``unknown``, left for a person.
"""

from __future__ import annotations

from patcher.core.manifest import Family, Scope
from patcher.core.release_files import Files

Signature = dict[str, tuple[str, ...]]


def signature(scope: Scope, files: Files) -> Signature:
    """{file: the ``reads`` strings it holds} for every RECORD file in scope, as the files are now."""
    out: Signature = {}
    for rel in sorted(files.install.record):
        if not rel.endswith(".py") or not any(rel == u or rel.startswith(u.rstrip("/") + "/") for u in scope.under):
            continue
        text = files.text(rel)
        if text is None or not all(s in text for s in scope.all):
            continue
        if scope.any and not any(s in text for s in scope.any):
            continue
        out[rel] = tuple(r for r in scope.reads if r in text)
    return out


def moved(family: Family, variant_id: str, files: Files) -> str | None:
    """How the release's scope differs from every release ``variant_id`` was proven on (the
    nearest of them, in words); None: one of them (or the family states no scope)."""
    scope = family.scope
    if scope is None:
        return None
    found = signature(scope, files)
    proven = scope.signatures.get(variant_id, ())
    if found in proven:
        return None
    said = min((_differences(want, found) for want in proven), key=len, default=["no release was read"])
    return f"{'; '.join(said)} ({scope.what})"


def _differences(want: Signature, found: Signature) -> list[str]:
    said = [f"{rel} is new in scope" for rel in sorted(set(found) - set(want))]
    said += [f"{rel} left the scope" for rel in sorted(set(want) - set(found))]
    for rel in sorted(set(want) & set(found)):
        new, gone = set(found[rel]) - set(want[rel]), set(want[rel]) - set(found[rel])
        if new:
            said.append(f"{rel} now holds {', '.join(sorted(new))}")
        if gone:
            said.append(f"{rel} no longer holds {', '.join(sorted(gone))}")
    return said
