"""``patcher port`` behind the CLI: runs the port per release and renders the outcomes.

Imported only when the ``port`` command runs, so apply / verify / revert never load the
merge library or the wheel fetcher. Returns text for patcher/cli/main.py to print.
"""

from __future__ import annotations

import argparse
import json

from patcher.core import matrix
from patcher.errors import PatcherError
from patcher.maintainer.port import Outcome, Request
from patcher.maintainer.port import run as port


def run(args: argparse.Namespace) -> tuple[int, str]:
    if bool(args.to) == bool(args.newer):
        raise PatcherError("port needs one release", wanted="--to VERSION or --newer",
                           found="both" if args.to else "neither")
    versions = [args.to] if args.to else matrix.newer(args.engine, args.patches)
    results: list[tuple[str, list[Outcome]]] = []
    for version in versions:
        req = Request(args.engine, version, tuple(args.family), args.source, args.out, args.patches,
                      probes=not args.no_probes)
        results.append((version, port(req)))
    code = max((o.exit for _, outs in results for o in outs), default=0)
    if args.json:
        return code, json.dumps([{"engine": args.engine, "version": v, "families": [as_dict(o) for o in outs]}
                                 for v, outs in results], indent=1)
    lines = [] if versions else [f"no {args.engine} release on the index is missing from releases.txt"]
    for version, outs in results:
        for o in outs:
            lines += as_lines(args.engine, version, o)
    return code, "\n".join(lines)


def as_dict(o: Outcome) -> dict:
    return {"id": o.family, "state": o.state, "detail": o.detail, "from": o.source, "base": o.base,
            "variant": o.variant, "versions_md": o.versions_md, "notes": o.notes, "report": o.report,
            "proofs": o.proofs, "diff": o.diff, "exit": o.exit}


def as_lines(engine: str, version: str, o: Outcome) -> list[str]:
    out = [f"{o.family} on {engine} {version}: {o.state}: {o.detail}"]
    out += [f"  merge: {n}" for n in o.notes]
    out += [f"  proof: {p}" for p in o.proofs]
    if o.versions_md:
        out.append(f"  VERSIONS.md will say: {o.versions_md}")
    if o.report:
        out.append("  needs a person:")
        out += [f"    {ln}" for ln in o.report]
    return out
