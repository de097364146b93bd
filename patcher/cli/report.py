"""The one printer: every command's report as text for people and as JSON for machines
(schemas in docs/reference.md). The command modules build reports and hand them here; what a
finding, an engine release or a verdict looks like is written once, in this module.

Over 300 lines: it is the one printer of seven commands (apply, verify, revert, list, drafter
check and fix, doctor), text and JSON; split by command, the shared wording (states, hints said
once, the exit line) would be written twice.
"""

from __future__ import annotations

import re
from typing import Any

from patcher.core.plan import State
from patcher.doctor import verdict, which_engine
from patcher.drafter.checkpoint import Checkpoint
from patcher.drafter.configs import DrafterConfig, TargetConfig
from patcher.drafter.fix import FixOutcome
from patcher.environment import engines
from patcher.findings import LEVELS, PROBLEM, UNKNOWN, Finding, tally
from patcher.installer.actions import Report
from patcher.release.release import Release

# The JSON of apply / verify / revert (docs/reference.md "--json schema"). A change that could break a
# reader (a key removed, renamed or retyped) takes a new number; added keys do not.
SCHEMA = "patcher.report/1"

_MARK = {State.APPLIED: "ok", State.UPSTREAM: "ok", State.PENDING: "todo", State.LOST: "LOST",
         State.REFUSED: "NO", State.BLOCKED: "NO", State.CONFLICT: "NO", State.UNKNOWN: "??"}


def _enable(s) -> str:
    """How to turn an opt-in feature on, for the variant in place (or about to be)."""
    return next((v.enable for v in s.family.variants if v.id == s.variant), "") if s.variant else ""


def _mark(s) -> str:
    # A family whose probe failed is not "ok", whatever its files say.
    return "FAIL" if any(p["status"] == "failed" for p in s.probes) else _MARK[s.state]


def as_dict(r: Report, strict: bool) -> dict[str, Any]:
    i = r.install
    return {
        "schema": SCHEMA, "action": r.action, "dry_run": r.dry_run, "engine": i.engine, "version": str(i.version),
        "site": str(i.site), "python": i.python, "published_files": i.truth, "changed": r.changed, "notes": r.notes,
        "exit": r.exit_code(strict), "reasons": r.reasons(strict), "timings": r.timings,
        "families": [{
            "id": s.family.id, "title": s.family.title, "state": s.state.value, "variant": s.variant,
            "detail": s.detail, "hint": s.hint, "untested": s.untested, "warnings": s.warnings,
            "files": {k: v.value for k, v in s.files.items()}, "probes": s.probes, "enable": _enable(s),
        } for s in r.statuses],
    }


