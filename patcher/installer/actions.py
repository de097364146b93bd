"""apply / verify / revert / list on one engine install. Returns reports; never prints.

Over 300 lines: apply, verify and revert share their steps (locate, plan, write, probe) and their
Report; each action reads as one function.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patcher import program
from patcher.core import bytecode, manifest, selection, write
from patcher.core.hunks import FileState
from patcher.core.manifest import Family
from patcher.core.plan import OK_STATES, State, Status, assess, compose
from patcher.core.release_files import Files
from patcher.environment import engines
from patcher.environment.engines import Install
from patcher.errors import PatcherError
from patcher.probes import probes


@dataclass
class Options:
    python: str | None = None
    site: Path | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    dry_run: bool = False
    strict: bool = False
    allow_untested: bool = False
    probes: bool = True
    probe_timeout: float = 180.0
    debug: Callable[[str], None] | None = None  # --debug: how the probes ran (forked or spawned, and why)
    progress: Callable[[str], None] | None = None  # a line as probes start and end (the CLI: on a terminal)
    lock_timeout: float = 600.0
    patches: Path = manifest.PATCHES


_IS = {State.CONFLICT: "is in conflict", State.UNKNOWN: "is on an unknown release"}


@dataclass
class Report:
    action: str
    install: Install
    statuses: list[Status]
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: PatcherError | None = None
    dry_run: bool = False
    planned: list[str] = field(default_factory=list)  # families the run changes (or would, dry)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase (locate, read, write, probes)

    def exit_code(self, strict: bool) -> int:
        if self.error is not None:
            return self.error.exit_code
        return 1 if self.reasons(strict) else 0

    def reasons(self, strict: bool) -> list[str]:
        """Why the exit is 1, one phrase each; empty for exit 0. One rule for dry runs: a dry
        run exits as the real run would, counting the families it would change as changed."""
        out = []
        for st in self.statuses:
            fid, will = st.family.id, self.dry_run and st.family.id in self.planned
            if self.action == "revert":  # success is "nothing of ours left"; pending is the goal
                if st.variant and (st.state is State.CONFLICT or (st.state is State.APPLIED and not will)):
                    out.append(f"{fid} {'is still applied' if st.state is State.APPLIED else _IS[st.state]}")
                continue
            if st.state not in OK_STATES and not will:
                out.append(f"{fid} {_IS.get(st.state, 'is ' + st.state.value)}")
            out.extend(f"{fid}: probe {p['id']} failed" for p in st.probes if p["status"] == "failed")
            if strict:
                out.extend(f"{fid} has a warning (--strict)" for _ in st.warnings[:1])
                out.extend(f"{fid} is on an untested release (--strict)" for _ in [st.untested] if st.untested)
                out.extend(f"{fid}: probe {p['id']} {p['status']} (--strict)" for p in st.probes
                           if p["status"] not in ("passed", "failed", probes.ABSENT))
        if any(n.startswith("interrupted") for n in self.notes):
            out.append("a run was interrupted mid-write")
        return out


class Clock:
    """Seconds per phase of one run, for ``-v`` and the JSON's "timings": each ``lap`` ends a phase."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._t0 = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = round(self.phases.get(phase, 0.0) + now - self._t0, 3)
        self._t0 = now


def families(engine: str, opts: Options, every_family: bool = False) -> tuple[Family, ...]:
    return selection.families(engine, opts.only, opts.skip, opts.patches, every_family)


def locate(engine: str, fams: tuple[Family, ...], opts: Options) -> Install:
    wanted = tuple(sorted({r.distribution for f in fams for r in f.requires}))
    return engines.locate(engine, python=opts.python, site=opts.site, wanted=wanted, published=opts.patches)


def _unproven_checkout(install: Install, todo: list[Status]) -> None:
    """An editable checkout has no RECORD: a file we would write must hash as the release published
    it (patches/<engine>/published.json), else it is someone's edit, or another release's, and
    the family is a conflict that stops the run (a wheel's RECORD proves the same on revert)."""
    if install.truth == engines.RECORD_TRUTH:
        return
    for s in todo:
        for fp in s.family.patches[s.variant or ""]:
            data = install.read(fp.path)
            if data is None or not install.pristine(fp.path, data):
                s.state = State.CONFLICT
                s.detail = (f"{fp.path} is not as {install.engine} {install.version} published it: {install.truth}; "
                            "nothing of a checkout is written unless it is proven")
                s.hint = (f"restore it from the checkout's own history ({install.restore_command([fp.path])}), "
                          "then apply")
                break


