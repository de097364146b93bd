"""apply / verify / revert / list on one engine install. Returns reports; never prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import bytecode, engines, manifest, probes, write
from .engines import Install
from .errors import PatcherError
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
    lock_timeout: float = 600.0
    patches: Path = manifest.PATCHES


@dataclass
class Report:
    action: str
    install: Install
    statuses: list[Status]
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: PatcherError | None = None
    dry_run: bool = False

    def exit_code(self, strict: bool) -> int:
        if self.error is not None:
            return self.error.exit_code
        if self.action == "revert":  # success is "nothing of ours left"; pending is the goal
            return 1 if any(s.state in (State.CONFLICT, State.APPLIED) and s.variant for s in self.statuses) else 0
        for st in self.statuses:
            if st.state not in OK_STATES and not (self.dry_run and st.state in (State.PENDING, State.LOST)):
                return 1
            if any(p["status"] == "failed" for p in st.probes):
                return 1
            if strict and (st.warnings or st.untested or any(p["status"] != "passed" for p in st.probes)):
                return 1
        if any(n.startswith("interrupted") for n in self.notes):
            return 1
        return 0


def families(engine: str, opts: Options) -> tuple[Family, ...]:
    every = manifest.load_all(opts.patches, (engine,))
    names = (*opts.only, *opts.skip)
    known = {f.id for f in every} | {f.name for f in every}
    if any(n not in known for n in names):  # maybe another engine's family: fine with --engine all
        known |= {f.id for f in manifest.load_all(opts.patches)}
    for name in names:
        if name not in known:
            raise PatcherError(f"no patch family {name!r}", wanted="an id from 'patcher list'", found=name)

    def hit(f: Family, names: tuple[str, ...]) -> bool:
        return f.id in names or f.name in names

    if opts.only:
        return tuple(f for f in every if hit(f, opts.only))
    return tuple(f for f in every if f.default and not hit(f, opts.skip))


def locate(engine: str, fams: tuple[Family, ...], opts: Options) -> Install:
    wanted = tuple(sorted({r.distribution for f in fams for r in f.requires}))
    return engines.find(engine, python=opts.python, site=opts.site, wanted=wanted)


def _shadow_notes(install: Install) -> list[str]:
    return [f"another copy of {install.engine} at {p} is not the one Python imports; left alone"
            for p in install.shadowed]


def verify(engine: str, opts: Options) -> Report:
    fams = families(engine, opts)
    install = locate(engine, fams, opts)
    with write.reading(install, opts.lock_timeout):
        statuses = assess(install, fams, write.read_state(install))
        interrupted = write.interrupted(install)
    report = Report("verify", install, statuses, notes=_shadow_notes(install))
    if interrupted:
        report.notes.append("interrupted: a run was killed mid-write; the next 'patcher apply' or "
                            "'patcher revert' rolls it back")
    if opts.probes:
        probes.run(install, statuses, opts.probe_timeout)
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
        report.notes.append("nothing was written: " + ", ".join(f"{s.family.id} is {s.state.value}" for s in stop))
        return report
    files = Files(install)
    changes = compose(todo, files)
    report.changed = sorted(changes)
    if dry or not changes:
        if opts.probes and not dry:
            probes.run(install, statuses, opts.probe_timeout)
        return report
    state = dict(records)
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
    if opts.probes:
        probes.run(install, after, opts.probe_timeout)
    return report


def revert(engine: str, opts: Options) -> Report:
    fams = families(engine, opts) if (opts.only or opts.skip) else manifest.load_all(opts.patches, (engine,))
    install = locate(engine, fams, opts)
    if opts.dry_run:
        return _revert_plan(install, fams, write.read_state(install), dry=True)
    with write.locked(install, opts.lock_timeout):
        restored = write.recover(install, _forget(install))
        report = _revert_plan(install, fams, write.read_state(install), dry=False)
        if restored:
            report.notes.append(f"rolled back an interrupted run: {', '.join(restored)}")
    return report


def _revert_plan(install: Install, fams: tuple[Family, ...], records: dict, dry: bool) -> Report:
    statuses = assess(install, fams, records)
    report = Report("revert", install, statuses, dry_run=dry)
    undo = [s for s in statuses if s.variant and s.files
            and set(s.files.values()) <= {FileState.APPLIED, FileState.PRISTINE}
            and FileState.APPLIED in s.files.values()]
    files = Files(install)
    changes = compose(undo, files, reverse=True)
    # A file no remaining family touches must be byte-identical to the wheel's RECORD.
    still = {fp.path for s in statuses if s not in undo and s.state is State.APPLIED and s.variant
             for fp in s.family.patches[s.variant]}
    for rel, data in changes.items():
        if rel not in still and not install.pristine(rel, data):
            raise PatcherError(f"reverting {rel} would not give the published file",
                               wanted=f"{install.record[rel]} (RECORD)", found=engines.sha256_record(data),
                               hint="the file holds edits we did not make; reinstall the engine with pip "
                                    "--force-reinstall --no-deps")
    report.changed = sorted(changes)
    if dry or not changes:
        return report
    state = {k: v for k, v in records.items() if k not in {s.family.id for s in undo}}
    write.commit(install, changes, state, _forget(install))
    report.statuses = assess(install, fams, write.read_state(install))
    return report
