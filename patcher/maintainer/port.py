"""``patcher port``: carry every family to a release no variant covers, and prove the result.

For each family: an entry that already holds by content (upstream evidence, a variant's exact
pre-image, refused evidence) is reported and stops there. Otherwise the nearest variant is
carried by a three-way merge (patcher/maintainer/merge.py): base = the pristine file of the
newest release that variant covers, ours = base with the variant, theirs = the new release's
pristine file. The candidate is proven as the release harness proves a shipped variant
(patcher/maintainer/port_proof.py) on a scratch copy of the patch set; only a proven candidate is
offered. ``out`` receives ``<family>/<id>.diff``, ``<family>/patch.toml`` and ``releases.txt``
as they would be committed. Exit: 0 every family proven or held, 1 a person is needed (the
outcome says which lines upstream changed and what the merge could not decide), 2 usage.

Over 300 lines: one porting run, from the new release's files to proven candidates, read in order
(maintainer tooling).
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from patcher.core import derived_scope, hunks, manifest, matrix, scope
from patcher.core.manifest import Family, Upstream, Variant, contains
from patcher.core.plan import State, undeclared
from patcher.core.release_files import Files, evidence_fails
from patcher.environment import engines
from patcher.errors import PatcherError
from patcher.maintainer import manifest_edit, merge, new_upstream_code, port_proof, wheels


@dataclass
class Outcome:
    family: str
    state: str  # "held" | "proven" | "flagged"
    detail: str
    source: str | None = None  # the variant carried
    base: str | None = None  # the release it was written for
    variant: str | None = None  # the new variant's id (or the extended one)
    diff: str = ""
    manifest: str = ""  # the family's new patch.toml
    versions_md: str = ""  # what VERSIONS.md will say for the release
    notes: list[str] = field(default_factory=list)  # decisions beyond a clean merge
    report: list[str] = field(default_factory=list)  # for a person: what upstream changed, per hunk
    proofs: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # merged post-image per target file
    moved: dict[str, str] = field(default_factory=dict)  # target files upstream moved: old -> new path
    scope_json: str = ""  # the family's scope.json with the new variant's signature (families with a scope)
    derived_json: str = ""  # the family's derived-scope.json with the new variant's derived signature

    @property
    def exit(self) -> int:
        return 0 if self.state in ("held", "proven") else 1


@dataclass
class Request:
    engine: str
    version: str
    families: tuple[str, ...] = ()
    source: str | None = None
    out: Path | None = None
    root: Path = manifest.PATCHES
    site: Path | None = None  # the release's files; default: its published wheel
    env_release: str | None = None  # published release whose CPU env hosts a release not on the index
    probes: bool = True


def _tree(engine: str, version: str) -> Path:
    try:
        return wheels.tree(engine, version)
    except (subprocess.CalledProcessError, ValueError) as exc:
        raise PatcherError(f"could not fetch {engine}=={version} from the package index",
                           wanted="a published release", found=str(exc)[:200],
                           hint="check the version ('pip index versions " + engine + "')") from None


def _select(req: Request) -> list[Family]:
    every = manifest.load_all(req.root, (req.engine,))
    names = {f.name: f for f in every} | {f.id: f for f in every}
    unknown = [n for n in req.families if n not in names]
    if unknown:
        raise PatcherError(f"no {req.engine} family {unknown[0]!r}", wanted=f"one of {sorted(f.name for f in every)}")
    chosen = [names[n] for n in req.families] if req.families else list(every)
    if req.source is not None:
        if len(chosen) != 1:
            raise PatcherError("--from names one variant of one family", wanted="exactly one --family with --from",
                               found=f"{len(chosen)} families")
        if req.source not in {v.id for v in chosen[0].variants}:
            raise PatcherError(f"{chosen[0].id} has no variant {req.source!r}",
                               wanted=f"one of {[v.id for v in chosen[0].variants]}")
    return chosen


def _held(family: Family, files: Files, version: str, releases: list[str]) -> Outcome | None:
    """What the release is by content, as ``patcher verify`` judges a release no entry declares
    (plan.undeclared): the entry of the newest covered release first, never the first that fits.
    None: nothing holds, and the variant of the newest release is carried by a merge."""
    st = undeclared(family, files, Version(version))
    line = family.classify(family.newest) if family.newest is not None else None
    if st.state is State.UPSTREAM:
        return Outcome(family.id, "held", f"{st.detail.split(';')[0]}: its evidence holds")
    if st.state is State.REFUSED:
        return Outcome(family.id, "held", f"refused: {st.detail} (its evidence holds)")
    if st.state is State.UNKNOWN and st.files and st.variant is not None:
        text = (family.folder / "patch.toml").read_text()
        if not isinstance(line, Variant) or st.variant != line.id:
            # an older variant's pre-image is back: extending its range would overlap the newer ones
            return Outcome(family.id, "flagged", f"{st.detail}; a person decides (extending {st.variant} would "
                           "overlap the ranges after it)")
        if contains(line.versions, Version(version)):
            return Outcome(family.id, "held", f"variant {line.id} covers it and its pre-image matches byte for byte",
                           variant=line.id, manifest=text, versions_md=f"patch {line.id}")
        return Outcome(family.id, "held", f"variant {line.id}'s pre-image matches byte for byte: its range grows",
                       variant=line.id, manifest=manifest_edit.extend_variant(text, line.id, version),
                       versions_md=f"patch {line.id}")
    if isinstance(line, Upstream):
        # Fixed upstream on the newest release we cover, and its evidence no longer reads the new
        # files: code moved. A diff from a variant older than the fix would undo or duplicate it.
        failed = evidence_fails(files, line)
        return Outcome(family.id, "flagged", f"fixed upstream since {line.since} on {family.newest}, but its "
                       f"evidence does not hold on {version} ({failed}); no diff is derived from a variant older "
                       "than the upstream fix: a person writes the evidence for the new code")
    if st.state is State.UNKNOWN and "flagged for review" in st.detail:
        return Outcome(family.id, "flagged", st.detail)
    return None


def _nearest(family: Family, version: str, releases: list[str]) -> Variant:
    """The variant covering the newest release before ``version`` (else the oldest variant)."""
    before = sorted((r for r in releases if Version(r) < Version(version)), key=Version, reverse=True)
    for r in before:
        for v in family.variants:
            if contains(v.versions, Version(r)):
                return v
    return family.variants[0]


def _base_release(variant: Variant, version: str, releases: list[str]) -> str:
    mine = [r for r in releases if contains(variant.versions, Version(r)) and Version(r) != Version(version)]
    if not mine:
        raise PatcherError(f"variant {variant.id} covers no release in releases.txt", found=str(variant.versions))
    below = [r for r in mine if Version(r) < Version(version)]
    return max(below or mine, key=Version)


def _where_now(tree: Path, engine: str, hunk: hunks.Hunk) -> list[str]:
    """Files of the new release that hold the first line our hunk changes (code that moved)."""
    probe = next((ln.strip() for ln in hunk.old if ln.strip() and ln not in hunk.new), None)
    probe = probe or next((ln.strip() for ln in hunk.old if len(ln.strip()) > 12), None)
    if not probe:
        return []
    return sorted(p.relative_to(tree).as_posix() for p in (tree / engine).rglob("*.py")
                  if probe in p.read_text(errors="replace"))[:3]


def _derive(family: Family, source: Variant, base: str, base_tree: Path, tree: Path, out: Outcome
            ) -> dict[str, tuple[str, str]]:
    """(theirs, merged) per target file, or {} with ``out.report`` saying why."""
    result: dict[str, tuple[str, str]] = {}
    for fp in family.patches[source.id]:
        old = (base_tree / fp.path).read_text()
        ours = hunks.join(hunks.apply(hunks.split(old), fp.hunks))
        if not (tree / fp.path).is_file():
            moved = sorted({f for h in fp.hunks for f in _where_now(tree, family.engine, h)})
            fits = [m for m in moved if _fits(tree / m, fp)]
            if len(fits) == 1:  # git's rename detection, with our strict hunks as the similarity test
                theirs = (tree / fits[0]).read_text()
                result[fits[0]] = (theirs, hunks.join(hunks.apply(hunks.split(theirs), fp.hunks)))
                out.moved[fp.path] = fits[0]
                out.notes.append(f"{fp.path} moved to {fits[0]}: our hunks apply there as they are (no fuzz)")
                continue
            out.report.append(f"{fp.path}: gone in the new release" +
                              (f"; the code our hunks change is now in {', '.join(moved)}" if moved else ""))
            continue
        theirs = (tree / fp.path).read_text()
        m = merge.merge_file(fp.path, old, ours, theirs)
        out.notes += m.notes
        for c in m.conflicts:
            out.report.append(f"{fp.path}:{c.line} (line of {base}): upstream and {source.id} both changed "
                              "these lines, and the merge cannot decide")
            out.report += [f"    {base}: {ln.rstrip()}" for ln in c.base[:12]]
            out.report += [f"    {source.id}:   {ln.rstrip()}" for ln in c.ours[:12]]
            out.report += [f"    new:    {ln.rstrip()}" for ln in c.theirs[:12]]
        if m.text is not None:
            if m.text == theirs:
                out.report.append(f"{fp.path}: the merge leaves the new release's file unchanged "
                                  "(upstream may hold the change in another form)")
            result[fp.path] = (theirs, m.text)
    return {} if out.report else result


def _fits(path: Path, fp: hunks.FilePatch) -> bool:
    try:
        hunks.apply(hunks.split(path.read_text()), fp.hunks)
    except PatcherError:
        return False
    return True


def _diff(files: dict[str, tuple[str, str]]) -> str:
    chunks: list[str] = []
    for path in sorted(files):
        theirs, merged = files[path]
        chunks += difflib.unified_diff(theirs.splitlines(keepends=True), merged.splitlines(keepends=True),
                                       f"a/{path}", f"b/{path}", n=3)
    return "".join(chunks)


def _scratch_patches(root: Path, engine: str, family: Family, toml: str, diff_name: str, diff: str,
                     releases_txt: str, dest: Path) -> Path:
    shutil.copytree(root / engine, dest / engine)
    folder = dest / engine / family.name
    (folder / "patch.toml").write_text(toml)
    (folder / diff_name).write_text(diff)
    (dest / engine / "releases.txt").write_text(releases_txt)
    return dest


def _modules(moved: dict[str, str]) -> dict[str, str]:
    """Probe modules to follow a moved file: old dotted name -> new."""
    def name(path: str) -> str:
        return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return {name(a): name(b) for a, b in moved.items()}


def port_family(req: Request, family: Family, tree: Path, files: Files) -> Outcome:
    releases = matrix.releases(req.engine, req.root)
    if req.source is None:
        held = _held(family, files, req.version, releases)
        if held is not None:
            return held
        if not family.variants:
            return Outcome(family.id, "flagged", "no variant to carry and no entry holds by content")
    source = next(v for v in family.variants if v.id == req.source) if req.source else \
        _nearest(family, req.version, releases)
    base = _base_release(source, req.version, releases)
    out = Outcome(family.id, "flagged", "", source=source.id, base=base)
    base_tree = _tree(family.engine, base)
    derived = _derive(family, source, base, base_tree, tree, out)
    if not derived:
        out.detail = f"{source.id} (written for {base}) does not carry to {req.version}; a person decides"
        return out
    out.files = {p: merged for p, (_, merged) in derived.items()}
    out.variant = manifest_edit.next_id([v.id for v in family.variants], source.id)
    try:
        return _candidate(req, family, source, base, base_tree, tree, derived, releases, out)
    except PatcherError as exc:  # a diff or manifest our own rules reject is a finding, not a crash
        out.detail = f"{out.variant} carried from {source.id} (written for {base}) breaks a rule: {exc.what}"
        out.report.append(f"{exc.what}; wanted {exc.wanted}; found {exc.found}".rstrip("; "))
        return out


def _candidate(req: Request, family: Family, source: Variant, base: str, base_tree: Path, tree: Path,
               derived: dict[str, tuple[str, str]], releases: list[str], out: Outcome) -> Outcome:
    assert out.variant is not None
    out.diff = _diff(derived)
    ours = family.patches[source.id]
    out.report += new_upstream_code.copies(ours, base_tree, tree, hunks.parse(out.diff, f"{out.variant}.diff"))
    out.report += new_upstream_code.wrappers(ours, base_tree, tree, family.engine)
    out.report += new_upstream_code.new_failures(ours, base_tree, tree)
    out.report += new_upstream_code.switch_setters(ours, base_tree, tree, family.engine)
    out.report += new_upstream_code.sibling_modules(ours, base_tree, tree)
    out.report += new_upstream_code.already_upstream(ours, tree)
    out.report += new_upstream_code.inserted_inside(ours, base_tree, tree)
    files = Files(engines.find(family.engine, site=tree))
    new_patches = hunks.parse(out.diff, f"{out.variant}.diff")
    outside = scope.moved(family, source.id, files, new_patches)
    if outside is not None:  # a place in scope the carried hunks never saw: a person writes it
        out.report.append(f"the family's scope moved since {source.id}: {outside}")
    if family.scope is not None:
        signatures = {vid: [{rel: list(t) for rel, t in sig.items()} for sig in sigs]
                      for vid, sigs in family.scope.signatures.items()}
        signatures[out.variant] = [{rel: list(t) for rel, t in scope.signature(family.scope, files).items()}]
        out.scope_json = json.dumps(signatures, indent=1) + "\n"
    locks = {vid: [{rel: list(t) for rel, t in sig.items()} for sig in sigs]
             for vid, sigs in (derived_scope.recorded(family) or {}).items()}
    locks[out.variant] = [{rel: list(t) for rel, t in derived_scope.signature_of(new_patches, files).items()}]
    out.derived_json = json.dumps(locks, indent=1) + "\n"
    releases_txt = manifest_edit.add_release((req.root / req.engine / "releases.txt").read_text(), req.version)
    out.manifest = manifest_edit.add_variant((family.folder / "patch.toml").read_text(), source.id, out.variant,
                                             req.version, releases, _modules(out.moved))
    with tempfile.TemporaryDirectory(prefix="kimi-port-set-") as tmp:
        scratch = _scratch_patches(req.root, req.engine, family, out.manifest, f"{out.variant}.diff",
                                   out.diff, releases_txt, Path(tmp))
        if out.scope_json:
            (scratch / req.engine / family.name / "scope.json").write_text(out.scope_json)
        (scratch / req.engine / family.name / derived_scope.LOCK).write_text(out.derived_json)
        fam = manifest.load(scratch / req.engine / family.name)  # the new manifest obeys the rules
        out.versions_md = matrix.cell(fam, req.version)
        ok, out.proofs = port_proof.run(req.engine, req.version, family.id, scratch, req.root, tree, set(derived),
                                   probes_too=req.probes and not out.report, env_release=req.env_release)
    carried = f"{out.variant} carried from {source.id} (written for {base})"
    if not ok:
        out.detail = f"{carried} but not proven: {out.proofs[-1]}"
    elif out.report:  # proven on the files only: the probes cannot vouch for code the variant never saw
        out.detail = f"{carried} applies, but upstream added code it may need to cover"
    else:
        out.state, out.detail = "proven", f"{carried} and proven"
    return out


def run(req: Request) -> list[Outcome]:
    if req.out is not None and req.out.is_dir() and any(req.out.iterdir()):
        # ``out`` holds an earlier port's results (the previous release of a --newer run, or an
        # earlier --to): port from them, so this release's patch.toml extends theirs, not replaces it.
        with tempfile.TemporaryDirectory() as tmp:
            return _run(replace(req, root=overlay(req.root, req.engine, req.out, Path(tmp) / "patches")))
    return _run(req)


def overlay(root: Path, engine: str, out: Path, dest: Path) -> Path:
    """A copy of the patch set at ``root`` with the files of ``out`` (laid out as ``write`` lays
    them: ``<family>/...`` and ``releases.txt``) in place of the engine's own."""
    shutil.copytree(root, dest)
    for src in sorted(out.rglob("*")):
        if src.is_file() and not src.name.startswith("."):
            target = dest / engine / src.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
    return dest


