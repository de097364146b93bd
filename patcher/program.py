"""The program's name as the user started it, for every line that names a command to run: 'patcher
apply', or '.venv/bin/python -m patcher apply' where ``python -m patcher`` started it (the name
``patcher/__main__.py`` passes). ``patcher.cli.main`` sets it once per run, before anything is
produced, and leaves it plain for ``--json`` (a machine reads the command, not a shell); every
producer asks ``command(...)`` where it makes the line, so no output is rewritten afterwards.

The same holds for where the engine is: within ``located(python, site)`` (an apply, verify or revert
run told --python or --site), every apply/verify/revert line carries that option, hints and errors
alike, so each can be pasted as it stands.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

NAME = "patcher"
_name: ContextVar[str] = ContextVar("program", default=NAME)
_where: ContextVar[str] = ContextVar("where", default="")
_LOCATED = frozenset({"apply", "verify", "revert"})  # the commands located() speaks for


def name() -> str:
    """The program's name: 'patcher', or how ``python -m patcher`` was started."""
    return _name.get()


def command(words: str) -> str:
    """'<program> <words>': a command line the user can type as it stands."""
    where = _where.get() if words.split(" ", 1)[0] in _LOCATED else ""
    return f"{_name.get()} {words}{where}"


@contextlib.contextmanager
def named(name: str) -> Iterator[None]:
    """Within: every ``command`` names the program ``name``."""
    token = _name.set(name)
    try:
        yield
    finally:
        _name.reset(token)


@contextlib.contextmanager
def located(python: str | None, site: Path | None) -> Iterator[None]:
    """Within: every apply/verify/revert ``command`` carries ``--python python`` (else ``--site site``)."""
    token = _where.set(f" --python {shlex.quote(python)}" if python else
                       f" --site {shlex.quote(str(site))}" if site is not None else "")
    try:
        yield
    finally:
        _where.reset(token)
