"""Findings of ``drafter check``: one fact each, with the level that decides the exit code."""

from __future__ import annotations

from dataclasses import asdict, dataclass

OK = "ok"
PROBLEM = "problem"  # the engine would read the drafter differently than it was trained: exit 1
HINT = "hint"  # worth knowing, not wrong by itself: exit 0
LEVELS = (OK, PROBLEM, HINT)


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


def has_problem(findings: list[Finding]) -> bool:
    return any(f.level == PROBLEM for f in findings)