def _run(req: Request) -> list[Outcome]:
    tree = req.site or _tree(req.engine, req.version)
    install = engines.find(req.engine, site=tree)
    if install.version != Version(req.version):
        raise PatcherError(f"the files at {tree} are {req.engine} {install.version}", wanted=req.version)
    files = Files(install)
    outcomes = [port_family(req, f, tree, files) for f in _select(req)]
    if req.out is not None:
        write(req, outcomes, files)
    return outcomes


def write(req: Request, outcomes: list[Outcome], files: Files) -> None:
    """The proven and held results as they would be committed (flagged ones are not written).

    ``releases.txt`` gains the release only where that declares nothing untested (``undeclarable``);
    otherwise the outcomes say what a person does first."""
    good = [o for o in outcomes if o.exit == 0 and o.manifest]
    if not good or req.out is None:
        return
    req.out.mkdir(parents=True, exist_ok=True)
    releases = req.out / "releases.txt"
    src = releases if releases.is_file() else req.root / req.engine / "releases.txt"
    blocking = undeclarable(req.root, req.engine, req.version, files, {o.family for o in good})
    for o in good:
        o.report += [f"releases.txt does not list {req.version}: {why}" for why in blocking]
    text = src.read_text() if blocking else manifest_edit.add_release(src.read_text(), req.version)
    for o in good:
        folder = req.out / o.family.split("/", 1)[1]
        folder.mkdir(parents=True, exist_ok=True)
        if o.diff:
            _write(folder / f"{o.variant}.diff", o.diff)
        _write(folder / "patch.toml", o.manifest)
        if o.scope_json:
            _write(folder / "scope.json", o.scope_json)
        if o.derived_json:
            _write(folder / derived_scope.LOCK, o.derived_json)
    if blocking and not releases.is_file():
        return  # nothing to list: the shipped releases.txt stands
    _write(releases, text)


def undeclarable(root: Path, engine: str, version: str, files: Files, written: set[str]) -> list[str]:
    """Why listing ``version`` in releases.txt would declare a variant nothing proved there: a family
    (any of the engine's, whichever this port selected, except those it writes now) whose variant's
    range holds the release while the release's files leave it ``unknown`` otherwise than by a
    pre-image that fits byte for byte (its scope moved, several entries fit, none does). A listed
    release is declared, and 'apply' writes a declared variant as tested, without the scope check
    (issue 55: D9's open range and vLLM 0.34.0)."""
    out = []
    for family in manifest.load_all(root, (engine,)):
        covering = [v.id for v in family.variants if contains(v.versions, Version(version))]
        if not covering or family.id in written:
            continue
        st = undeclared(family, files, Version(version))
        if st.state is State.UNKNOWN and "pre-image byte for byte" not in st.detail:
            out.append(f"{family.id}'s variant {covering[0]} has a range that holds it, and its files leave the "
                       f"family unknown ({st.detail[:200]}); close {covering[0]}'s range below {version} or "
                       "write the variant that fits, then add the release")
    return out


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a reviewer never sees half a manifest."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
