"""Each hand-written ``[scope]`` string removed in turn: is the leave-out proof still never wrong?

Issue 55: hand-written scope strings may add to the rule (patcher/core/derived_scope.py), never
replace it. For every string of every ``[scope]`` (an ``all``, ``any`` or ``reads`` item), a copy
of patches/ without it (and without the block, where nothing is left to find files by) is judged
at every boundary of its engine, one and two releases on, port not run; the script prints the
wrong cells per string. tests/test_derived_scope.py removes them all at once in the full tier.

Run: ``PYTHONPATH=. python benchmarks/scope_strings.py [--part K --parts N]`` (about 55 s a string
on a warm derived-scope cache; N processes split the strings).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from patcher.core import manifest
from patcher.core.manifest import tomllib
from patcher.maintainer import leave_out

BLOCK = re.compile(r"\n\[scope\]\n(?:(?!\[).*\n)*")


def strings(root: Path) -> list[tuple[Path, str, str]]:
    out = []
    for toml in sorted(root.glob("*/*/patch.toml")):
        scope = tomllib.loads(toml.read_text()).get("scope") or {}
        out += [(toml.relative_to(root), field, s) for field in ("all", "any", "reads") for s in scope.get(field, [])]
    return out


def without(root: Path, rel: Path, field: str, s: str) -> None:
    """``root``'s family ``rel`` with ``s`` taken out of its scope's ``field`` (scope.json kept loadable:
    every cut recomputes it)."""
    toml = root / rel
    text = toml.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"{field} =") and s in ln)
    items = [i for i in json.loads(line.split("=", 1)[1].split("#")[0].strip()) if i != s]
    text = text.replace(line, f"{field} = {json.dumps(items)}", 1)
    lock = toml.parent / "scope.json"
    left = tomllib.loads(text)["scope"]
    if not left.get("all") and not left.get("any"):  # nothing left to find files by: the block goes
        text = BLOCK.sub("\n", text)
        lock.unlink(missing_ok=True)
    elif field == "reads" and lock.is_file():
        doc = json.loads(lock.read_text())
        lock.write_text(json.dumps({k: [{f: [r for r in rs if r != s] for f, rs in sig.items()} for sig in sigs]
                                    for k, sigs in doc.items()}))
    toml.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    args = ap.parse_args(argv)
    start, wrong_in_all = time.time(), 0
    cases = strings(manifest.PATCHES)[args.part::args.parts]
    for rel, field, s in cases:
        with tempfile.TemporaryDirectory(prefix="kimi-scope-strings-") as tmp:
            root = Path(tmp) / "patches"
            shutil.copytree(manifest.PATCHES, root)
            without(root, rel, field, s)
            engine = rel.parts[0]
            wrong = sum(r.verdict == "wrong" for back in (1, 2) for v in leave_out.boundaries(engine, root)
                        for r in leave_out.judge(engine, v, root, run_port=False, back=back))
        wrong_in_all += wrong
        print(f"{rel.parent} {field} {s!r}: {wrong} wrong", flush=True)
    print(f"{len(cases)} strings removed in turn: {wrong_in_all} wrong cells, {time.time() - start:.0f} s")
    return 1 if wrong_in_all else 0


if __name__ == "__main__":
    sys.exit(main())
