"""Findings of ``drafter check``: one fact each, with the level that decides the exit code."""

from __future__ import annotations

from dataclasses import asdict, dataclass

OK = "ok"
PROBLEM = "problem"  # the engine would read the drafter differently than it was trained: exit 1
HINT = "hint"  # worth knowing, not wrong by itself: exit 0
UNKNOWN = "unknown"  # no fact about this release covers it: never a pass (exit 1, doctor: not "go")
LEVELS = (OK, PROBLEM, HINT, UNKNOWN)


@dataclass(frozen=True)
class Finding:
    level: str
    code: str  # stable dotted id, e.g. "keys.decoder_prefix"; machines match on it
    message: str
    wanted: str = ""
    found: str = ""
    hint: str = ""

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"unknown finding level {self.level!r}")

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def ok(code: str, message: str, **kw: str) -> Finding:
    return Finding(OK, code, message, **kw)


def problem(code: str, message: str, **kw: str) -> Finding:
    return Finding(PROBLEM, code, message, **kw)


def hint(code: str, message: str, **kw: str) -> Finding:
    return Finding(HINT, code, message, **kw)


def unknown(code: str, message: str, **kw: str) -> Finding:
    return Finding(UNKNOWN, code, message, **kw)


def has_problem(findings: list[Finding]) -> bool:
    """A problem, or something no fact covers: either way the drafter is not known to run as trained."""
    return any(f.level in (PROBLEM, UNKNOWN) for f in findings)


def tally(findings: list[Finding]) -> str:
    """'1 problem(s), 1 unknown, 2 hint(s), 5 ok': the unknown count only when there is one."""
    n = {level: sum(f.level == level for f in findings) for level in LEVELS}
    unknown_part = f", {n[UNKNOWN]} unknown" if n[UNKNOWN] else ""
    return f"{n[PROBLEM]} problem(s){unknown_part}, {n[HINT]} hint(s), {n[OK]} ok"
