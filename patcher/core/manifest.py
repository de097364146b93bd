"""patch.toml -> frozen dataclasses, validated with messages that quote the field.

One folder per family: ``patches/<engine>/<family>/``. The engine comes from the
folder and the target files from the diffs, so neither can disagree with the manifest.

Over 300 lines: the whole patch.toml schema, each field's check beside its type, so a manifest is
validated in one place.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from patcher import engine_specs
from patcher.core import hunks
from patcher.engine_specs.base import contains  # noqa: F401 (plan, port and the maintainer tools read it here)
from patcher.environment.paths import plain_rel
from patcher.errors import ManifestError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10
    import tomli as tomllib

# A checkout has patches/ beside patcher/; an installed wheel carries it as patcher/patches.
_HERE = Path(__file__).resolve().parents[1]  # the patcher package
PATCHES = _HERE.parent / "patches" if (_HERE.parent / "patches").is_dir() else _HERE / "patches"
ENGINES = engine_specs.NAMES  # tests swap it for a toy engine


Spelling = tuple[str, ...]  # one fact, in each spelling upstream has had: any one of them holds


@dataclass(frozen=True)
class Evidence:
    """A fact about a release's code, read from its files, that survives code moving around.

    Where it is read: ``files``, fixed paths relative to site-packages (several are alternatives:
    the fact holds if it holds in any of them, for code that moved between files), or ``defines``,
    a function or class by name (``"name"`` or ``"Class.name"``) wherever the package's RECORD puts
    it under ``under``, the text read being that definition's source. What it says: ``contains``,
    strings that must all be there (each one a tuple of alternative spellings), and ``lacks``,
    strings that must not. A missing file lacks everything; a missing definition too."""
    files: tuple[str, ...] = ()
    contains: tuple[Spelling, ...] = ()
    lacks: tuple[str, ...] = ()
    defines: str = ""
    under: str = ""

    @property
    def file(self) -> str:
        """Where it is read, for messages (the first alternative)."""
        return self.files[0] if self.files else f"def {self.defines}"

    def holds(self, text: str | None, where: str = "") -> str | None:
        """None when the evidence holds on ``text`` (None: file or definition missing), else what failed."""
        where = where or self.file
        for spellings in self.contains:
            if text is None:
                return f"{where} is missing (wanted it to contain {_either(spellings)})"
            if not any(s in text for s in spellings):
                return f"{where} lacks {_either(spellings)}"
        for s in self.lacks:
            if text is not None and s in text:
                return f"{where} contains {s!r}"
        return None


def _either(spellings: Spelling) -> str:
    return " or ".join(repr(s) for s in spellings)


@dataclass(frozen=True)
class Variant:
    id: str
    versions: SpecifierSet
    diffs: tuple[str, ...]
    enable: str = ""  # for opt-in features: how users turn it on with this variant


@dataclass(frozen=True)
class Upstream:
    versions: SpecifierSet
    since: str
    ref: str
    evidence: tuple[Evidence, ...]
    id: str = "upstream"  # what probes' `when` names; distinct ids split an upstream range
    covers: str = ""  # a sub-range that holds only part of the fix says which part, for the report


@dataclass(frozen=True)
class Refused:
    versions: SpecifierSet
    reason: str
    use: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Requirement:
    distribution: str
    versions: SpecifierSet
    severity: str  # "warning" | "blocked"
    why: str


@dataclass(frozen=True)
class Probe:
    id: str
    module: str
    check: str
    when: tuple[str, ...]
    preload: tuple[str, ...] = ()  # imported first, as the engine does before this module


DRAFTER_FACT_STATES = ("honoured", "dropped", "raises-at-load", "unused", "refused")


@dataclass(frozen=True)
class DrafterFact:
    """What the releases in `versions` do with one drafter config key, read from the wheels: the
    one place `patcher drafter check` learns it (no second table of engine facts)."""
    key: str  # the drafter's config key, e.g. "norm_output"
    path: str  # "speculators" (the engine converts the config) or "config" (read as written)
    drafter: str  # the drafter class the engine builds, e.g. "Eagle3LlamaForCausalLM"
    versions: SpecifierSet
    published: str  # one of DRAFTER_FACT_STATES but "refused"
    patched: str  # with this family applied; "refused" = refused at config load (or when the class is built)


@dataclass(frozen=True)
class Scope:
    """Where a family's behaviour lives in a release, found by what the code says (``[scope]`` in
    patch.toml): the RECORD files under ``under`` that hold every string of ``all`` and one of
    ``any``, and which of the ``reads`` strings each holds. ``signatures`` (scope.json beside the
    manifest, written by ``python -m patcher.maintainer.scope_lock`` from the wheels) is that
    signature on the published files of each release a variant declares (the distinct ones): a
    release whose signature is none of its variant's changed what the family is about, outside
    the variant's hunks."""

    what: str
    under: tuple[str, ...]
    all: tuple[str, ...]
    any: tuple[str, ...]
    reads: tuple[str, ...]
    signatures: dict[str, tuple[dict[str, tuple[str, ...]], ...]]


