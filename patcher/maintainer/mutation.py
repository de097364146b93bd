"""Probe mutation: is every hunk of a variant caught by a probe, on a real import?

For a variant, on one release of its range (the newest in releases.txt that a CPU import
environment reaches, or the one asked for), in that release's CPU env:

* pristine: the family's probes for that variant on the published files must FAIL (a probe
  that passes before the patch proves nothing about it);
* whole: the variant applied by the real installer must pass every probe;
* one mutant per hunk: a copy of the family with that hunk left out of the variant's diff is
  applied with the real installer (``patcher apply --only <family> --patches <copy> --json``),
  the family's probes run (patcher/probes/probes.py, the one probe runner), and the outcome is

  - ``probe failed``  the missing hunk is detected by a probe (good),
  - ``apply refused`` the installer would not apply the incomplete set (good: never installed),
  - ``not detected``  every probe passed with the hunk missing (a silent gap).

A variant with a single hunk has no mutant: its one hunk counts as detected when the pristine
probes fail. Every run restores the published files (revert, then a byte comparison with the
wheel's tree). CI's full tier judges each family's ``mutation_sample`` (patch.toml) through
tests/test_mutation.py; this command judges every variant:

    python -m patcher.maintainer.mutation [--engine vllm] [--family mla-aux-capture]
        [--variant B10] [--release 0.17.1] [--hunk 3] [--json]

Exit 1 when any hunk is not detected, any pristine probe passes or a whole variant fails.

Over 300 lines: one mutant run per hunk, and its judgement, read in order (maintainer tooling).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.version import Version

from patcher.core import manifest, matrix
from patcher.core.plan import State, Status
from patcher.environment import engines
from patcher.maintainer import cpu_env, wheels
from patcher.probes import probe_child, probes

DETECTED = ("probe failed", "apply refused")
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class Row:
    family: str
    variant: str
    release: str
    hunk: str  # "diff#n path:line", or "pristine"
    outcome: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        if self.hunk == "pristine":
            return self.outcome == "probe failed"
        if self.hunk == "whole":
            return self.outcome == "probes passed"
        return self.outcome in DETECTED


# ------------------------------------------------------------------ diffs without one hunk


def split_diff(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """A unified diff as [(file header lines, [hunk lines, ...]), ...], hunks cut by their counts."""
    lines = text.splitlines(keepends=True)
    files: list[tuple[list[str], list[list[str]]]] = []
    i = 0
    while i < len(lines):
        m = _HUNK_HEADER.match(lines[i])
        if not m:
            if not files or files[-1][1]:  # a header line after hunks starts the next file
                files.append(([], []))
            files[-1][0].append(lines[i])
            i += 1
            continue
        old, new = int(m.group(1) or 1), int(m.group(2) or 1)
        hunk = [lines[i]]
        i += 1
        while (old > 0 or new > 0 or (i < len(lines) and lines[i].startswith("\\"))) and i < len(lines):
            line = lines[i]
            tag = line[:1]
            if tag == " ":
                old, new = old - 1, new - 1
            elif tag == "-":
                old -= 1
            elif tag == "+":
                new -= 1
            hunk.append(line)
            i += 1
        files[-1][1].append(hunk)
    return files


def hunk_labels(text: str, diff_name: str) -> list[str]:
    out: list[str] = []
    for header, hunks in split_diff(text):
        path = next((h[6:].strip() for h in header if h.startswith("+++ b/")), "?")
        for h in hunks:
            out.append(f"{diff_name}#{len(out) + 1} {path.split('/')[-1]}:{h[0].split()[1].lstrip('-').split(',')[0]}")
    return out


def without_hunk(text: str, index: int) -> str:
    """``text`` with its ``index``-th hunk (0-based, across files) left out; a file left with no
    hunk loses its header too."""
    out, n = [], 0
    for header, hunks in split_diff(text):
        kept = []
        for h in hunks:
            if n != index:
                kept.append(h)
            n += 1
        if kept:
            out.extend(header)
            for h in kept:
                out.extend(h)
    return "".join(out)


# ------------------------------------------------------------------ releases, probes, restore


def probed_variants(fam: manifest.Family) -> list[manifest.Variant]:
    return [v for v in fam.variants if any(v.id in p.when for p in fam.probes)]


def release_for(engine: str, variant: manifest.Variant, pick: str | None = None) -> str | None:
    """The newest covered release in the variant's range that a CPU env line reaches."""
    candidates = []
    for r in matrix.releases(engine):
        if not manifest.contains(variant.versions, Version(r)):
            continue
        try:
            cpu_env.line_for(engine, r)
        except ValueError:
            continue
        candidates.append(r)
    if pick is not None:
        return pick if pick in candidates else None
    return max(candidates, key=Version) if candidates else None