def as_text(r: Report, strict: bool, said: dict[str, str] | None = None, quiet: bool = False,
            verbose: bool = False) -> list[str]:
    """The report, without the closing exit line (the CLI prints one for all engines).

    ``said`` (text -> family id), shared by the reports of one run, makes each warning and
    each 'turn on' text appear once, in full, where it first applies; a later family that has
    the same one points back to it. A requirement's warning is left to the families it
    concerns now: a pending family gets it when it is applied (JSON keeps every warning).
    ``quiet`` (-q): only the families that are not ok, with all they say, and what changed.
    ``verbose`` (-v): also what was checked (each file's state, each probe's module import time)
    and the seconds each phase took."""
    said = {} if said is None else said
    i = r.install
    verb = {"apply": "would apply" if r.dry_run else "applied", "revert": "would revert" if r.dry_run else "reverted"}
    out = [f"{i.engine} {i.version} at {i.site}" + (f" (python: {i.python})" if i.python else "")]
    if i.truth != engines.RECORD_TRUTH:  # an editable checkout: say what "as published" rests on
        out.append(f"  published files: {i.truth}")
    for s in r.statuses:
        if quiet and _quiet_ok(r, s, strict):
            continue
        fid = s.family.id
        variant = f" [{s.variant}]" if s.variant and s.state in (State.APPLIED, State.PENDING, State.LOST) else ""
        untested = " (untested release)" if s.untested and s.state is not State.UNKNOWN else ""
        if r.action == "revert" and s.state is State.PENDING:  # what revert is for: not a to-do
            out.append(f"  {'ok':4} {fid}: as published: nothing of ours in its files")
        else:
            out.append(f"  {_mark(s):4} {fid}: {s.state.value}{untested}{variant}: {s.detail}")
        if s.state is State.APPLIED and _enable(s) and r.action != "revert":  # not while taking it out
            out.append(_once("turn on", _as_it_stands(" ".join(_enable(s).split()), r.statuses), fid, said))
        for w in s.warnings:
            if s.state is State.PENDING and w.startswith(_required(s)):
                continue
            out.append(_once("warning", w, fid, said))
        if verbose:
            out.extend(f"       file {rel}: {state.value}" for rel, state in sorted(s.files.items()))
        for p in s.probes:
            extra = f": {p['detail']}" if p["detail"] else ""
            took = (f" ({p['module']} imported in {p['seconds']:.2f} s)"
                    if verbose and p.get("seconds") is not None else "")
            out.append(f"       probe {p['id']}: {p['status']}{extra}{took}")
        if s.hint and s.state not in (State.APPLIED, State.UPSTREAM) and not (
                r.action == "revert" and s.state in (State.PENDING, State.UNKNOWN)):  # what revert is for
            out.append(_once("hint", s.hint, fid, said))
    if r.action in verb and not (quiet and not r.changed):
        idle = "nothing" if r.reasons(strict) else "nothing (already in the wanted state)"
        out.append(f"  {verb[r.action]}: {', '.join(r.changed) if r.changed else idle}")
    out.extend(f"  note: {n}" for n in r.notes if not quiet)
    if verbose and r.timings:
        out.append("  took: " + ", ".join(f"{phase} {sec:.2f} s" for phase, sec in r.timings.items()))
    return out if not quiet or len(out) > 1 else []


def _quiet_ok(r: Report, s, strict: bool) -> bool:
    """A family -q leaves out: ok, no failed probe, no warning (a CI job running -q must still learn
    that a patched file was edited after apply), and under --strict nothing that fails the run."""
    if r.action == "revert" and s.state is State.PENDING:
        return True
    if _mark(s) != "ok" or s.warnings:
        return False
    return not (strict and (s.untested or any(p["status"] != "passed" for p in s.probes)))


_UNLESS = re.compile(r" unless (\S+/\S+) is applied")


def _as_it_stands(text: str, statuses) -> str:
    """A turn-on text's 'unless <family> is applied', said as this install stands."""
    def said(m: re.Match) -> str:
        state = next((st.state for st in statuses if st.family.id == m[1]), None)
        if state is State.APPLIED:
            return f"; {m[1]}, applied here, fixes that"
        if state is State.UPSTREAM:
            return f"; this release has that fixed upstream ({m[1]})"
        return m[0]
    return _UNLESS.sub(said, text)


def _required(s) -> tuple[str, ...]:
    """The start of each warning plan._preconditions writes for this family's requirements."""
    return tuple(req.why for req in s.family.requires) or ("\0",)


def _once(label: str, text: str, fid: str, said: dict[str, str]) -> str:
    first = said.setdefault(text, fid)
    return f"       {label}: {text}" if first == fid else f"       {label}: as for {first} above"


def grouped(reasons: list[str]) -> list[str]:
    """The exit line's reasons, families in one state said once ("a, b and c are lost"): after an
    upgrade seven families read lost, and seven clauses said the same thing."""
    out: list[str] = []
    by_state: dict[str, list[str]] = {}
    for reason in reasons:
        fid, _, state = reason.partition(" ")
        if "/" in fid and state.startswith(("is ", "are ")) and ":" not in state:
            by_state.setdefault(state.removeprefix("is "), []).append(fid)
            if len(by_state[state.removeprefix("is ")]) == 1:
                out.append(state.removeprefix("is "))  # a place holder, filled below, in first-seen order
        else:
            out.append(reason)
    return [_families_are(by_state[r], r) if r in by_state else r for r in out]


def _families_are(fids: list[str], state: str) -> str:
    if len(fids) == 1:
        return f"{fids[0]} is {state}"
    return f"{', '.join(fids[:-1])} and {fids[-1]} are {state}"