def _restore(install: Install, rels: list[str]) -> str:
    if install.truth != engines.RECORD_TRUTH:
        return f"restore it from the checkout's own history ({install.restore_command(rels)})"
    return install.restore_command(rels)


def _edited(install: Install, statuses: list[Status]) -> None:
    """A file we patched whose bytes are no longer what apply wrote: our hunks still work, so the
    family stays applied, with a warning that says what revert does with it (the one rule:
    a file edited after apply is a conflict for revert, which leaves it as it is)."""
    for s in statuses:
        for rel in s.edited:
            s.warnings.append(f"{rel} changed since apply (our hunks are intact, other lines differ); "
                              f"'{program.command('revert')}' leaves it as it is and exits 1 (conflict); "
                              f"to get the published file back: {_restore(install, [rel])}")


def _left_as_is(install: Install, st: Status, rels: list[str]) -> None:
    """What revert reports for a family it does not touch because one of its files was edited."""
    st.state = State.CONFLICT
    st.detail = f"{', '.join(rels)} changed since apply (our hunks are intact, other lines differ); left as it is"
    st.hint = f"to get the published file{'s' if len(rels) > 1 else ''} back: {_restore(install, rels)}"


def _refresh(records: dict, changes: dict[str, bytes], drop: frozenset[str] = frozenset()) -> dict:
    """The state to write: every family still recorded gets the new hash of a file this run
    changed (families share files), so verify does not call our own edit a stranger's."""
    state = {}
    for fid, rec in records.items():
        if fid in drop:
            continue
        files = {rel: engines.sha256_record(changes[rel]) if rel in changes else sha
                 for rel, sha in rec.get("files", {}).items()}
        state[fid] = {**rec, "files": files}
    return state


def _shadow_notes(install: Install) -> list[str]:
    return [f"another copy of {install.engine} at {p} is not the one Python imports; left alone"
            for p in install.shadowed]


def _one_command(report: Report, opts: Options) -> None:
    """The hint of each family nothing places names the one command that does what it says for
    all of them together: --skip for every family left as it is, and --allow-untested where a
    pre-image matches byte for byte (a hint naming only --skip exits 1 while another family still
    needs --allow-untested)."""
    unknown = [s for s in report.statuses if s.state is State.UNKNOWN]
    if not unknown or report.action == "revert":
        return
    offered = [s for s in unknown if s.untested and s.files]
    skip = [*opts.skip, *(s.family.name for s in unknown if s not in offered)]
    flags = (" --allow-untested" if offered else "") + "".join(f" --skip {n}" for n in skip)
    command = program.command("apply" + flags)
    # What no command mends keeps exit 1, and the hint says which (a refused release, a conflict).
    stays = [s.family.id for s in report.statuses if s.state in (State.REFUSED, State.CONFLICT, State.BLOCKED)]
    ends = "exits 0" if not stays else f"exits 1 for {', '.join(stays)} alone"
    for s in unknown:
        if s in offered:
            s.hint = f"'{command}' applies it (its pre-image matches byte for byte) and {ends}"
        else:
            s.hint = (f"'{command}' applies the other families and {ends}, without it; for this one, use a "
                      f"release from VERSIONS.md or file an issue with "
                      f"'{program.command('verify --json')}'")


def _in_place(action: Callable[[str, Options], Report]) -> Callable[[str, Options], Report]:
    """The run's --python or --site is in every apply/verify/revert line it makes (hint, note,
    warning, error), made where each line is made (``program.located``), so the line can be pasted
    as it is (the drafter check does too); and one hint names the command for every unplaced family."""
    @functools.wraps(action)
    def run(engine: str, opts: Options) -> Report:
        with program.located(opts.python, opts.site):
            report = action(engine, opts)
            _one_command(report, opts)
            return report
    return run