def pristine_probes(python: Path, fam: manifest.Family, tag: str) -> list[dict]:
    """The family's probes for ``tag`` on whatever files are installed, through the one runner."""
    install = engines.find(fam.engine, python=str(python))
    st = Status(fam, State.APPLIED, "probed as installed", variant=tag)
    probes.run(install, [st], timeout=cpu_env.PROBE_TIMEOUT)
    return st.probes


def site_of(python: Path) -> Path:
    return cpu_env._site_packages(python.parents[1])


def restore(python: Path, engine: str, release: str, rels: set[str]) -> None:
    """Put the published bytes of ``rels`` back (after a revert they should already be)."""
    tree, site = wheels.tree(engine, release), site_of(python)
    for rel in sorted(rels):
        if (site / rel).read_bytes() != (tree / rel).read_bytes():
            shutil.copyfile(tree / rel, site / rel)
            for pyc in (site / rel).parent.glob(f"__pycache__/{Path(rel).stem}.*.pyc"):
                pyc.unlink()


def _cli(*argv: str) -> tuple[int, list | dict]:
    """patcher as a user runs it (a process of its own: maintainer tools sit below the command line)."""
    proc = subprocess.run([sys.executable, "-m", "patcher", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, env=_patcher_env())
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        return proc.returncode, {"error": {"what": proc.stderr.strip()[:200]}}


def _patcher_env() -> dict[str, str]:
    """This checkout's patcher first on the path, whatever the current folder."""
    root = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))


def _copy_family(fam: manifest.Family, dest: Path, diff: str, text: str) -> Path:
    """patches/<engine>/<family> copied under ``dest`` with ``diff`` replaced by ``text``."""
    root = dest / "patches"
    folder = root / fam.engine / fam.name
    shutil.copytree(fam.folder, folder)
    shutil.copyfile(fam.folder.parent / "releases.txt", root / fam.engine / "releases.txt")
    if text:
        (folder / diff).write_text(text, encoding="utf-8")
    else:  # its only hunk left out: the variant without that diff (an empty diff is refused, proving nothing)
        toml = folder / "patch.toml"
        listed = rf'"{re.escape(diff)}",\s*|,\s*"{re.escape(diff)}"'
        toml.write_text(re.sub(listed, "", toml.read_text(encoding="utf-8")), encoding="utf-8")
    return root


def run_mutant(python: Path, fam: manifest.Family, diff: str, text: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="kimi-mutant-") as tmp:
        root = _copy_family(fam, Path(tmp), diff, text)
        common = ("--engine", fam.engine, "--python", str(python), "--only", fam.id, "--patches", str(root))
        code, report = _cli("apply", *common, "--json")
        try:
            if isinstance(report, dict) or code == 2:
                err = report.get("error", {}) if isinstance(report, dict) else {}
                return "apply refused", str(err.get("what", f"exit {code}"))
            (fr,) = report[0]["families"]
            if fr["state"] != "applied":
                return "apply refused", f"state {fr['state']}: {fr['detail']}"[:200]
            # A probe of a module the release does not ship is no verdict either way (as in verify).
            ran = [p for p in fr["probes"] if p["status"] != probe_child.ABSENT]
            failed = [p for p in ran if p["status"] != "passed"]
            if not ran:
                return "not detected", "no probe ran"
            if failed:
                what = "probe failed" if any(p["status"] == "failed" for p in failed) else "not detected"
                return what, "; ".join(f"{p['id']}: {p['status']}: {p['detail']}" for p in failed)[:300]
            return "probes passed", ", ".join(p["id"] for p in ran)
        finally:
            _cli("revert", *common, "--no-probes", "--json")


