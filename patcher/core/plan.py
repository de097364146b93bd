"""The state of every family on one install, and what apply / revert would write.

Reads files, never writes them (``declared``: the state a release's manifests declare, for a
release whose files nobody has read). Variant choice is by version first, then confirmed
by content: the files must hold the variant's pre-image (pending) or post-image
(applied) exactly; anything else is a conflict and is never touched.

Over 300 lines: the states and the variant choice are one decision (a family's state is what apply
or revert would write).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction

from packaging.version import Version

from patcher import program
from patcher.core import hunks, scope
from patcher.core.hunks import FileState
from patcher.core.manifest import Family, Refused, Upstream, Variant, contains
from patcher.core.release_files import Files, encode, evidence_fails, judged
from patcher.environment.engines import Install
from patcher.errors import PatcherError


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
                          hint=f"an upgrade or reinstall replaced them: run '{program.command('apply')}' again",
                          untested=untested, files=states)
        return Status(family, State.PENDING, f"variant {variant.id} is not applied yet", variant.id,
                      hint=f"run '{program.command('apply')}'", untested=untested, files=states)
    if kinds <= {FileState.APPLIED, FileState.PRISTINE}:
        done = sorted(p for p, s in states.items() if s is FileState.APPLIED)
        if record is not None and _written_by_us(record, files):
            # An earlier patcher release applied a smaller diff (its backups are here): a renewal.
            todo = sorted(p for p, s in states.items() if s is FileState.PRISTINE)
            return Status(family, State.CONFLICT, f"holds variant {record['variant']} as an earlier patcher "
                          f"release wrote it on {record['version']}; this patcher's variant {variant.id} also "
                          f"changes {', '.join(todo)}", variant.id,
                          hint=f"'{program.command('revert --only ' + family.id)}' then "
                               f"'{program.command('apply')}' renews it", files=states)
        return Status(family, State.CONFLICT, f"partially applied: only {', '.join(done)} carry variant {variant.id}",
                      variant.id, files=states,
                      hint=f"'{program.command('revert --only ' + family.id)}' restores the published files")
    if record is not None and _written_by_us(record, files):
        # Our own earlier diff (a previous patcher release), byte for byte: nobody edited anything,
        # and the backups of that run are gone, so a clean reinstall is the way back.
        return Status(family, State.CONFLICT, f"files hold variant {record['variant']} as an earlier patcher "
                      f"release wrote it on {record['version']} (the state file's hashes match), and this "
                      f"patcher's variant {variant.id} differs from that diff: {first}", variant.id,
                      hint=f"our diff changed since; put the published files back "
                           f"({files.install.restore_command(sorted(states))}) and apply again", files=states)
    return Status(family, State.CONFLICT, f"files are neither published nor ours: {first}", variant.id,
                  hint=f"someone edited them; put the published files back "
                       f"({files.install.restore_command(sorted(states))}) and apply again", files=states)


def _written_by_us(record: dict, files: Files) -> bool:
    """Every file the family's state record lists still has the hash that apply wrote."""
    written = record["files"]
    return bool(written) and all(files.sha(rel) == sha for rel, sha in written.items())


def matching(family: Family, files: Files) -> list[Variant | Upstream | Refused]:
    """Every entry whose content test holds on these files, whatever its version range: a variant
    whose pre-image or post-image fits exactly, an upstream or refused entry whose evidence holds.
    On every covered release it is exactly the declared entry (tests/test_releases.py); two entries
    matching one release is a manifest error, and on a new release it is flagged, never resolved
    by whichever entry comes first."""
    out: list[Variant | Upstream | Refused] = []
    for v in family.variants:
        states, _ = _content_state(family, v, files)
        if set(states.values()) in ({FileState.PRISTINE}, {FileState.APPLIED}):
            out.append(v)
    out += [e for e in judged(family) if e.evidence and evidence_fails(files, e) is None]
    return out