@dataclass(frozen=True)
class Family:
    engine: str
    name: str
    folder: Path
    title: str
    why: str
    refs: tuple[str, ...]
    default: bool
    variants: tuple[Variant, ...]
    upstream: tuple[Upstream, ...]
    refused: tuple[Refused, ...]
    requires: tuple[Requirement, ...]
    probes: tuple[Probe, ...]
    # Variants whose every hunk CI's full tier proves caught by a probe (patcher.maintainer.mutation);
    # the maintainer's run proves every variant.
    mutation_sample: tuple[str, ...] = ()
    # every release in releases.txt, oldest first: the releases whose published files the wheel
    # tests read, so the ones a rule of ours (patcher/drafter/facts.py) is proven on
    covered: tuple[Version, ...] = ()
    drafter_facts: tuple[DrafterFact, ...] = ()
    scope: Scope | None = None
    # [launch] meets: the conditions under which a launch is changed by this family (patcher.doctor.meets);
    # None: every launch is
    meets: tuple[str, ...] | None = None

    @property
    def newest(self) -> Version | None:
        """The newest release in releases.txt: beyond it, content decides."""
        return self.covered[-1] if self.covered else None

    @property
    def oldest(self) -> Version | None:
        """The oldest release in releases.txt: below it, only refusals by content."""
        return self.covered[0] if self.covered else None

    @property
    def id(self) -> str:
        return f"{self.engine}/{self.name}"

    @property
    def package(self) -> str:
        """The import package its diffs patch: the engine module's (the tests' toy engines: the name)."""
        return engine_specs.names(self.engine)[1]

    @cached_property
    def patches(self) -> dict[str, tuple[hunks.FilePatch, ...]]:
        """Parsed diffs per variant id, parsed on first use: parsing every variant of every
        family on each run would cost more than the whole file phase. Tests parse them all."""
        return _LazyPatches(self)

    def check_diffs(self) -> None:
        for v in self.variants:
            self.patches[v.id]

    def entries(self) -> list[Variant | Upstream | Refused]:
        return [*self.variants, *self.upstream, *self.refused]

    def classify(self, version: Version) -> Variant | Upstream | Refused | None:
        """The entry that declares ``version``. A release newer than every one we tested is
        declared by none, however open a range reads: only its files can say what it is."""
        if self.newest is not None and version > self.newest:
            return None
        for entry in self.entries():
            if contains(entry.versions, version):
                return entry
        return None


class _LazyPatches(dict):
    def __init__(self, family: Family) -> None:
        super().__init__()
        self.family = family

    def __missing__(self, variant_id: str) -> tuple[hunks.FilePatch, ...]:
        (variant,) = [v for v in self.family.variants if v.id == variant_id]
        files: list[hunks.FilePatch] = []
        for name in variant.diffs:
            origin = f"{self.family.id}/{name}"
            text = (self.family.folder / name).read_bytes().decode("utf-8")
            package = self.family.package
            for fp in hunks.parse(text, origin):
                if not fp.path.startswith(package + "/"):
                    raise ManifestError(f"{origin}: target {fp.path!r} is outside the engine",
                                        wanted=f"a path under '{package}/'", found=fp.path)
                files.append(fp)
        self[variant_id] = parsed = tuple(files)
        return parsed


