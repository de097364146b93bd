"""Leave the newest out: the proof that a release nobody wrote a variant for is placed by its code.

For a release R: the patch set is cut back to what was known before R (releases.txt without R and
later; every entry whose range starts at R or later removed, its id taken out of probes' ``when``
and ``mutation_sample``; each ``scope.json`` recomputed from the releases before R, so no
signature of R or later is left; ``published.json`` without the hashes of R and later), with no
other edit (issue 55: a cut that keeps what only R taught proves nothing about the next release).
Then R's published files are judged as ``verify`` judges a release no entry declares, and
``port`` runs on them; both are compared, family by family, with what ships for R:

- right: the same state; a pre-image offered for --allow-untested, or a proven port, whose
  post-image is byte for byte the shipped variant's;
- flagged: ``unknown`` (or a port that needs a person): left for review, the other families
  still apply;
- wrong: anything else (a state or a post-image that differs from what ships).

CLI: ``python -m patcher.maintainer.leave_out vllm 0.32.0 0.33.0 0.34.0`` prints the table; with
no release, every release where an entry begins (``boundaries``, read from the manifests).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from patcher.core import derived_scope, manifest, matrix, plan
from patcher.core.plan import State
from patcher.core.release_files import Files
from patcher.environment import engines
from patcher.maintainer import manifest_edit, port, scope_lock, wheels


@dataclass
class Row:
    family: str
    shipped: str  # what ships for the release: "patch E5", "upstream", "refused"
    judged: str  # what the cut patch set says of its files
    ported: str  # port's outcome on the cut patch set
    verdict: str  # "right" | "flagged" | "wrong"
    why: str = ""


def _starts_at_or_after(spec: str, version: Version) -> bool:
    """The range holds no release before ``version``: known only from ``version`` on."""
    lows = [Version(s.version) for s in SpecifierSet(spec) if s.operator in (">=", "==", "===", ">")]
    return bool(lows) and max(lows) >= version


def cut(root: Path, engine: str, version: str, dest: Path) -> Path:
    """A copy of ``root`` (a patches/ folder) holding only what was known before ``version``."""
    v = Version(version)
    shutil.copytree(root / engine, dest / engine)
    releases = dest / engine / "releases.txt"
    releases.write_text("".join(ln for ln in releases.read_text().splitlines(keepends=True)
                                if ln.startswith("#") or not ln.strip() or Version(ln.strip()) < v))
    for toml in sorted((dest / engine).glob("*/patch.toml")):
        parts = manifest_edit.blocks(toml.read_text())
        # every entry nobody knew before R: a probe's `when` may name an upstream or refused one too
        gone = {str(b.field("id")) for b in parts[1:] if b.kind in ("variant", "upstream", "refused")
                and b.field("id") is not None and _starts_at_or_after(b.field("versions"), v)}
        kept = [b for b in parts if not (b.kind in ("variant", "upstream", "refused")
                                         and _starts_at_or_after(b.field("versions"), v))]
        for b in kept:
            when = b.field("when") if b.kind == "probe" else None
            if isinstance(when, list) and gone & set(when):
                manifest_edit.set_when(b, [w for w in when if w not in gone])
        sample = kept[0].field("mutation_sample")  # a sample naming a variant nobody knew yet
        if isinstance(sample, list) and gone & set(sample):
            kept[0].lines = [f"mutation_sample = {json.dumps([v for v in sample if v not in gone])}\n"
                             if ln.startswith("mutation_sample") else ln for ln in kept[0].lines]
        toml.write_text("".join("".join(b.lines) for b in kept))
        lock = toml.parent / "scope.json"  # one entry per variant (so that it loads): recomputed below
        if lock.is_file():
            lock.write_text(json.dumps({k: v for k, v in json.loads(lock.read_text()).items() if k not in gone}))
    before = [r for r in matrix.releases(engine, dest) if Version(r) < v]
    cut_families = manifest.load_all(dest, (engine,))  # the signatures of the releases before the cut, only theirs
    derived = scope_lock.derived_all(list(cut_families), {engine: before}, _files, _derived)
    for family in cut_families:
        (Path(family.folder) / derived_scope.LOCK).write_text(json.dumps(derived[family.id], indent=1) + "\n")
        if family.scope is not None:
            lock = Path(family.folder) / "scope.json"
            lock.write_text(json.dumps(scope_lock.signatures(family, before, _files), indent=1) + "\n")
    published = dest / engine / "published.json"  # the hashes of the releases before the cut
    if published.is_file():
        published.write_text(json.dumps({r: h for r, h in json.loads(published.read_text()).items()
                                         if Version(r) < v}, indent=1, sort_keys=True) + "\n")
    return dest


@functools.cache
def _files(engine: str, version: str) -> Files:
    """A release's published files, read once per process: every cut reads the releases before it."""
    return Files(engines.find(engine, site=wheels.tree(engine, version)))


_DERIVED: dict[tuple[str, str, str, str], derived_scope.Signature] = {}


def _derived(family: manifest.Family, variant_id: str, files: Files,
             package: derived_scope.Package | None = None) -> derived_scope.Signature:
    """A variant's derived scope on a release, computed once per process: it depends only on the
    variant's diff and the release's files, and every cut before the release asks it again."""
    key = (family.engine, family.name, variant_id, str(files.install.version))
    if key not in _DERIVED:
        _DERIVED[key] = scope_lock.cached_signature(family, variant_id, files, package)
    return _DERIVED[key]


