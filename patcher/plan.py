"""The state of every family on one install, and what apply / revert would write.

Reads files, never writes them (``declared``: the state a release's manifests declare, for a
release whose files nobody has read). Variant choice is by version first, then confirmed
by content: the files must hold the variant's pre-image (pending) or post-image
(applied) exactly; anything else is a conflict and is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from packaging.version import Version

from . import hunks
from .engines import Install, sha256_record
from .errors import PatcherError
from .hunks import FileState
from .manifest import Family, Refused, Upstream, Variant, contains


class State(str, Enum):
    APPLIED = "applied"
    UPSTREAM = "upstream"
    PENDING = "pending"
    LOST = "lost"
    REFUSED = "refused"
    BLOCKED = "blocked"
    CONFLICT = "conflict"
    UNKNOWN = "unknown release"

    def __str__(self) -> str:  # the word a person reads, in messages as in JSON
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


OK_STATES = (State.APPLIED, State.UPSTREAM)


@dataclass
class Status:
    family: Family
    state: State
    detail: str
    variant: str | None = None
    hint: str = ""
    untested: bool = False  # a variant chosen by content on a release it does not declare
    upstream_id: str = "upstream"  # which upstream entry holds, for probes' `when`
    files: dict[str, FileState] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)  # files whose bytes differ from what apply wrote


def decode(data: bytes) -> str:
    # surrogateescape: any byte survives the round trip, so untouched bytes stay identical.
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Files:
    """Read-once cache of engine file contents, as split lines."""

    def __init__(self, install: Install) -> None:
        self.install = install
        self._cache: dict[str, hunks.Text | None] = {}

    def lines(self, rel: str) -> hunks.Text | None:
        if rel not in self._cache:
            data = self.install.read(rel) if rel in self.install.record else None
            self._cache[rel] = None if data is None else hunks.split(decode(data))
        return self._cache[rel]

    def sha(self, rel: str) -> str | None:
        lines = self.lines(rel)
        return None if lines is None else sha256_record(encode(hunks.join(lines)))

    def text(self, rel: str) -> str | None:
        lines = self.lines(rel)
        return None if lines is None else hunks.join(lines)


def evidence_fails(files: Files, entry: Upstream | Refused) -> str | None:
    """What of an upstream or refused entry's evidence does not hold on these files (the first
    failure, as text); None when all of it holds. ``port`` judges a new release by it too."""
    for ev in entry.evidence:
        failed = ev.holds(files.text(ev.file))  # None for a file RECORD does not list
        if failed:
            return failed
    return None


def _content_state(family: Family, variant: Variant, files: Files) -> tuple[dict[str, FileState], str | None]:
    """Per-file state of a variant; the second value describes the first failure."""
    out: dict[str, FileState] = {}
    first = None
    for fp in family.patches[variant.id]:
        lines = files.lines(fp.path)
        if lines is None:
            out[fp.path] = FileState.NEITHER
            first = first or f"{fp.path} is missing"
            continue
        st, failure = hunks.state(lines, fp.hunks)
        out[fp.path] = st
        if failure is not None and first is None:
            first = f"{fp.path}: {failure.what}; wanted {failure.wanted}, found {failure.found}"
    return out, first


def _from_files(family: Family, variant: Variant, files: Files, record: dict | None, untested: bool) -> Status:
    states, first = _content_state(family, variant, files)
    kinds = set(states.values())
    if kinds == {FileState.APPLIED}:
        return Status(family, State.APPLIED, f"variant {variant.id} is in place", variant.id,
                      untested=untested, files=states)
    if kinds == {FileState.PRISTINE}:
        if record is not None:
            return Status(family, State.LOST, f"was applied (variant {record['variant']} on "
                          f"{record['version']}); the files are pristine again", variant.id,
                          hint="an upgrade or reinstall replaced them: run 'patcher apply' again",
                          untested=untested, files=states)
        return Status(family, State.PENDING, f"variant {variant.id} is not applied yet", variant.id,
                      hint="run 'patcher apply'", untested=untested, files=states)
    if kinds <= {FileState.APPLIED, FileState.PRISTINE}:
        done = sorted(p for p, s in states.items() if s is FileState.APPLIED)
        return Status(family, State.CONFLICT, f"partially applied: only {', '.join(done)} carry variant {variant.id}",
                      variant.id, hint="'patcher revert --only " + family.id + "' restores the published files",
                      files=states)
    if record is not None and _written_by_us(record, files):
        # Our own earlier diff (a previous patcher release), byte for byte: nobody edited anything,
        # and the backups of that run are gone, so a clean reinstall is the way back.
        return Status(family, State.CONFLICT, f"files hold variant {record['variant']} as an earlier patcher "
                      f"release wrote it on {record['version']} (the state file's hashes match), and this "
                      f"patcher's variant {variant.id} differs from that diff: {first}", variant.id,
                      hint="our diff changed since; reinstall the engine (pip install --force-reinstall --no-deps) "
                           "and apply again", files=states)
    return Status(family, State.CONFLICT, f"files are neither published nor ours: {first}", variant.id,
                  hint="someone edited them; reinstall the engine (pip install --force-reinstall --no-deps) "
                       "and apply again", files=states)


def _written_by_us(record: dict, files: Files) -> bool:
    """Every file the family's state record lists still has the hash that apply wrote."""
    written = record["files"]
    return bool(written) and all(files.sha(rel) == sha for rel, sha in written.items())


