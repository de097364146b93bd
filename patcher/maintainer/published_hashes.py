"""Write ``patches/<engine>/published.json``: each covered release's RECORD hash of every file a
variant of the patch set writes, read from the published wheels.

An editable checkout (SGLang's own Docker images: ``pip install -e "python[all]"``; a vLLM built
from source) has no RECORD of its files, so nothing on the machine says what the release
published. This table, shipped with the patch set, does, for the files we write: ``apply`` proves
them pristine against it, ``revert`` puts them back to it, and a file that is neither its hash nor
ours is a conflict that changes nothing. ``tests/test_editable.py`` checks it against the wheels.

    python -m patcher.maintainer.published_hashes [--check]
"""

from __future__ import annotations

import argparse
import json
import sys

from patcher.core import manifest, matrix
from patcher.environment import engines
from patcher.maintainer import wheels


def table(engine: str) -> dict[str, dict[str, str]]:
    """{release: {file: its RECORD hash}} for every file a variant of ``engine`` writes."""
    written = sorted({fp.path for fam in manifest.load_all(manifest.PATCHES, (engine,)) for v in fam.variants
                      for fp in fam.patches[v.id]})
    out = {}
    for version in matrix.releases(engine):
        record = engines.find(engine, site=wheels.tree(engine, version)).record
        out[version] = {rel: record[rel] for rel in written if rel in record}
    return out


def text(engine: str) -> str:
    return json.dumps(table(engine), indent=0, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.published_hashes",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the wheels, write nothing")
    args = ap.parse_args(argv)
    bad = 0
    for engine in manifest.ENGINES:
        path = manifest.PATCHES / engine / "published.json"
        new = text(engine)
        if args.check:
            if not path.is_file() or path.read_text() != new:
                print(f"{path}: differs from the published wheels", file=sys.stderr)
                bad += 1
        else:
            path.write_text(new)
            print(f"{path}: {len(json.loads(new))} releases")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