def boundaries(engine: str, root: Path = manifest.PATCHES) -> list[str]:
    """Every covered release where an entry of the engine's patch set begins (the first release
    of a variant, upstream or refused range; the first covered release is no boundary), read
    from the manifests: the releases a maintainer once met as 'new'."""
    releases = matrix.releases(engine, root)
    starts = set()
    for fam in manifest.load_all(root, (engine,)):
        for entry in fam.entries():
            first = next((r for r in releases if manifest.contains(entry.versions, Version(r))), None)
            if first is not None and first != releases[0]:
                starts.add(first)
    return sorted(starts, key=Version)


def _post_image(family: manifest.Family, variant: str, files: Files) -> dict[str, bytes] | None:
    try:
        st = plan.Status(family, State.PENDING, "", variant)
        return plan.compose([st], files)
    except Exception:  # noqa: BLE001 - a variant that does not fit has no post-image to compare
        return None


def _shipped(st: plan.Status) -> str:
    return f"patch {st.variant}" if st.state is State.PENDING else st.state.value


def cut_point(engine: str, version: str, back: int = 1, root: Path = manifest.PATCHES) -> str:
    """Where the knowledge ends when ``version`` is judged ``back`` releases on: ``version`` itself
    (leave one out), or the covered release ``back - 1`` places before it (leave two out: the
    release before it is not known either)."""
    releases = matrix.releases(engine, root)
    at = releases.index(version)
    return releases[max(at - (back - 1), 1)]


def judge(engine: str, version: str, root: Path = manifest.PATCHES, run_port: bool = True,
          back: int = 1) -> list[Row]:
    """Every family of ``version`` judged with the patch set cut at ``cut_point(version, back)``."""
    tree = wheels.tree(engine, version)
    install = engines.find(engine, site=tree)
    files = Files(install)
    shipped = {st.family.name: st for st in plan.assess(install, manifest.load_all(root, (engine,)), {})}
    rows = []
    with tempfile.TemporaryDirectory(prefix="kimi-leave-out-") as tmp:
        cut_root = cut(root, engine, cut_point(engine, version, back, root), Path(tmp) / "patches")
        fams = manifest.load_all(cut_root, (engine,))
        outcomes = {o.family: o for o in port.run(port.Request(engine, version, root=cut_root, probes=False))} \
            if run_port else {}
        for fam, st in zip(fams, plan.assess(install, fams, {})):
            want = shipped[fam.name]
            o = outcomes.get(fam.id)
            rows.append(_row(fam, st, want, o, files, shipped_family=want.family))
    return rows


def _row(fam: manifest.Family, st: plan.Status, want: plan.Status, o: port.Outcome | None, files: Files,
         shipped_family: manifest.Family) -> Row:
    shipped, judged = _shipped(want), st.state.value + (f" ({st.variant} offered)" if st.files else "")
    ported = "not run" if o is None else o.state + (f" {o.variant}" if o.variant else "")
    wanted_image = _post_image(shipped_family, want.variant or "", files) if want.state is State.PENDING else None

    def same_effect(image: dict[str, bytes] | None) -> bool:
        return image is not None and image == wanted_image

    if st.state is want.state and st.state in (State.UPSTREAM, State.REFUSED):
        verdict, why = "right", ""
    elif st.state is State.UNKNOWN and st.files and want.state is State.PENDING:
        ok = same_effect(_post_image(fam, st.variant or "", files))
        verdict, why = ("right", "") if ok else ("wrong", f"{st.variant}'s post-image differs from {want.variant}'s")
    elif st.state is State.UNKNOWN and st.files:  # --allow-untested would write it, exit 0
        verdict, why = "wrong", f"--allow-untested would write {st.variant} where {shipped} ships"
    elif st.state is State.UNKNOWN:
        verdict, why = "flagged", st.detail
    else:
        verdict, why = "wrong", f"judged {st.state.value}: {st.detail}"
    if o is not None and verdict != "wrong":
        if o.state == "proven":
            image = {rel: text.encode() for rel, text in o.files.items()}
            if want.state is not State.PENDING or not same_effect(image):
                verdict, why = "wrong", f"port's {o.variant} differs from what ships ({shipped})"
            else:  # a person would review and commit exactly what ships
                verdict, why = "right", f"port's {o.variant} has the shipped {want.variant}'s post-image"
        elif o.state == "held" and want.state is State.PENDING and not o.variant:
            verdict, why = "wrong", f"port says held ({o.detail}), {shipped} ships"
        elif o.state == "flagged" and verdict == "right" and want.state is not State.UPSTREAM:
            verdict, why = "flagged", o.detail
    return Row(fam.name, shipped, judged, ported, verdict, why)


def table(engine: str, versions: list[str], root: Path = manifest.PATCHES, run_port: bool = True,
          back: int = 1) -> str:
    lines = ["| release | family | ships | judged with the release left out | port | verdict |",
             "|---|---|---|---|---|---|"]
    for version in versions:
        for r in judge(engine, version, root, run_port, back):
            lines.append(f"| {engine} {version} | {r.family} | {r.shipped} | {r.judged} | {r.ported} | {r.verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.leave_out", description=__doc__.split("\n")[0])
    ap.add_argument("engine", choices=manifest.ENGINES)
    ap.add_argument("versions", nargs="*", help="default: every release where an entry begins (boundaries)")
    ap.add_argument("--no-port", action="store_true", help="judge only; skip port")
    ap.add_argument("--back", type=int, default=1, choices=(1, 2),
                    help="2: the release before each is left out too (judged two releases on)")
    args = ap.parse_args(argv)
    print(table(args.engine, args.versions or boundaries(args.engine), run_port=not args.no_port, back=args.back))
    return 0


if __name__ == "__main__":
    sys.exit(main())