@_in_place
def verify(engine: str, opts: Options) -> Report:
    clock = Clock()
    fams = families(engine, opts)
    install = locate(engine, fams, opts)
    clock.lap("locate")
    with write.reading(install, opts.lock_timeout):
        statuses = assess(install, fams, write.read_state(install))
        _unproven_checkout(install, [s for s in statuses if s.state in (State.PENDING, State.LOST)
                                     or (s.state is State.UNKNOWN and s.files)])
        interrupted = write.interrupted(install)
        if interrupted:  # the note below promises a rollback: only for a journal the next run can undo
            write.check_rollback(install)
    report = Report("verify", install, statuses, notes=_shadow_notes(install), timings=clock.phases)
    _edited(install, statuses)
    clock.lap("read")
    if interrupted:
        report.notes.append(f"interrupted: a run was killed mid-write; the next '{program.command('apply')}' or "
                            f"'{program.command('revert')}' rolls it back")
    if write.home(install).is_dir():  # pip knows nothing of it: say whose it is and how it goes
        report.notes.append(f"{write.DIRNAME}/ in this site-packages is patcher's bookkeeping: "
                            f"'{program.command('revert')}' removes it with our edits; run that before "
                            "'pip uninstall kimi-patcher'")
    if opts.probes:
        probes.run(install, statuses, opts.probe_timeout, opts.debug, opts.progress)
        _unproven(report)
        clock.lap("probes")
    return report


def _unproven(report: Report) -> None:
    """Probes that could not import prove nothing: say so once, with what to run where they can
    (the README's Docker advice), instead of an 'applied' that reads as proven."""
    probed = [p for s in report.statuses for p in s.probes]
    missing = [p["detail"].removeprefix("missing module ") for p in probed if p["status"] == "not importable"]
    # ("missing module X" for a dependency outside the engine; other import errors keep their text)
    if not missing:
        return
    what = ", ".join(dict.fromkeys(missing))
    share = ("no probe could import here" if len(missing) == len(probed) else
             f"{len(missing)} of {len(probed)} probes could not import here")
    report.notes.append(f"{share} (missing {what}), so they prove nothing yet; run '{program.command('verify')}' "
                        "where the engine runs (the GPU host, after start-up) for the full proof")


@_in_place
def apply(engine: str, opts: Options) -> Report:
    clock = Clock()
    fams = families(engine, opts)
    install = locate(engine, fams, opts)
    clock.lap("locate")
    if opts.dry_run:
        return _apply_plan(install, fams, opts, write.read_state(install), clock, dry=True)
    with write.locked(install, opts.lock_timeout):
        restored = write.recover(install)
        report = _apply_plan(install, fams, opts, write.read_state(install), clock, dry=False)
        if restored:
            report.notes.append(f"rolled back an interrupted run: {', '.join(restored)}")
    return report


def _apply_plan(install: Install, fams: tuple[Family, ...], opts: Options, records: dict, clock: Clock,
                dry: bool) -> Report:
    statuses = assess(install, fams, records)
    report = Report("apply", install, statuses, notes=_shadow_notes(install), dry_run=dry, timings=clock.phases)
    todo = [s for s in statuses if s.state in (State.PENDING, State.LOST)
            or (s.state is State.UNKNOWN and s.untested and opts.allow_untested and s.files)]
    _unproven_checkout(install, todo)
    # All or nothing over what we can place: a conflict or a blocked family stops the run (the
    # files are someone else's, or applying is unsafe). A family no entry places on this release
    # is left as it is, on its own: code moving in a new release must not block the others.
    stop = [s for s in statuses if s.state in (State.CONFLICT, State.BLOCKED)]
    if stop:
        report.notes.append("nothing was written: " + ", ".join(
            f"{s.family.id} {_IS.get(s.state, 'is ' + s.state.value)}" for s in stop))
        return report
    left = [s.family.id for s in statuses if s.state is State.UNKNOWN and s not in todo]
    if left:
        report.notes.append(f"left as {'it is' if len(left) == 1 else 'they are'} (unknown on {install.version}): "
                            f"{', '.join(left)}; the other families were applied")
    files = Files(install)
    changes = compose(todo, files)
    report.changed = sorted(changes)
    report.planned = [s.family.id for s in todo]
    clock.lap("read")
    if dry or not changes:
        _edited(install, statuses)
        if opts.probes and not dry:
            probes.run(install, statuses, opts.probe_timeout, opts.debug, opts.progress)
            _unproven(report)
            clock.lap("probes")
        return report
    state = _refresh(records, changes)
    for s in todo:
        state[s.family.id] = {"variant": s.variant, "version": str(install.version),
                              "files": {fp.path: engines.sha256_record(changes[fp.path])
                                        for fp in s.family.patches[s.variant or ""]}}
    compiled = bytecode.shipped(install, sorted(changes))
    write.commit(install, changes, state)
    failed = bytecode.recompile(install, compiled)
    if failed:
        report.notes.append(f"the shipped bytecode was removed but not rebuilt ({failed}); "
                            "the first import compiles it")
    clock.lap("write")
    # Re-read everything from disk: the report says what is there now, not what we meant to write.
    after = assess(install, fams, write.read_state(install))
    report.statuses = after
    _edited(install, after)
    clock.lap("read")
    if opts.probes:
        probes.run(install, after, opts.probe_timeout, opts.debug, opts.progress)
        _unproven(report)
        clock.lap("probes")
    return report


