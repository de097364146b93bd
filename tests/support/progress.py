"""Lines for a person at a terminal while the tests fetch wheels and build CPU environments.

A cold run spends minutes there (issue 34: 189 s for one engine line) inside pytest's output
capture, and under xdist inside worker processes whose output nobody sees. The controller, when
its own output is a terminal, names that terminal in ``KIMI_TEST_PROGRESS``; every process that
fetches or builds writes its lines there. Piped, in CI, or with no terminal: nothing is written.
"""

from __future__ import annotations

import os

ENV = "KIMI_TEST_PROGRESS"


def destination(on_terminal: bool, tty: str = "/dev/tty") -> str | None:
    """Where progress goes: the controlling terminal, when the run's output is one and it opens."""
    if not on_terminal:
        return None
    try:
        with open(tty, "a"):
            return tty
    except OSError:  # no controlling terminal (a daemon, a container without -t)
        return None


def say(line: str) -> None:
    """One line to the terminal named in ``KIMI_TEST_PROGRESS``; nothing when there is none."""
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        with open(path, "a") as tty:
            tty.write(f"\n[tests] {line}\n")
    except OSError:
        pass