class _Fields:
    """Reads one table, quoting the field in every error."""

    def __init__(self, where: str, table: Any) -> None:
        if not isinstance(table, dict):
            raise ManifestError(f"{where}: expected a table", found=repr(table))
        self.where, self.table = where, table
        self.used: set[str] = set()

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.table:
            if default is ...:
                raise ManifestError(f"{self.where}: missing field '{key}'")
            return default
        value = self.table[key]
        if not isinstance(value, kind):
            raise ManifestError(f"{self.where}: field '{key}' = {value!r}",
                                wanted=" or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,))),
                                found=type(value).__name__)
        return value

    def spec(self, key: str) -> SpecifierSet:
        raw = self.get(key, str)
        try:
            return SpecifierSet(raw)
        except InvalidSpecifier:
            raise ManifestError(f"{self.where}: invalid specifier '{key}' = {raw!r}") from None

    def strings(self, key: str, default: Any = ...) -> tuple[str, ...]:
        value = self.get(key, list, default)
        if not all(isinstance(v, str) for v in value):
            raise ManifestError(f"{self.where}: field '{key}' must be a list of strings", found=repr(value))
        return tuple(value)

    def done(self) -> None:
        extra = sorted(set(self.table) - self.used)
        if extra:
            raise ManifestError(f"{self.where}: unknown field '{extra[0]}'", hint="see patches/README.md")


def _covered(engine_dir: Path) -> tuple[Version, ...]:
    """Every release in releases.txt, oldest first (none without one)."""
    path = engine_dir / "releases.txt"
    if not path.is_file():
        return ()
    return tuple(sorted(Version(ln.strip()) for ln in path.read_text().splitlines()
                        if ln.strip() and not ln.startswith("#")))


def _one_line(text: str) -> str:
    """Reasons are printed inside one report line; TOML multi-line strings are for the reader."""
    return " ".join(text.split()).rstrip(".")


def _evidence(where: str, items: list[Any]) -> tuple[Evidence, ...]:
    out = []
    for i, raw in enumerate(items):
        f = _Fields(f"{where}.evidence[{i}]", raw)
        files = f.get("file", (str, list), [])
        files = (files,) if isinstance(files, str) else tuple(files)
        contains = []
        for item in f.get("contains", list, []):
            spellings = (item,) if isinstance(item, str) else tuple(item) if isinstance(item, list) else ()
            if not spellings or not all(isinstance(s, str) and s for s in spellings):
                raise ManifestError(f"{f.where}: field 'contains' holds {item!r}",
                                    wanted="a string, or a list of alternative spellings")
            contains.append(spellings)
        ev = Evidence(files, tuple(contains), f.strings("lacks", []), f.get("defines", str, ""),
                      f.get("under", str, ""))
        f.done()
        if not all(isinstance(x, str) and plain_rel(x) for x in files):
            raise ManifestError(f"{f.where}: field 'file' = {files!r}", wanted="relative paths under site-packages")
        if bool(files) == bool(ev.defines):
            raise ManifestError(f"{f.where}: wanted exactly one of 'file' and 'defines'",
                                found="both" if files else "neither")
        if ev.under and not ev.defines:
            raise ManifestError(f"{f.where}: field 'under' without 'defines'")
        if not (ev.contains or ev.lacks):
            raise ManifestError(f"{where}.evidence[{i}]: neither 'contains' nor 'lacks'")
        out.append(ev)
    return tuple(out)


_LOADED: dict[tuple[str, str], Family] = {}


def load(folder: Path) -> Family:
    """The family in ``folder``, parsed once per process for the same bytes: one run asks for an
    engine's families from several places (the selection, the plan, the report), and parsing them
    (TOML, every range boundary checked for overlaps) was most of a run's file phase. Keyed by the
    folder and the bytes of every file in it and of the engine's releases.txt: an edited family is
    parsed again; a family that fails to parse is never kept, its error raised each time."""
    folder = Path(folder)
    key = (str(folder.resolve()), _family_digest(folder))
    if key not in _LOADED:
        _LOADED[key] = _parse(folder)
    return _LOADED[key]


