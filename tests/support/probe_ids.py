"""Which probes a run must report, from the manifests alone (not from the code under test)."""

from __future__ import annotations

from packaging.version import Version

from patcher.core import manifest


def expected(engine: str, version: str, patches=manifest.PATCHES) -> set[tuple[str, str]]:
    """(family id, probe id) of every probe ``apply`` runs on ``engine==version``: the default
    families' probes whose ``when`` names the variant or upstream entry the release falls in."""
    out = set()
    for fam in manifest.load_all(patches, (engine,)):
        entry = fam.classify(Version(version)) if fam.default else None
        label = getattr(entry, "id", None)  # a refused entry has none: no probes
        out |= {(fam.id, p.id) for p in fam.probes if label and label in p.when}
    return out
