"""Leave-one-out scoring of ``patcher port`` on our own history (issue 14).

For every consecutive pair of shipped variants (X, Y) of every family: pretend Y does not
exist, port X to the first release of Y's range (``--from X``), and classify:

- identical: the candidate's post-image is byte for byte the shipped Y's on that release;
- equivalent: different bytes, every proof passed, and Y's own probes (its intent) pass on
  the candidate too;
- flagged: port stopped with exit 1 and a report;
- wrong: port offered it as good (exit 0) but Y touches files the candidate does not, or Y's
  probes fail on the candidate.

Run: ``PYTHONPATH=. python benchmarks/port_history.py [--no-probes] [--engine E] [--family F]``.
Slow (one CPU-env probe run per pair, 10-60 s each): run it in the background.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patcher.core import hunks, manifest, matrix  # noqa: E402
from patcher.maintainer import port, port_proof, wheels  # noqa: E402


def pairs(engine: str, only: str | None):
    for fam in manifest.load_all(manifest.PATCHES, (engine,)):
        if only and fam.name != only:
            continue
        for x, y in zip(fam.variants, fam.variants[1:]):
            to = next((r for r in matrix.releases(engine) if manifest.contains(y.versions, Version(r))), None)
            if to:
                yield fam, x, y, to


def shipped_post_image(fam, y, to: str) -> dict[str, str]:
    tree = wheels.tree(fam.engine, to)
    return {fp.path: hunks.join(hunks.apply(hunks.split((tree / fp.path).read_text()), fp.hunks))
            for fp in fam.patches[y.id]}


def intent_holds(fam, y, o: port.Outcome, to: str, probes: bool) -> str:
    """'' when Y's probes pass on the candidate's files, else why not."""
    if not probes:
        return ""
    with tempfile.TemporaryDirectory(prefix="kimi-port-intent-") as tmp:
        root = Path(tmp)
        shutil.copytree(manifest.PATCHES / fam.engine, root / fam.engine)
        folder = root / fam.engine / fam.name
        (folder / f"{y.id}.diff").write_text(o.diff)  # the candidate, under Y's id: Y's probes select it
        ok, seen = port_proof.run(fam.engine, to, fam.id, root, manifest.PATCHES, wheels.tree(fam.engine, to),
                             set(o.files), probes_too=True)
        return "" if ok else seen[-1]


def classify(fam, x, y, to: str, probes: bool) -> tuple[str, str, port.Outcome]:
    req = port.Request(fam.engine, to, (fam.name,), x.id, probes=probes)
    (o,) = port.run(req)
    if o.exit != 0:
        return "flagged", (o.report or [o.detail])[0], o
    want = shipped_post_image(fam, y, to)
    missing = sorted(set(want) - set(o.files))
    if missing:
        return "wrong", f"{y.id} also patches {', '.join(missing)}", o
    if all(o.files.get(p) == t for p, t in want.items()):
        return "identical", "", o
    why = intent_holds(fam, y, o, to, probes)
    return ("wrong", f"{y.id}'s probes: {why}", o) if why else ("equivalent", "", o)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=manifest.ENGINES, action="append")
    ap.add_argument("--family")
    ap.add_argument("--no-probes", action="store_true")
    args = ap.parse_args(argv)
    rows, counts = [], {"identical": 0, "equivalent": 0, "flagged": 0, "wrong": 0}
    for engine in args.engine or manifest.ENGINES:
        for fam, x, y, to in pairs(engine, args.family):
            t0 = time.monotonic()
            kind, why, o = classify(fam, x, y, to, not args.no_probes)
            counts[kind] += 1
            rows.append(f"| {fam.id} | {x.id} -> {y.id} | {o.base} -> {to} | {kind} | {time.monotonic() - t0:.0f} s | "
                        f"{why.replace('|', '/')[:160]} |")
            print(rows[-1], flush=True)
    print("\n| family | pair | releases | result | time | why |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n{len(rows)} pairs: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