def _family_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in sorted(files) + [folder.parent / "releases.txt"]:
        try:
            data = path.read_bytes()
        except OSError:
            data = b"\0unreadable"  # the parse says what it could not read
        digest.update(path.relative_to(folder.parent).as_posix().encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def _parse(folder: Path) -> Family:
    engine, name = folder.parent.name, folder.name
    where = f"{engine}/{name}/patch.toml"
    try:
        raw = tomllib.loads((folder / "patch.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{where}: {exc}") from None
    top = _Fields(where, raw)
    variants, upstream, refused, requires, probes = [], [], [], [], []
    for i, t in enumerate(top.get("variant", list, [])):
        f = _Fields(f"{where} variant[{i}]", t)
        vid = f.get("id", str)
        variants.append(Variant(vid, f.spec("versions"), f.strings("diffs", [f"{vid}.diff"]),
                                _one_line(f.get("enable", str, ""))))
        f.done()
    for i, t in enumerate(top.get("upstream", list, [])):
        f = _Fields(f"{where} upstream[{i}]", t)
        upstream.append(Upstream(f.spec("versions"), f.get("since", str), f.get("ref", str),
                                 _evidence(f.where, f.get("evidence", list)), f.get("id", str, "upstream"),
                                 _one_line(f.get("covers", str, ""))))
        f.done()
    for i, t in enumerate(top.get("refused", list, [])):
        f = _Fields(f"{where} refused[{i}]", t)
        refused.append(Refused(f.spec("versions"), _one_line(f.get("reason", str)), f.get("use", str),
                               _evidence(f.where, f.get("evidence", list))))
        f.done()
    for i, t in enumerate(top.get("requires", list, [])):
        f = _Fields(f"{where} requires[{i}]", t)
        sev = f.get("severity", str)
        if sev not in ("warning", "blocked"):
            raise ManifestError(f"{f.where}: field 'severity' = {sev!r}", wanted="'warning' or 'blocked'")
        requires.append(Requirement(f.get("distribution", str), f.spec("versions"), sev, _one_line(f.get("why", str))))
        f.done()
    ids = {v.id for v in variants}
    for i, t in enumerate(top.get("probe", list, [])):
        f = _Fields(f"{where} probe[{i}]", t)
        when = f.strings("when", tuple(sorted(ids)))
        names = ids | {u.id for u in upstream} | {"upstream"}
        unknown = [w for w in when if w not in names]
        if unknown:
            raise ManifestError(f"{f.where}: field 'when' names {unknown[0]!r}", wanted=f"one of {sorted(names)}")
        probes.append(Probe(f.get("id", str), f.get("module", str), f.get("check", str), when,
                            f.strings("preload", ())))
        f.done()
    facts = []
    for i, t in enumerate(top.get("drafter_fact", list, [])):
        f = _Fields(f"{where} drafter_fact[{i}]", t)
        fact = DrafterFact(f.get("key", str), f.get("path", str), f.get("drafter", str), f.spec("versions"),
                           f.get("published", str), f.get("patched", str))
        for field in ("published", "patched"):
            value = getattr(fact, field)
            if value not in DRAFTER_FACT_STATES or (field == "published" and value == "refused"):
                raise ManifestError(f"{f.where}: field '{field}' = {value!r}", wanted=f"one of {DRAFTER_FACT_STATES}")
        if fact.path not in ("speculators", "config"):
            raise ManifestError(f"{f.where}: field 'path' = {fact.path!r}", wanted="'speculators' or 'config'")
        facts.append(fact)
        f.done()
    covered = _covered(folder.parent)
    scope = _scope(folder, where, top.get("scope", dict, None), ids)
    launch = top.get("launch", dict, None)
    meets = None
    if launch is not None:
        f = _Fields(f"{where} launch", launch)
        meets = f.strings("meets")
        f.done()
    family = Family(engine, name, folder, top.get("title", str), top.get("why", str),
                    top.strings("refs", []), top.get("default", bool, True), tuple(variants),
                    tuple(upstream), tuple(refused), tuple(requires), tuple(probes),
                    top.strings("mutation_sample", ()), covered=covered, drafter_facts=tuple(facts),
                    scope=scope, meets=meets)
    top.done()
    stray = [s for s in family.mutation_sample if s not in ids]
    if stray:
        raise ManifestError(f"{where}: field 'mutation_sample' names {stray[0]!r}", wanted=f"one of {sorted(ids)}")
    if len(ids) != len(variants):
        raise ManifestError(f"{where}: two variants share an id")
    _check_overlaps(family, where)
    for v in variants:
        for name in v.diffs:
            if not (folder / name).is_file():
                raise ManifestError(f"{where}: variant {v.id!r} names a missing diff {name!r}")
    return family


def _scope(folder: Path, where: str, table: dict | None, ids: set[str]) -> Scope | None:
    """``[scope]`` and its signatures (scope.json), validated: our own file, read as input."""
    if table is None:
        return None
    f = _Fields(f"{where} scope", table)
    scope = Scope(_one_line(f.get("what", str)), f.strings("under"), f.strings("all", ()), f.strings("any", ()),
                  f.strings("reads", ()), {})
    f.done()
    if not scope.under or not all(plain_rel(u) for u in scope.under) or not (scope.all or scope.any):
        raise ManifestError(f"{f.where}: wanted 'under' (relative paths) and 'all' or 'any'",
                            found=repr(table)[:120])
    lock = folder / "scope.json"
    try:
        raw = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{where}: [scope] without a readable scope.json", found=str(exc)[:120],
                            hint="python -m patcher.maintainer.scope_lock writes it from the wheels") from None
    shape = '{"<variant id>": [{"<RECORD path>": ["<one of reads>", ...]}, ...]}, one entry per variant'

    def valid(sig: object) -> bool:
        return isinstance(sig, dict) and all(
            isinstance(rel, str) and plain_rel(rel) and isinstance(toks, list) and all(t in scope.reads for t in toks)
            for rel, toks in sig.items())

    if not (isinstance(raw, dict) and set(raw) == ids and all(
            isinstance(sigs, list) and all(valid(sig) for sig in sigs) for sigs in raw.values())):
        raise ManifestError(f"{where}: scope.json is not {shape}",
                            hint="python -m patcher.maintainer.scope_lock writes it from the wheels")
    return Scope(scope.what, scope.under, scope.all, scope.any, scope.reads,
                 {vid: tuple({rel: tuple(toks) for rel, toks in sig.items()} for sig in sigs)
                  for vid, sigs in raw.items()})


def _check_overlaps(family: Family, where: str) -> None:
    """Ranges may not overlap. Checked on every boundary a range names and the versions just
    past each boundary (">1.0" and "<1.5" share 1.0.1 but no boundary). Every covered release
    is checked too, by tests/test_releases.py (too slow for each run: a third of the file phase)."""
    entries = family.entries()
    probes: set[Version] = set()
    for e in entries:
        for s in e.versions:
            if not s.version:
                continue
            b = Version(s.version.rstrip(".*"))
            rel = list(b.release)
            probes |= {b, Version(".".join(map(str, rel[:-1] + [rel[-1] + 1]))),
                       Version(".".join(map(str, rel + [1]))), Version(f"{b.base_version}.post1")}
    for v in sorted(probes):
        hits = [e for e in entries if contains(e.versions, v)]
        if len(hits) > 1:
            names = [getattr(e, "id", type(e).__name__.lower()) + f" '{e.versions}'" for e in hits]
            raise ManifestError(f"{where}: version ranges overlap at {v}", found=" and ".join(names),
                                hint="every release must fall in exactly one variant, upstream or refused entry")


def load_all(root: Path = PATCHES, engines: tuple[str, ...] = ENGINES) -> tuple[Family, ...]:
    out = []
    for engine in engines:
        base = root / engine
        if not base.is_dir():
            continue
        for folder in sorted(p for p in base.iterdir() if (p / "patch.toml").is_file()):
            out.append(load(folder))
    return tuple(out)
