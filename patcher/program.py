"""The program's name as the user started it, for every line that names a command to run: 'patcher
apply', or '.venv/bin/python -m patcher apply' where ``python -m patcher`` started it (the name
``patcher/__main__.py`` passes). ``patcher.cli.main`` sets it once per run, before anything is
produced, and leaves it plain for ``--json`` (a machine reads the command, not a shell); every
producer asks ``command(...)`` where it makes the line, so no output is rewritten afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

NAME = "patcher"
_name: ContextVar[str] = ContextVar("program", default=NAME)


def name() -> str:
    """The program's name: 'patcher', or how ``python -m patcher`` was started."""
    return _name.get()


def command(words: str) -> str:
    """'<program> <words>': a command line the user can type as it stands."""
    return f"{_name.get()} {words}"


@contextlib.contextmanager
def named(name: str) -> Iterator[None]:
    """Within: every ``command`` names the program ``name``."""
    token = _name.set(name)
    try:
        yield
    finally:
        _name.reset(token)