def summary(reports: list[Report]) -> str:
    """The last line of a run that exits 0: each family's state now (what a dry run would leave),
    and what the probes proved. One line for apply, verify and revert, so a log's tail says it."""
    labels = []
    for r in reports:
        for s in r.statuses:
            if r.dry_run and s.family.id in r.planned:
                labels.append(f"to {r.action}")
            elif r.action == "revert" and s.state is State.PENDING:  # revert's goal
                labels.append("as published")
            else:
                labels.append(s.state.value)
    counts = ", ".join(f"{labels.count(v)} {v}" for v in dict.fromkeys(labels))
    probes = [p["status"] for r in reports for s in r.statuses for p in s.probes]
    outcomes = ("passed", "not importable", "not in release")
    proved = ", ".join(f"{probes.count(v)} {v}" for v in outcomes if v in probes) or "not run"
    families = f"{len(labels)} famil{'y' if len(labels) == 1 else 'ies'}"
    dry = " would be" if any(r.dry_run for r in reports) else ""
    return f"exit 0: {families}{dry} in the wanted state ({counts}); probes: {proved}"


# --- findings and releases, as every command that judges shows them --------------------------------

def finding_lines(f: Finding) -> list[str]:
    """One finding: its level and code, then (unless ok) what was wanted, found, and the hint."""
    label = f.level.upper() if f.level in (PROBLEM, UNKNOWN) else f.level
    lines = [f"  {label:8} {f.code}: {f.message}"]
    for name, text in (("wanted", f.wanted), ("found", f.found), ("hint", f.hint)):
        if text and f.level != "ok":
            lines.append(f"           {name + ':':8}{text}")
    return lines


def findings_lines(findings: list[Finding]) -> list[str]:
    return [line for f in findings for line in finding_lines(f)]


def counts(findings: list[Finding]) -> dict[str, int]:
    return {level: sum(f.level == level for f in findings) for level in LEVELS}


def release_json(release: Release | None) -> dict | None:
    if release is None:
        return None
    return {"name": release.name, "version": str(release.version) if release.version else None,
            "source": release.source, "site": str(release.site) if release.site else None, "python": release.python,
            "families": {f.family.id: f.state for f in release.families}}


# --- patcher drafter check | fix (patcher.drafter.check/1, patcher.drafter.fix/1) --------------------
CHECK_SCHEMA = "patcher.drafter.check/1"
FIX_SCHEMA = "patcher.drafter.fix/1"
NO_ENGINE_WARNING = ("warning: no engine found or named: the engine-specific checks are hints, not a pass; name "
                     "the release (--engine E --engine-version V, or --python / --site), or add --strict to exit "
                     "1 here")


def check_json(ckpt: Checkpoint, target_path, release: Release | None, findings: list[Finding], code: int) -> dict:
    return {"schema": CHECK_SCHEMA, "drafter": str(ckpt.folder.absolute()),
            "target": str(target_path.absolute()) if target_path else None,
            "engine": release_json(release), "findings": [f.to_json() for f in findings],
            "counts": counts(findings), "exit": code}


def check_lines(ckpt: Checkpoint, drafter: DrafterConfig, target_path, target: TargetConfig | None,
                release: Release | None, findings: list[Finding]) -> list[str]:
    fmt = "speculators" if drafter.format == "speculators" else ", ".join(drafter.architectures) or "no architecture"
    out = [f"drafter: {ckpt.folder} ({fmt}; {len(ckpt.tensors)} tensors in {len(ckpt.files)} file(s))"]
    if target is not None:
        out.append(f"target:  {target_path} ({target.model_type}/{target.text_model_type}, "
                   f"{target.num_hidden_layers} layers, hidden {target.hidden_size}, vocab {target.vocab_size})")
    if release is None:
        out.append("engine:  none installed or named (engine-specific checks are hints)")
    else:
        where = f" at {release.site}" if release.site else ""
        out.append(f"engine:  {release.label()} ({release.source}{where})")
    return [*out, *findings_lines(findings), f"result:  {tally(findings)}"]


def fix_json(done: FixOutcome, release: Release, code: int) -> dict:
    plan, result = done.plan, done.written
    renamed = {"from": plan.rename_from, "to": plan.rename_to, "count": plan.renamed} if plan.rename_from else None
    return {"schema": FIX_SCHEMA, "drafter": str(done.source.folder.absolute()),
            "out": str(result.out.absolute()) if result else None,
            "engine": release_json(release), "renamed": renamed, "config_rewritten": plan.config_rewritten,
            "notes": list(plan.notes), "files": list(result.files) if result else [],
            "tensors_verified": result.tensors_verified if result else 0,
            "bytes_verified": result.bytes_verified if result else 0,
            "problems": [f.to_json() for f in done.remaining], "exit": code}


