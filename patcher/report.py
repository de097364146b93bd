"""Reports as text for people and JSON for machines (schema in the README)."""

from __future__ import annotations

from typing import Any

from .actions import Report
from .plan import State

# The JSON of apply / verify / revert (README "--json schema"). A change that could break a
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
        "exit": r.exit_code(strict), "reasons": r.reasons(strict),
        "families": [{
            "id": s.family.id, "title": s.family.title, "state": s.state.value, "variant": s.variant,
            "detail": s.detail, "hint": s.hint, "untested": s.untested, "warnings": s.warnings,
            "files": {k: v.value for k, v in s.files.items()}, "probes": s.probes, "enable": _enable(s),
        } for s in r.statuses],
    }


def as_text(r: Report, strict: bool) -> list[str]:
    """The report, without the closing exit line (the CLI prints one for all engines)."""
    i = r.install
    verb = {"apply": "would apply" if r.dry_run else "applied", "revert": "would revert" if r.dry_run else "reverted"}
    out = [f"{i.engine} {i.version} at {i.site}" + (f" (python: {i.python})" if i.python else "")]
    for s in r.statuses:
        variant = f" [{s.variant}]" if s.variant and s.state in (State.APPLIED, State.PENDING, State.LOST) else ""
        untested = " (untested release)" if s.untested and s.state is not State.UNKNOWN else ""
        out.append(f"  {_mark(s):4} {s.family.id}: {s.state.value}{untested}{variant}: {s.detail}")
        if s.state is State.APPLIED and _enable(s):
            out.append(f"       turn on: {_enable(s)}")
        for w in s.warnings:
            out.append(f"       warning: {w}")
        for p in s.probes:
            extra = f": {p['detail']}" if p["detail"] else ""
            out.append(f"       probe {p['id']}: {p['status']}{extra}")
        if s.hint and s.state not in (State.APPLIED, State.UPSTREAM) and not (
                r.action == "revert" and s.state in (State.PENDING, State.UNKNOWN)):  # what revert is for
            out.append(f"       hint: {s.hint}")
    if r.action in verb:
        idle = "nothing" if r.reasons(strict) else "nothing (already in the wanted state)"
        out.append(f"  {verb[r.action]}: {', '.join(r.changed) if r.changed else idle}")
    out.extend(f"  note: {n}" for n in r.notes)
    return out
