"""apply / verify / revert / list on one engine install. Returns reports; never prints."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import bytecode, engines, interpreter, manifest, probes, selection, write
from .engines import Install
from .errors import NotInstalled, PatcherError
from .hunks import FileState
from .manifest import Family
from .plan import OK_STATES, Files, State, Status, assess, compose


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
    debug: bool = False  # --debug: also how the probes ran (forked or spawned, and why), on stderr
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
                           if p["status"] not in ("passed", "failed"))
        if any(n.startswith("interrupted") for n in self.notes):
            out.append("a run was interrupted mid-write")
        return out


def families(engine: str, opts: Options, every_family: bool = False) -> tuple[Family, ...]:
    return selection.families(engine, opts.only, opts.skip, opts.patches, every_family)


def locate(engine: str, fams: tuple[Family, ...], opts: Options) -> Install:
    wanted = tuple(sorted({r.distribution for f in fams for r in f.requires}))
    if opts.python is not None and opts.site is not None:
        raise selection.SelectionError("--python and --site both name the environment",
                                       wanted="one of them", found=f"--python {opts.python} --site {opts.site}")
    if opts.python is not None:
        interpreter.check(opts.python)
    try:
        return engines.find(engine, python=opts.python, site=opts.site, wanted=wanted)
    except NotInstalled as exc:
        if opts.python is None and opts.site is None:
            raise
        flag = "--python" if opts.python else "--site"
        raise NotInstalled(exc.what, wanted=exc.wanted, found=exc.found,
                           hint=f"install it there, or point {flag} at the environment that has it") from None


def _edited(install: Install, statuses: list[Status]) -> None:
    """A file we patched whose bytes are no longer what apply wrote: say so, and what a full
    revert would do with it (computed, not guessed)."""
    hit = [s for s in statuses if s.edited]
    if not hit:
        return
    undo = [s for s in statuses if s.state is State.APPLIED and s.variant]
    try:
        back = compose(undo, Files(install), reverse=True)
        outcome = {rel: "restore the published file" if install.pristine(rel, data) else
                   "refuse it (undoing our hunks would not give the published file)" for rel, data in back.items()}
    except PatcherError as exc:
        outcome = {rel: f"refuse it ({exc.what})" for s in hit for rel in s.edited}
    fix = f"pip install --force-reinstall --no-deps {install.engine}=={install.version}"
    for s in hit:
        for rel in s.edited:
            s.warnings.append(f"{rel} changed since apply (our hunks are intact, other lines differ); "
                              f"'patcher revert' would {outcome.get(rel, 'refuse it')}; to start over: {fix}")


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


def _debug(opts: Options):
    return (lambda line: print(line, file=sys.stderr)) if opts.debug else None


def verify(engine: str, opts: Options) -> Report:
    fams = families(engine, opts)
    install = locate(engine, fams, opts)
    with write.reading(install, opts.lock_timeout):
        statuses = assess(install, fams, write.read_state(install))
        interrupted = write.interrupted(install)
    report = Report("verify", install, statuses, notes=_shadow_notes(install))
    _edited(install, statuses)
    if interrupted:
        report.notes.append("interrupted: a run was killed mid-write; the next 'patcher apply' or "
                            "'patcher revert' rolls it back")
    if opts.probes:
        probes.run(install, statuses, opts.probe_timeout, _debug(opts))
    return report


def _forget(install: Install):
    return lambda rels: bytecode.remove(install, rels)


def apply(engine: str, opts: Options) -> Report:
    fams = families(engine, opts)
    install = locate(engine, fams, opts)
    if opts.dry_run:
        return _apply_plan(install, fams, opts, write.read_state(install), dry=True)
    with write.locked(install, opts.lock_timeout):
        restored = write.recover(install, _forget(install))
        report = _apply_plan(install, fams, opts, write.read_state(install), dry=False)
        if restored:
            report.notes.append(f"rolled back an interrupted run: {', '.join(restored)}")
    return report


def _apply_plan(install: Install, fams: tuple[Family, ...], opts: Options, records: dict, dry: bool) -> Report:
    statuses = assess(install, fams, records)
    report = Report("apply", install, statuses, notes=_shadow_notes(install), dry_run=dry)
    todo = [s for s in statuses if s.state in (State.PENDING, State.LOST)
            or (s.state is State.UNKNOWN and s.untested and opts.allow_untested and s.files)]
    stop = [s for s in statuses if s.state in (State.CONFLICT, State.BLOCKED)
            or (s.state is State.UNKNOWN and s not in todo)]
    if stop:
        report.notes.append("nothing was written: " + ", ".join(
            f"{s.family.id} {_IS.get(s.state, 'is ' + s.state.value)}" for s in stop))
        return report
    files = Files(install)
    changes = compose(todo, files)
    report.changed = sorted(changes)
    report.planned = [s.family.id for s in todo]
    if dry or not changes:
        _edited(install, statuses)
        if opts.probes and not dry:
            probes.run(install, statuses, opts.probe_timeout, _debug(opts))
        return report
    state = _refresh(records, changes)
    for s in todo:
        state[s.family.id] = {"variant": s.variant, "version": str(install.version),
                              "files": {fp.path: engines.sha256_record(changes[fp.path])
                                        for fp in s.family.patches[s.variant or ""]}}
    compiled = bytecode.shipped(install, sorted(changes))
    write.commit(install, changes, state, _forget(install))
    failed = bytecode.recompile(install, compiled)
    if failed:
        report.notes.append(f"the shipped bytecode was removed but not rebuilt ({failed}); "
                            "the first import compiles it")
    # Re-read everything from disk: the report says what is there now, not what we meant to write.
    after = assess(install, fams, write.read_state(install))
    report.statuses = after
    _edited(install, after)
    if opts.probes:
        probes.run(install, after, opts.probe_timeout, _debug(opts))
    return report


def revert(engine: str, opts: Options) -> Report:
    fams = families(engine, opts, every_family=True)
    others = tuple(f for f in manifest.load_all(opts.patches, (engine,)) if f not in fams)
    install = locate(engine, fams, opts)
    if opts.dry_run:
        return _revert_plan(install, fams, others, write.read_state(install), dry=True)
    with write.locked(install, opts.lock_timeout):
        restored = write.recover(install, _forget(install))
        report = _revert_plan(install, fams, others, write.read_state(install), dry=False)
        if restored:
            report.notes.append(f"rolled back an interrupted run: {', '.join(restored)}")
        write.tidy(install)  # nothing of ours left: no .kimi-patcher folder either
    return report


def _revert_plan(install: Install, fams: tuple[Family, ...], others: tuple[Family, ...], records: dict,
                 dry: bool) -> Report:
    statuses = assess(install, fams, records)
    report = Report("revert", install, statuses, dry_run=dry)
    undo = [s for s in statuses if s.variant and s.files
            and set(s.files.values()) <= {FileState.APPLIED, FileState.PRISTINE}
            and FileState.APPLIED in s.files.values()]
    files = Files(install)
    changes = compose(undo, files, reverse=True)
    # A file no remaining family touches must be byte-identical to the wheel's RECORD. The
    # families left out by --only/--skip count: they may share a file with one reverted here.
    kept = [s for s in statuses if s not in undo] + (assess(install, others, records) if others else [])
    still = {fp.path for s in kept if s.state is State.APPLIED and s.variant for fp in s.family.patches[s.variant]}
    for rel, data in changes.items():
        if rel not in still and not install.pristine(rel, data):
            raise PatcherError(f"reverting {rel} would not give the published file",
                               wanted=f"{install.record[rel]} (RECORD)", found=engines.sha256_record(data),
                               hint="the file holds edits we did not make; reinstall the engine with pip "
                                    "--force-reinstall --no-deps")
    report.changed = sorted(changes)
    report.planned = [s.family.id for s in undo]
    if dry or not changes:
        return report
    state = _refresh(records, changes, drop=frozenset(s.family.id for s in undo))
    write.commit(install, changes, state, _forget(install))
    report.statuses = assess(install, fams, write.read_state(install))
    return report