def undeclared(family: Family, files: Files, version: Version, record: dict | None = None) -> Status:
    """A release no entry declares (newer or older than every release we cover), judged by content.
    First the entry of the covered release it descends from (the newest one; the oldest for an
    older release): where its content test holds, as on the releases it was proven on, the family
    is in that entry's state. Otherwise the one other entry whose content test holds; several, or
    none, is ``unknown``, never guessed. A variant's pre-image is applied only on request
    (--allow-untested). States come from facts we own: a variant's post-image is "applied" only
    where our state file records that we wrote it; the same text with no record of ours is the
    release's own (upstream took the fix verbatim)."""
    for v in family.variants:
        st = _from_files(family, v, files, record, untested=True)
        if st.state is State.APPLIED and record is not None and record["variant"] == v.id:
            return st  # we wrote it: our own post-image, whatever evidence it happens to satisfy
    anchor = family.oldest if family.oldest is not None and version < family.oldest else family.newest
    line = family.classify(anchor) if anchor is not None else None
    fits = [line] if line is not None and line in matching(family, files) else []
    if not fits:  # refusals by content are for releases older than we cover (_older), not for newer ones
        fits = [e for e in matching(family, files) if not isinstance(e, Refused)]
        if any(not isinstance(e, Variant) for e in fits):
            # our post-image where an upstream entry's evidence holds: upstream's own text (a backport)
            fits = [e for e in fits if not (isinstance(e, Variant) and _from_files(
                family, e, files, record, untested=True).state is State.APPLIED)]
    why = f" (not the entry of {anchor}, {_entry_name(line)})" if line is not None and fits[:1] != [line] else ""
    if len(fits) > 1:
        return Status(family, State.UNKNOWN, f"{version} is not a tested release and its files match "
                      f"{' and '.join(map(_entry_name, fits))}{why}: flagged for review, not guessed",
                      hint=_skip_hint(family))
    # A newer release's scope is read against what the variant was proven on; an older one's (below
    # every release we cover) holds less of what the family is about, never code we have not seen.
    newer = family.newest is None or version > family.newest
    if fits and isinstance(fits[0], Variant) and newer and (outside := scope.moved(family, fits[0].id, files)):
        return Status(family, State.UNKNOWN, f"{version} is not a tested release: its files match variant "
                      f"{fits[0].id} by its hunks, but the family's scope moved: {outside}; flagged for review, "
                      "not guessed", hint=_skip_hint(family))
    if fits:
        (entry,) = fits
        if isinstance(entry, Refused):  # the covered release it descends from is refused, and so is it
            st = _refused(family, entry, files.install)
            st.detail += f" (judged by its files: {version} is not in our matrix)"
            return st
        if isinstance(entry, Upstream):
            return Status(family, State.UPSTREAM, f"fix present (upstream {_since(entry)}){why}; {version} itself "
                          "is not in our matrix", untested=True, upstream_id=entry.id)
        st = _from_files(family, entry, files, record, untested=True)
        if st.state is State.APPLIED:  # our post-image, and no record that we wrote it (see above)
            return Status(family, State.UPSTREAM, f"the release ships variant {entry.id}'s text itself{why}: "
                          f"nothing of ours was written here (no record in our bookkeeping); {version} itself is "
                          "not in our matrix", untested=True)
        if st.state in (State.PENDING, State.LOST):
            st.state = State.UNKNOWN
            st.detail = (f"{version} is not a tested release, but its files match variant {entry.id}'s "
                         f"pre-image byte for byte{why}")
            st.hint = f"'{program.command('apply --allow-untested')}' applies it"
        return st
    # Nearest: the variant with most hunks still finding their text, then the closest range,
    # then the newer range (what a newer release most likely descends from).
    order = {v.id: i for i, v in enumerate(family.variants)}  # manifests list variants oldest first
    nearest = max(family.variants, key=lambda v: (_fitting_hunks(family, v, files), -_distance(v, version),
                                                  max(_bounds(v), default=Version("0")), order[v.id]),
                  default=None)
    if nearest is None:
        return Status(family, State.UNKNOWN, f"no entry covers {version}", hint=_skip_hint(family))
    _, first = _content_state(family, nearest, files)
    return Status(family, State.UNKNOWN, f"no variant declared for {version}; nearest is {nearest.id} "
                  f"('{nearest.versions}'), which does not fit: {first}", nearest.id,
                  hint=_skip_hint(family))


def _entry_name(entry: Variant | Upstream | Refused | None) -> str:
    if isinstance(entry, Variant):
        return f"variant {entry.id}"
    if entry is None:
        return "none"
    kind = "upstream" if isinstance(entry, Upstream) else "refused"
    return f"{kind} '{entry.versions}'"


def _skip_hint(family: Family) -> str:
    """What a user can do today about a family nothing places: the others apply without it."""
    return (f"'{program.command('apply --skip ' + family.name)}' applies the others and exits 0 without it; for "
            f"this one, use a release from VERSIONS.md or file an issue with '{program.command('verify --json')}'")


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
                            f"({entry.ref}) but {failed}",
                            hint=f"put the published files back ({install.restore_command()}); "
                                 "if it persists, file an issue")
            else:
                st = Status(family, State.UPSTREAM, f"fixed upstream {_since(entry)}",
                            upstream_id=entry.id)
        elif isinstance(entry, Refused):
            st = _refused(family, entry, install)
            failed = evidence_fails(files, entry)
            if failed:
                st.warnings.append(f"the refusal's evidence does not hold here: {failed}")
        else:
            st = _older(family, files, install) or undeclared(family, files, install.version, record)
        if st.state is State.APPLIED and record is not None and record["variant"] == st.variant:
            st.edited = [rel for rel, sha in sorted(record["files"].items()) if files.sha(rel) != sha]
        _preconditions(st, install)
        out.append(st)
    return out


def _covers(entry: Upstream) -> str:
    return f"; {entry.covers}" if entry.covers else ""


def _since(entry: Upstream) -> str:
    """"since 0.18.0 (vllm-project/vllm#31254)", the parenthesis only when there is a reference or a note."""
    said = "; ".join(x for x in (entry.ref, entry.covers) if x)
    return f"since {entry.since}" + (f" ({said})" if said else "")


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
                      hint=program.command(f"apply --engine {family.engine}"))
    if isinstance(entry, Upstream):
        return Status(family, State.UPSTREAM, f"fixed upstream {_since(entry)}",
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
