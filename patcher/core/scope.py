"""A family's scope in a release: where its behaviour lives, read from the release's files.

Two readings, and a release must match on both: the scope derived from each variant's hunks by a
rule (``derived_scope``, every family), and the hand-written ``[scope]`` below, which may add
strings a reader knows to matter and never replaces the rule.

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

from patcher.core import derived_scope, hunks
from patcher.core.derived_scope import differences
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


def moved(family: Family, variant_id: str, files: Files,
          carried: tuple[hunks.FilePatch, ...] | None = None) -> str | None:
    """How the release's scope differs from every release ``variant_id`` was proven on (the
    nearest of them, in words): the scope derived from the variant's own hunks
    (``derived_scope``), and the family's hand-written ``[scope]`` where it has one, which adds to
    the rule and never replaces it; None: both are as on one of those releases. ``carried``: port's
    new variant carried from ``variant_id``, whose hunks fit these files where the source's may not."""
    said = []
    derived = derived_scope.moved(family, variant_id, files, carried)
    if derived is not None:
        said.append(f"{'; '.join(derived)} (what variant {variant_id}'s hunks touch, read, or copy)")
    hand = family.scope
    if hand is not None:
        found = signature(hand, files)
        proven = hand.signatures.get(variant_id, ())
        if found not in proven:
            diff = min((differences(want, found) for want in proven), key=len, default=["no release was read"])
            said.append(f"{'; '.join(diff)} ({hand.what})")
    return "; ".join(said) or None