def _unknown(family: Family, files: Files, version: Version, record: dict | None) -> Status:
    """A release no entry declares: classify from content alone."""
    in_place = None
    for v in family.variants:
        st = _from_files(family, v, files, record, untested=True)
        if st.state in (State.PENDING, State.LOST):
            st.state = State.UNKNOWN
            st.detail = (f"{version} is not a tested release, but its files match variant {v.id}'s "
                         "pre-image byte for byte")
            st.hint = "'patcher apply --allow-untested' applies it"
            return st
        if st.state is State.APPLIED:
            if record is not None:
                return st
            in_place = in_place or st
    for up in family.upstream:
        if evidence_fails(files, up) is None:
            return Status(family, State.UPSTREAM, f"fix present (in upstream since {up.since}, {up.ref}"
                          f"{_covers(up)}); {version} itself is not in our matrix", untested=True, upstream_id=up.id)
    if in_place is not None:
        return in_place
    # Nearest: the variant with most hunks still finding their text, then the closest range,
    # then the newer range (what a newer release most likely descends from).
    order = {v.id: i for i, v in enumerate(family.variants)}  # manifests list variants oldest first
    nearest = max(family.variants, key=lambda v: (_fitting_hunks(family, v, files), -_distance(v, version),
                                                  max(_bounds(v), default=Version("0")), order[v.id]),
                  default=None)
    if nearest is None:
        return Status(family, State.UNKNOWN, f"no entry covers {version}", hint="file an issue")
    _, first = _content_state(family, nearest, files)
    return Status(family, State.UNKNOWN, f"no variant declared for {version}; nearest is {nearest.id} "
                  f"('{nearest.versions}'), which does not fit: {first}", nearest.id,
                  hint="use a release from VERSIONS.md, or file an issue with 'patcher verify --json'")


def _fitting_hunks(family: Family, variant: Variant, files: Files) -> int:
    """How many of the variant's hunks still find their old text somewhere in the file."""
    return sum(hunks.locate(lines, h.old, 0, 0, h.old_ends_without_newline) is not None
               for fp in family.patches[variant.id] if (lines := files.lines(fp.path)) is not None
               for h in fp.hunks)


def _bounds(variant: Variant) -> list[Version]:
    return [Version(s.version.rstrip(".*")) for s in variant.versions if s.version]


def _distance(variant: Variant, version: Version) -> Fraction:
    """How far ``version`` is from the variant's nearest bound, each release component worth a
    thousandth of the one before. Exact (Fraction): with floats, 1.3 was nearer to 1.2 than to
    1.4, and the tie-break the manifests rely on (the newer range) never happened."""
    def num(v: Version) -> Fraction:
        return sum((Fraction(p, 1000 ** i) for i, p in enumerate(v.release)), Fraction())
    # No bound (versions = ""): the variant covers every release, and no other can coexist with it.
    return min((abs(num(b) - num(version)) for b in _bounds(variant)), default=Fraction())