def fix_lines(done: FixOutcome, release: Release) -> list[str]:
    plan, result, remaining = done.plan, done.written, done.remaining
    if result is None:  # nothing to fix: say so, and list the problems no copy can mend
        out = list(plan.notes)
        if remaining:
            out.append(f"{len(remaining)} problem(s) remain that no copy of the drafter can mend:")
            out += findings_lines(remaining)
        return out
    out = [f"wrote {result.out} for {release.label()}", *(f"  {note}" for note in plan.notes),
           f"  {result.tensors_verified} tensors ({result.bytes_verified} bytes) verified identical by sha256"]
    if remaining:
        out.append(f"the copy still has {len(remaining)} problem(s) {release.label()} would run into:")
        out += findings_lines(remaining)
        out.append(f"result:  copy kept at {result.out}; {len(remaining)} problem(s) remain")
    return out


# --- patcher doctor (patcher.doctor/1) --------------------------------------------------------------

def doctor_json(r: verdict.DoctorReport) -> dict:
    findings = r.findings()
    code = r.exit_code
    release = r.release
    return {
        "schema": verdict.SCHEMA, "command": list(r.command.command),
        "engine": {"name": release.name, "version": str(release.version), "site": str(release.site),
                   "python": release.python},
        "target": r.command.target, "drafter": r.command.drafter, "tp": r.command.tp,
        "env": {name: {"read": v.read, "default": v.default, "value": r.environ.get(name),
                       "from_command": name in r.command.env} for name, v in r.env.items()},
        "verify": as_dict(r.verify, False),
        "findings": [f.to_json() for f in findings],
        "counts": counts(findings) | {"reasons": len(r.reasons()), "from_verify": len(r.install_reasons())},
        "families": [{"id": fm.status.family.id, "state": fm.status.state.value, "meets": fm.meet.answer,
                      "why": fm.meet.why} for fm in r.families],
        "strict": r.strict, "gpu": r.gpu,
        "not_checked": [] if r.probes else ["whether the engine imports here: --probes runs the probes"],
        "parsed_by": r.parsed_by, "verdict": r.verdict, "reasons": r.reasons(), "next": r.next_steps(),
        "exit": code,
    }


def doctor_lines(r: verdict.DoctorReport) -> list[str]:
    cmd = r.command
    out = [f"command: {' '.join(cmd.command)[:160]}", f"engine:  {r.release.label()} (installed at {r.release.site})"]
    out.append("verify:" if r.probes else "verify (no probes; --probes runs them):")
    out += ["  " + line for line in as_text(r.verify, False)]
    out += ["launch:", *findings_lines(r.launch)]
    if r.drafter:
        out += [f"drafter check ({cmd.drafter}):", *findings_lines(r.drafter)]
    reasons = r.reasons()
    out += [f"next:    {step}" for step in r.next_steps()]
    from_verify = len(r.install_reasons())
    counted = f"{len(reasons)} reason(s): {from_verify} from verify, " if reasons else ""
    unproven = "" if r.probes else "; not checked: whether the engine imports here (--probes checks it)"
    out.append(f"verdict: {r.verdict} ({counted}{tally(r.findings())}{unproven})")
    if reasons:
        out.append(f"exit {r.exit_code}: " + "; ".join(reasons))
    return out


def mismatch_json(exc: which_engine.EngineMismatch, command: list[str]) -> dict:
    """The command names another engine than the one installed: no-go, before anything is read."""
    return {"schema": verdict.SCHEMA, "command": command, "engine": None, "verify": None, "findings": [],
            "counts": dict.fromkeys(LEVELS, 0), "verdict": "no-go", "reasons": [exc.what], "next": [], "exit": 1}


def mismatch_lines(exc: which_engine.EngineMismatch) -> list[str]:
    return [*(line.replace("error: ", "no-go: ", 1) for line in exc.lines()), "verdict: no-go", f"exit 1: {exc.what}"]