def score_variant(fam: manifest.Family, variant: manifest.Variant, release: str,
                  only_hunk: int | None = None, log=print, whole: bool = True) -> list[Row]:
    """Rows for the pristine run, the whole variant (unless ``whole`` is False: CI's full tier
    proves every whole variant on a real import in tests/test_probes_cpu.py already) and each mutant."""
    rows: list[Row] = []
    texts = {d: (fam.folder / d).read_text(encoding="utf-8") for d in variant.diffs}
    mutants = [(d, i, label) for d in variant.diffs for i, label in enumerate(hunk_labels(texts[d], d))]
    single = len(mutants) == 1
    rels = {fp.path for fp in fam.patches[variant.id]}
    with cpu_env.using(fam.engine, release, log=lambda *_: None) as python:
        restore(python, fam.engine, release, rels)
        try:
            if only_hunk is None or single:
                res = pristine_probes(python, fam, variant.id)
                bad = [r for r in res if r["status"] not in ("passed", probe_child.ABSENT)]
                outcome = "probe failed" if any(r["status"] == "failed" for r in bad) else "probes pass unpatched"
                rows.append(Row(fam.id, variant.id, release, "pristine", outcome,
                                "; ".join(f"{r['id']}: {r['status']}: {r['detail']}" for r in bad or res)[:300]))
                log(_fmt(rows[-1]))
                pristine_row = rows[-1]
                if whole:
                    first = variant.diffs[0]  # replaced by itself: the whole variant
                    outcome, detail = run_mutant(python, fam, first, texts[first])
                    restore(python, fam.engine, release, rels)
                    rows.append(Row(fam.id, variant.id, release, "whole", outcome, detail))
                    log(_fmt(rows[-1]))
            if single:
                (d, _, label), = mutants
                rows.append(Row(fam.id, variant.id, release, label, "probe failed" if pristine_row.ok else
                                "not detected", "single hunk: counted by the pristine run"))
                log(_fmt(rows[-1]))
                return rows
            for n, (d, i, label) in enumerate(mutants):
                if only_hunk is not None and n != only_hunk:
                    continue
                outcome, detail = run_mutant(python, fam, d, without_hunk(texts[d], i))
                if outcome == "probes passed":
                    outcome = "not detected"
                restore(python, fam.engine, release, rels)
                rows.append(Row(fam.id, variant.id, release, label, outcome, detail))
                log(_fmt(rows[-1]))
        finally:
            restore(python, fam.engine, release, rels)
    return rows


def _fmt(r: Row) -> str:
    mark = "ok  " if r.ok else "MISS"
    return f"{mark} {r.family:36} {r.variant:4} {r.release:12} {r.hunk:44} {r.outcome:22} {r.detail[:110]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.mutation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=manifest.ENGINES)
    ap.add_argument("--family", help="family name (e.g. mla-aux-capture) or id (vllm/mla-aux-capture)")
    ap.add_argument("--variant")
    ap.add_argument("--release", help="score on this release instead of the newest in range")
    ap.add_argument("--hunk", type=int, help="only this mutant (0-based across the variant's diffs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    log = (lambda *_: None) if args.json else (lambda s: print(s, flush=True))
    for fam in manifest.load_all(manifest.PATCHES, (args.engine,) if args.engine else manifest.ENGINES):
        if args.family and args.family not in (fam.id, fam.name):
            continue
        for variant in probed_variants(fam):
            if args.variant and args.variant != variant.id:
                continue
            release = release_for(fam.engine, variant, args.release)
            if release is None:
                rows.append(Row(fam.id, variant.id, "-", "-", "not detected", "no CPU env reaches its range"))
                log(_fmt(rows[-1]))
                continue
            rows.extend(score_variant(fam, variant, release, args.hunk, log))
    hunks = [r for r in rows if r.hunk not in ("pristine", "whole")]
    caught = sum(r.ok for r in hunks)
    pristine = [r for r in rows if r.hunk == "pristine"]
    if args.json:
        print(json.dumps([asdict(r) | {"ok": r.ok} for r in rows], indent=1))
    else:
        print(f"\nhunks detected: {caught} of {len(hunks)}; probes fail on pristine: "
              f"{sum(r.ok for r in pristine)} of {len(pristine)} variants; whole variants pass: "
              f"{sum(r.ok for r in rows if r.hunk == 'whole')} of {len(pristine)}")
        for r in rows:
            if not r.ok:
                print("  " + _fmt(r))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