def assess(install: Install, families: tuple[Family, ...], records: dict[str, dict]) -> list[Status]:
    """``records``: the state file's families as bookkeeping.parse_state validated them (each has
    "variant", "version" and "files"), {} without one."""
    files = Files(install)
    out = []
    for family in families:
        record = records.get(family.id)
        entry = family.classify(install.version)
        if isinstance(entry, Variant):
            st = _from_files(family, entry, files, record, untested=False)
        elif isinstance(entry, Upstream):
            failed = evidence_fails(files, entry)
            if failed:
                st = Status(family, State.CONFLICT, f"{install.version} should carry the upstream fix "
                            f"({entry.ref}) but {failed}", hint="reinstall the engine; if it persists, file an issue")
            else:
                st = Status(family, State.UPSTREAM, f"fixed upstream since {entry.since} ({entry.ref}{_covers(entry)})",
                            upstream_id=entry.id)
        elif isinstance(entry, Refused):
            st = _refused(family, entry, install)
            failed = evidence_fails(files, entry)
            if failed:
                st.warnings.append(f"the refusal's evidence does not hold here: {failed}")
        else:
            st = _older(family, files, install) or _unknown(family, files, install.version, record)
        if st.state is State.APPLIED and record is not None and record["variant"] == st.variant:
            st.edited = [rel for rel, sha in sorted(record["files"].items()) if files.sha(rel) != sha]
        _preconditions(st, install)
        out.append(st)
    return out


def _covers(entry: Upstream) -> str:
    return f"; {entry.covers}" if entry.covers else ""


def _refused(family: Family, entry: Refused, install: Install) -> Status:
    # Never "--skip" as the way out: skipping hides the problem, the server still fails.
    return Status(family, State.REFUSED, _refusal(entry),
                  hint=f"install {install.engine} {entry.use} or newer (VERSIONS.md: what each release gets)")


def _refusal(entry: Refused) -> str:
    return f"{entry.reason}; use {entry.use} or newer"


def declared(family: Family, version: Version) -> Status:
    """The state of a family on a release nobody has read the files of (``drafter check
    --engine-version``): what its manifest declares for the published files. No evidence is
    checked and nothing is ever applied, so it is pending, upstream, refused or unknown."""
    entry = family.classify(version)
    if isinstance(entry, Variant):
        return Status(family, State.PENDING, f"the published files need variant {entry.id}", entry.id,
                      hint=f"patcher apply --engine {family.engine}")
    if isinstance(entry, Upstream):
        return Status(family, State.UPSTREAM, f"fixed upstream since {entry.since} ({entry.ref})",
                      upstream_id=entry.id)
    if isinstance(entry, Refused):
        return Status(family, State.REFUSED, _refusal(entry))
    return Status(family, State.UNKNOWN, f"no entry covers {version}; only the files can tell",
                  hint="install it and run the check there (--python / --site), or use a release from VERSIONS.md")


def _older(family: Family, files: Files, install: Install) -> Status | None:
    """A release older than every one we cover is refused when a refusal's evidence holds on
    its files (the feature provably cannot work there), as a covered release would be."""
    if family.oldest is None or install.version >= family.oldest:
        return None
    for entry in family.refused:
        if entry.evidence and evidence_fails(files, entry) is None:
            st = _refused(family, entry, install)
            st.detail += f" (judged by its files: {install.version} is older than every release we cover)"
            return st
    return None


def _preconditions(st: Status, install: Install) -> None:
    for req in st.family.requires:
        have = install.others.get(req.distribution.lower().replace("_", "-"))
        if have is not None and contains(req.versions, Version(have)):
            continue
        found = f"{req.distribution} {have}" if have else f"no {req.distribution}"
        msg = f"{req.why}: wanted {req.distribution}{req.versions}, found {found}"
        if req.severity == "blocked" and st.state in (State.PENDING, State.LOST, State.UNKNOWN):
            st.state, st.detail = State.BLOCKED, msg
            st.hint = f"pip install '{req.distribution}{req.versions}'"
        elif st.state in (State.APPLIED, State.PENDING, State.LOST, State.UNKNOWN):
            st.warnings.append(msg)


def compose(statuses: list[Status], files: Files, *, reverse: bool = False) -> dict[str, bytes]:
    """New contents of every file the given families touch, applied (or undone) in order."""
    work: dict[str, hunks.Text] = {}
    for st in statuses:
        assert st.variant is not None
        for fp in st.family.patches[st.variant]:
            if reverse and st.files.get(fp.path) is FileState.PRISTINE:
                continue  # a partial apply: this file never got the variant
            current = work.get(fp.path) or files.lines(fp.path)
            if current is None:
                raise PatcherError(f"{st.family.id}: {fp.path} is missing")
            try:
                work[fp.path] = hunks.apply(current, fp.hunks, reverse=reverse)
            except PatcherError as exc:
                raise PatcherError(f"{st.family.id}: {exc.what} in {fp.path}", wanted=exc.wanted,
                                   found=exc.found, hint="two families overlap on this file") from None
    return {rel: encode(hunks.join(lines)) for rel, lines in work.items()}
