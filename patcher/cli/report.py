"""Reports as text for people and JSON for machines (schemas in docs/reference.md)."""

from __future__ import annotations

import re
from typing import Any

from .actions import Report
from .plan import State

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
        "site": str(i.site), "python": i.python, "changed": r.changed, "notes": r.notes,
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
        if s.state is State.APPLIED and _enable(s):
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
            out.append(f"       hint: {s.hint}")
    if r.action in verb and not (quiet and not r.changed):
        idle = "nothing" if r.reasons(strict) else "nothing (already in the wanted state)"
        out.append(f"  {verb[r.action]}: {', '.join(r.changed) if r.changed else idle}")
    out.extend(f"  note: {n}" for n in r.notes if not quiet)
    if verbose and r.timings:
        out.append("  took: " + ", ".join(f"{phase} {sec:.2f} s" for phase, sec in r.timings.items()))
    return out if not quiet or len(out) > 1 else []


def _quiet_ok(r: Report, s, strict: bool) -> bool:
    """A family -q leaves out: ok, no failed probe, and (under --strict) nothing that fails the run."""
    if r.action == "revert" and s.state is State.PENDING:
        return True
    if _mark(s) != "ok":
        return False
    return not (strict and (s.warnings or s.untested or any(p["status"] != "passed" for p in s.probes)))


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


def summary(reports: list[Report]) -> str:
    """The last line of a verify that exits 0: what was found, and what the probes proved."""
    states = [s.state.value for r in reports for s in r.statuses]
    counts = ", ".join(f"{states.count(v)} {v}" for v in ("applied", "upstream") if v in states)
    probes = [p["status"] for r in reports for s in r.statuses for p in s.probes]
    outcomes = ("passed", "not importable", "not in release")
    proved = ", ".join(f"{probes.count(v)} {v}" for v in outcomes if v in probes) or "not run"
    families = f"{len(states)} famil{'y' if len(states) == 1 else 'ies'}"
    return f"exit 0: {families} in the wanted state ({counts}); probes: {proved}"