@_in_place
def revert(engine: str, opts: Options) -> Report:
    clock = Clock()
    fams = families(engine, opts, every_family=True)
    others = tuple(f for f in manifest.load_all(opts.patches, (engine,)) if f not in fams)
    install = locate(engine, fams, opts)
    clock.lap("locate")
    if opts.dry_run:
        return _revert_plan(install, fams, others, write.read_state(install), clock, dry=True)
    with write.locked(install, opts.lock_timeout):
        restored = write.recover(install)
        report = _revert_plan(install, fams, others, write.read_state(install), clock, dry=False)
        if restored:
            report.notes.append(f"rolled back an interrupted run: {', '.join(restored)}")
        write.tidy(install)  # nothing of ours left: no .kimi-patcher folder either
    return report


def _revert_plan(install: Install, fams: tuple[Family, ...], others: tuple[Family, ...], records: dict,
                 clock: Clock, dry: bool) -> Report:
    statuses = assess(install, fams, records)
    report = Report("revert", install, statuses, dry_run=dry, timings=clock.phases)
    # A file edited after apply: the state file's hashes say which (the loop below finds the rest).
    left = {s.family.id: s.edited for s in statuses if s.state is State.APPLIED and s.edited}
    undo = [s for s in statuses if s.variant and s.files and s.family.id not in left
            and set(s.files.values()) <= {FileState.APPLIED, FileState.PRISTINE}
            and FileState.APPLIED in s.files.values()]
    files = Files(install)
    # A file no remaining family touches must be byte-identical to the wheel's RECORD. The
    # families left out by --only/--skip count: they may share a file with one reverted here.
    # Without a state file to tell edits from our lines, that check finds them: such a family
    # is left as it is too, and what remains is composed again without it.
    others_st = assess(install, others, records) if others else []
    while True:
        changes = compose(undo, files, reverse=True)
        kept = [s for s in statuses if s not in undo] + others_st
        still = {fp.path for s in kept if s.variant and (s.state is State.APPLIED or s.family.id in left)
                 for fp in s.family.patches[s.variant]}
        edited = {rel for rel, data in changes.items() if rel not in still and not install.pristine(rel, data)}
        if not edited:
            break
        for st in list(undo):
            hit = sorted(edited & {fp.path for fp in st.family.patches[st.variant or ""]})
            if hit:
                left[st.family.id] = hit
                undo.remove(st)
    report.changed = sorted(changes)
    report.planned = [s.family.id for s in undo]
    # The records of every selected family that is not ours after this run go too, lost ones
    # included (reverted after an upgrade): a record that outlived its revert would call the
    # family "lost" after a later downgrade.
    drop = frozenset(s.family.id for s in undo) | {s.family.id for s in statuses
                                                   if s.family.id not in left and s.state is not State.CONFLICT}
    clock.lap("read")
    if not dry and (changes or drop & set(records)):
        write.commit(install, changes, _refresh(records, changes, drop=drop))
        clock.lap("write")
        report.statuses = assess(install, fams, write.read_state(install))
        clock.lap("read")
    for st in report.statuses:
        if st.family.id in left:
            _left_as_is(install, st, left[st.family.id])
    return report
